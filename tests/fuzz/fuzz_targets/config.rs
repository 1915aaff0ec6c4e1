//! A config file and environment variables from the input: loading either gives a config
//! that passed validation or an error that names what is wrong; it never panics.
#![no_main]
use std::io::Write;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // YAML text, then after a NUL byte `KEY=value` lines for the environment.
    let (yaml, env) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let vars: Vec<(String, String)> = String::from_utf8_lossy(env)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    file.write_all(yaml).expect("write");
    let flags = pipetrace_config::Flags::default();
    if let Err(e) = pipetrace_config::load(Some(file.path()), vars, &flags) {
        assert!(!e.to_string().is_empty(), "an error says what is wrong");
    }
});
