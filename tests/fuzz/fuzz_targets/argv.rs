//! Command lines as the kernel hands them over: any bytes. Splitting and redacting must not
//! panic, and a secret among any other arguments is masked. (/proc text is parsed by the
//! procfs crate.)
#![no_main]
use libfuzzer_sys::fuzz_target;
use pipetrace_core::{event::split_argv, redact::Redactor};

const SECRET: &str = "S3CR3Tvalue";

fuzz_target!(|data: &[u8]| {
    let mut argv = split_argv(data);
    argv.retain(|a| !a.contains("S3CR3T"));
    let at = data.first().map_or(0, |&b| b as usize % (argv.len() + 1));
    argv.insert(at, format!("--password={SECRET}"));
    // Built once: compiling its regexes per input would leave little time for inputs.
    static REDACTOR: std::sync::OnceLock<Redactor> = std::sync::OnceLock::new();
    let redactor = REDACTOR.get_or_init(|| Redactor::new(true, &[]).expect("default redactor"));
    let shown = redactor.argv(&argv).join(" ");
    assert!(!shown.contains(SECRET), "leaked: {shown}");
});
