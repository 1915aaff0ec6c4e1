//! Ring-buffer records: any bytes decode to an event or to a counted error, never a panic
//! or an out-of-bounds read.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = pipetrace_core::event::decode(data);
});
