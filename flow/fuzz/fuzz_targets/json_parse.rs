//! JSON/1 parser: arbitrary bytes must never panic. Whatever parses must be
//! JSON/1-valid and must round-trip through its canonical form unchanged.
#![no_main]

use flow::json;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = json::parse(data) else {
        return;
    };
    assert!(
        json::check(&value).is_ok(),
        "parse accepted a non-JSON/1 value"
    );
    let canonical = json::canonical(&value);
    let again = json::parse(&canonical).expect("canonical form must parse");
    assert!(
        json::equal(&value, &again),
        "canonical round trip changed the value"
    );
    assert_eq!(
        json::canonical(&again),
        canonical,
        "canonical form is not a fixed point"
    );
});
