//! A config file and environment variables from the input: loading either gives a config
//! that passed validation or an error that names what is wrong; it never panics.
#![no_main]
use std::io::Write;

use libfuzzer_sys::fuzz_target;

/// The variables `load` reads (figment's Env takes PIPETRACE_ in any case).
fn read_by_load(name: &str) -> bool {
    let name = name.trim().to_ascii_uppercase();
    name.starts_with("PIPETRACE_") || name.starts_with("OTEL_")
}

fuzz_target!(|data: &[u8]| {
    // YAML text, then after a NUL byte `KEY=value` lines for the environment.
    let (yaml, env) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let env = String::from_utf8_lossy(env);
    // `load` reads the process environment: this input's variables replace the last one's.
    // SAFETY: libFuzzer calls the target from one thread; no other thread reads the
    // environment.
    unsafe {
        for (name, _) in std::env::vars_os() {
            if read_by_load(&name.to_string_lossy()) {
                std::env::remove_var(name);
            }
        }
        for (name, value) in env.lines().filter_map(|l| l.split_once('=')) {
            // What an environment can hold: a name, no NUL.
            if read_by_load(name) && !name.contains('\0') && !value.contains('\0') {
                std::env::set_var(name, value);
            }
        }
    }
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    file.write_all(yaml).expect("write");
    let flags = pipetrace_config::Flags::default();
    if let Err(e) = pipetrace_config::load(Some(file.path()), &flags) {
        assert!(!e.to_string().is_empty(), "an error says what is wrong");
    }
});
