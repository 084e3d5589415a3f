//! Schema/1 compiler and validator: arbitrary bytes must never panic.
//!
//! Input layout: `<schema file bytes> [0x00 <instance JSON bytes>]`. A NUL
//! byte can never occur in a JSON text, so it is a safe separator. Without
//! one, the schema document is validated against itself.
#![no_main]

use flow::json;
use flow::schema::Schema;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (schema_bytes, instance_bytes) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], Some(&data[at + 1..])),
        None => (data, None),
    };
    let Ok(schema) = Schema::compile_file(schema_bytes) else {
        return;
    };
    let instance = match instance_bytes {
        Some(bytes) => match json::parse(bytes) {
            Ok(value) => value,
            Err(_) => return,
        },
        None => json::parse(schema_bytes).expect("a compiled schema file parses as JSON/1"),
    };
    let first = schema.validate(&instance).is_ok();
    let second = schema.validate(&instance).is_ok();
    assert_eq!(first, second, "validation is not deterministic");
});
