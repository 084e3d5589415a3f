//! FLOW.md parser: arbitrary bytes must never panic. Accepted frontmatter
//! must be a JSON/1 value.
#![no_main]

use flow::{json, package};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(metadata) = package::parse_metadata(data) else {
        return;
    };
    assert!(
        json::check(&metadata.value).is_ok(),
        "accepted frontmatter is not JSON/1"
    );
});
