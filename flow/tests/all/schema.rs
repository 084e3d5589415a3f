use flow::schema::{Invalid, Schema};
use serde_json::json;

use crate::data;

#[test]
fn example_schemas_compile_and_correlate_outcomes() {
    for file in [
        "input.schema.json",
        "settings.schema.json",
        "result.schema.json",
    ] {
        Schema::compile_file(&data(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    }
    let result = Schema::compile_file(&data("result.schema.json")).unwrap();
    assert!(result
        .validate(&json!({"outcome": "done", "output": {"artifact": "a", "score": 0.5}}))
        .is_ok());
    let Err(Invalid::Diagnostic(d)) =
        result.validate(&json!({"outcome": "done", "output": {"reason": "x"}}))
    else {
        panic!("expected a diagnostic");
    };
    assert_eq!(d.schema_pointer, "/oneOf");
    assert_eq!(d.keyword, Some("oneOf"));
    assert_eq!(d.instance_pointer, "");
}
