use super::*;
use serde_json::json;

fn compile(v: Value) -> Result<Schema, SchemaError> {
    Schema::compile_value(&v)
}

#[test]
fn validates_a_simple_object() {
    let s = compile(json!({
        "$schema": SCHEMA_URI,
        "type": "object",
        "properties": {"a": {"type": "integer", "minimum": 1}},
        "required": ["a"],
        "additionalProperties": false
    }))
    .unwrap();
    assert!(s.validate(&json!({"a": 2})).is_ok());
    let Err(Invalid::Diagnostic(d)) = s.validate(&json!({"a": 0})) else {
        panic!()
    };
    assert_eq!(d.instance_pointer, "/a");
    assert_eq!(d.schema_pointer, "/properties/a/minimum");
    assert_eq!(d.keyword, Some("minimum"));
}

#[test]
fn codes() {
    let code = |v| compile(v).unwrap_err().code;
    assert_eq!(code(json!({"type": "object"})), SCHEMA_INVALID);
    assert_eq!(
        code(json!({"$schema": SCHEMA_URI, "format": "x"})),
        SCHEMA_KEYWORD_UNSUPPORTED
    );
    assert_eq!(
        code(json!({"$schema": SCHEMA_URI, "$ref": "#/$defs/a"})),
        SCHEMA_REFERENCE_INVALID
    );
    assert_eq!(
        code(json!({"$schema": SCHEMA_URI, "$defs": {"a": {"$ref": "#/$defs/a"}}})),
        SCHEMA_REFERENCE_INVALID
    );
    assert_eq!(
        code(json!({"$schema": SCHEMA_URI, "minLength": -1})),
        SCHEMA_INVALID
    );
}
