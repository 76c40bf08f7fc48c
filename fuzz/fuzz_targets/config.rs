//! Configuration parsing and validation (`sluice_config::parse`) on any text.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Err(error) = sluice_config::parse(text) {
        // Rendering the error (field, line, caret) must not panic either.
        let _ = error.to_string();
    }
});
