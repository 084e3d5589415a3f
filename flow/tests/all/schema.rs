use flow::schema::{
    codes::*, Invalid, Schema, MAX_SCHEMA_BYTES, MAX_SCHEMA_DEPTH, MAX_SCHEMA_NODES, SCHEMA_URI,
    WORK_BUDGET,
};
use serde_json::{json, Value};

use crate::data;

fn with_root(mut body: Value) -> Value {
    body.as_object_mut()
        .unwrap()
        .insert("$schema".into(), json!(SCHEMA_URI));
    body
}

fn compile(body: Value) -> Result<Schema, flow::schema::SchemaError> {
    Schema::compile_value(&with_root(body))
}

fn code(body: Value) -> &'static str {
    compile(body).unwrap_err().code
}

fn diagnostic(schema: &Schema, instance: Value) -> flow::schema::Diagnostic {
    match schema.validate(&instance) {
        Err(Invalid::Diagnostic(d)) => d,
        other => panic!("expected a diagnostic, got {other:?}"),
    }
}

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
    assert!(result
        .validate(&json!({"outcome": "blocked", "output": {"reason": "x"}}))
        .is_ok());
    let d = diagnostic(
        &result,
        json!({"outcome": "done", "output": {"reason": "x"}}),
    );
    assert_eq!(d.schema_pointer, "/oneOf");
    assert_eq!(d.keyword, Some("oneOf"));
    assert_eq!(d.instance_pointer, "");
}

#[test]
fn root_rules() {
    assert_eq!(
        Schema::compile_value(&json!(true)).unwrap_err().code,
        SCHEMA_INVALID
    );
    assert_eq!(
        Schema::compile_value(&json!({"type": "object"}))
            .unwrap_err()
            .code,
        SCHEMA_INVALID
    );
    assert_eq!(
        Schema::compile_value(&json!({"$schema": "https://json-schema.org/draft/2020-12/schema"}))
            .unwrap_err()
            .code,
        SCHEMA_INVALID
    );
    assert!(compile(json!({})).is_ok());
    assert!(compile(json!({"properties": {"a": false, "b": true}})).is_ok());
    // `$schema` and `$defs` only at the file root.
    assert_eq!(
        code(json!({"not": {"$schema": SCHEMA_URI}})),
        SCHEMA_INVALID
    );
    assert_eq!(code(json!({"$defs": {"a": {"$defs": {}}}})), SCHEMA_INVALID);
    assert_eq!(code(json!({"items": {"$defs": {}}})), SCHEMA_INVALID);
}

#[test]
fn json_failures_are_schema_invalid_json() {
    for bytes in [
        &b"{\"$schema\": 1, \"$schema\": 2}"[..],
        b"\xEF\xBB\xBF{}",
        b"{\"a\": \xFF}",
        b"{\"minimum\": 1e400}",
        b"{",
    ] {
        assert_eq!(
            Schema::compile_file(bytes).unwrap_err().code,
            SCHEMA_INVALID_JSON
        );
    }
}

#[test]
fn keyword_allowlist() {
    for keyword in [
        "$id",
        "$anchor",
        "$dynamicAnchor",
        "$dynamicRef",
        "$vocabulary",
        "$recursiveRef",
        "definitions",
        "default",
        "format",
        "pattern",
        "patternProperties",
        "contentEncoding",
        "contentMediaType",
        "contentSchema",
        "unevaluatedItems",
        "unevaluatedProperties",
        "multipleOf",
        "uniqueItems",
        "propertyNames",
        "dependencies",
        "additionalItems",
        "readOnly",
        "deprecated",
        "x-custom",
    ] {
        assert_eq!(
            code(json!({ keyword: true })),
            SCHEMA_KEYWORD_UNSUPPORTED,
            "{keyword}"
        );
        let nested =
            compile(json!({"properties": {"a": {"items": { keyword: true }}}})).unwrap_err();
        assert_eq!(nested.code, SCHEMA_KEYWORD_UNSUPPORTED, "{keyword}");
        assert_eq!(
            nested.pointer,
            format!(
                "/properties/a/items/{}",
                keyword.replace('~', "~0").replace('/', "~1")
            )
        );
    }
}

#[test]
fn keyword_value_shapes() {
    for body in [
        json!({"type": "int"}),
        json!({"type": []}),
        json!({"type": ["string", "string"]}),
        json!({"type": 1}),
        json!({"enum": "a"}),
        json!({"enum": [[1]]}),
        json!({"enum": [{"a": 1}]}),
        json!({"const": {"a": 1}}),
        json!({"const": []}),
        json!({"allOf": []}),
        json!({"anyOf": {}}),
        json!({"oneOf": [1]}),
        json!({"not": "x"}),
        json!({"if": null}),
        json!({"properties": []}),
        json!({"properties": {"a": 1}}),
        json!({"required": ["a", "a"]}),
        json!({"required": "a"}),
        json!({"required": [1]}),
        json!({"additionalProperties": {"type": 1}}),
        json!({"minProperties": -1}),
        json!({"maxProperties": 1.5}),
        json!({"maxItems": "1"}),
        json!({"dependentRequired": {"a": ["b", "b"]}}),
        json!({"dependentRequired": {"a": "b"}}),
        json!({"dependentSchemas": {"a": 0}}),
        json!({"prefixItems": []}),
        json!({"items": [true]}),
        json!({"contains": 3}),
        json!({"minLength": null}),
        json!({"minimum": "0"}),
        json!({"title": 1}),
        json!({"description": []}),
        json!({"$comment": false}),
        json!({"examples": {}}),
        json!({"$defs": []}),
        json!({"$ref": 1}),
    ] {
        assert_eq!(code(body.clone()), SCHEMA_INVALID, "{body}");
    }
    // Integral numbers written with a fraction are still integers.
    assert!(compile(
        json!({"minItems": 2.0, "examples": [1, {"a": []}], "enum": [1, "a", null, true]})
    )
    .is_ok());
}

#[test]
fn definitions_and_references() {
    let name64 = format!("A{}", "b".repeat(63));
    assert!(
        compile(json!({"$defs": {name64.clone(): true}, "$ref": format!("#/$defs/{name64}")}))
            .is_ok()
    );
    for bad in ["1a", "a-b", "a_b", "", "é"] {
        assert_eq!(code(json!({"$defs": {bad: true}})), SCHEMA_INVALID, "{bad}");
    }
    assert_eq!(
        code(json!({"$defs": {format!("{name64}c"): true}})),
        SCHEMA_INVALID
    );

    for reference in [
        "#/$defs/missing",
        "#/definitions/a",
        "other.json#/$defs/a",
        "#/$defs/a/properties/b",
        "#/%24defs/a",
        "#/$defs/a~0",
        "#a",
        "#",
        "",
    ] {
        let e = compile(json!({"$defs": {"a": true}, "properties": {"p": {"$ref": reference}}}))
            .unwrap_err();
        assert_eq!(e.code, SCHEMA_REFERENCE_INVALID, "{reference}");
        assert_eq!(e.pointer, "/properties/p/$ref");
    }
    // Cycles, direct and indirect, through any schema position.
    assert_eq!(
        code(json!({"$defs": {"a": {"items": {"$ref": "#/$defs/a"}}}})),
        SCHEMA_REFERENCE_INVALID
    );
    assert_eq!(
        code(
            json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"not": {"$ref": "#/$defs/a"}}}, "$ref": "#/$defs/a"})
        ),
        SCHEMA_REFERENCE_INVALID
    );
    // A diamond is not a cycle.
    let s = compile(json!({
        "$defs": {
            "a": {"allOf": [{"$ref": "#/$defs/b"}, {"$ref": "#/$defs/c"}]},
            "b": {"$ref": "#/$defs/d"},
            "c": {"$ref": "#/$defs/d"},
            "d": {"type": "string"}
        },
        "$ref": "#/$defs/a"
    }))
    .unwrap();
    assert!(s.validate(&json!("x")).is_ok());
    let d = diagnostic(&s, json!(1));
    assert_eq!(d.schema_pointer, "/$defs/d/type");
}

#[test]
fn byte_limit() {
    let padded = |total: usize| {
        let mut text = format!("{{\"$schema\":\"{SCHEMA_URI}\"}}").into_bytes();
        text.resize(total, b' ');
        text
    };
    assert!(Schema::compile_file(&padded(MAX_SCHEMA_BYTES)).is_ok());
    assert_eq!(
        Schema::compile_file(&padded(MAX_SCHEMA_BYTES + 1))
            .unwrap_err()
            .code,
        SCHEMA_LIMIT_EXCEEDED
    );
    // In memory, the canonical size counts.
    let big = "d".repeat(MAX_SCHEMA_BYTES);
    assert_eq!(code(json!({"description": big})), SCHEMA_LIMIT_EXCEEDED);
}

fn nested_not(depth: usize) -> Value {
    let mut v = json!({});
    for _ in 1..depth {
        v = json!({ "not": v });
    }
    v
}

#[test]
fn depth_limit() {
    assert!(compile(nested_not(MAX_SCHEMA_DEPTH)).is_ok());
    assert_eq!(
        code(nested_not(MAX_SCHEMA_DEPTH + 1)),
        SCHEMA_LIMIT_EXCEEDED
    );
    // Definitions are children of the root.
    assert!(compile(json!({"$defs": {"a": nested_not(MAX_SCHEMA_DEPTH - 1)}})).is_ok());
    assert_eq!(
        code(json!({"$defs": {"a": nested_not(MAX_SCHEMA_DEPTH)}})),
        SCHEMA_LIMIT_EXCEEDED
    );
}

fn properties(n: usize) -> Value {
    let map: serde_json::Map<String, Value> =
        (0..n).map(|i| (format!("p{i}"), json!(true))).collect();
    json!({ "properties": map })
}

#[test]
fn node_limit() {
    assert!(compile(properties(MAX_SCHEMA_NODES - 1)).is_ok());
    assert_eq!(code(properties(MAX_SCHEMA_NODES)), SCHEMA_LIMIT_EXCEEDED);
    // `$ref` does not duplicate its target.
    let mut body = properties(MAX_SCHEMA_NODES - 3);
    body["$defs"] = json!({"big": {"type": "string"}});
    body["properties"]["p0"] = json!({"$ref": "#/$defs/big"});
    assert!(compile(body).is_ok());
}

fn metered(schema: &Schema, instance: &Value) -> (Result<(), Invalid>, u64) {
    schema.validate_metered(instance)
}

#[test]
fn work_meter_at_and_past_the_budget() {
    // 1 for the (root, root) pair, the string length, and 1 per bound.
    let s = compile(json!({"minLength": 0})).unwrap();
    let at = Value::String("é".repeat((WORK_BUDGET - 2) as usize));
    assert_eq!(metered(&s, &at), (Ok(()), WORK_BUDGET));
    let past = Value::String("a".repeat((WORK_BUDGET - 1) as usize));
    assert_eq!(s.validate(&past), Err(Invalid::LimitExceeded));
    assert_eq!(
        Invalid::LimitExceeded.code("INVALID_INPUT"),
        SCHEMA_LIMIT_EXCEEDED
    );
}

#[test]
fn exhaustion_takes_precedence_over_invalidity() {
    // `type` fails first, but the later length charge crosses the budget.
    let s = compile(json!({"type": "integer", "maxLength": 1})).unwrap();
    let long = Value::String("a".repeat(WORK_BUDGET as usize));
    assert_eq!(s.validate(&long), Err(Invalid::LimitExceeded));
    let short = Value::String("ab".into());
    assert!(matches!(s.validate(&short), Err(Invalid::Diagnostic(_))));
}

#[test]
fn exact_charges() {
    let cases = [
        // pair 1 + type 2
        (json!({"type": ["string", "null"]}), json!(null), 3),
        // pair 1 + enum 3 (all members, even after a match)
        (json!({"enum": [1, 2, 3]}), json!(1), 4),
        // pair + properties 2 + (a pair + type 1) + required 1 + additionalProperties 2 members
        //   + (b pair + false)
        (
            json!({"properties": {"a": {"type": "integer"}, "z": true}, "required": ["a"], "additionalProperties": false}),
            json!({"a": 1, "b": 2}),
            1 + 2 + 2 + 1 + 2 + 1,
        ),
        // pair + prefixItems 2 + item0 pair + items 1 + (items 1..3 pairs: 2) + minItems 1 + maxItems 1
        (
            json!({"prefixItems": [true, true], "items": {}, "minItems": 1, "maxItems": 9}),
            json!([1, 2, 3]),
            1 + 2 + 2 + 1 + 1 + 1 + 1,
        ),
        // pair + contains 3 items + 3 child pairs + (type 1 each) + minContains 1 + maxContains 1
        (
            json!({"contains": {"type": "integer"}, "minContains": 1, "maxContains": 2}),
            json!([1, "a", 2]),
            1 + 3 + 3 * 2 + 1 + 1,
        ),
        // if: pair + 1 + cond pair + type 1; then selected: 1 + then pair + const 1
        (
            json!({"if": {"type": "string"}, "then": {"const": "a"}, "else": false}),
            json!("a"),
            1 + 1 + 2 + 1 + 2,
        ),
        // if false: else selected
        (
            json!({"if": {"type": "string"}, "then": {"const": "a"}, "else": true}),
            json!(1),
            1 + 1 + 2 + 1 + 1,
        ),
        // not: pair + 1 + child pair
        (json!({"not": false}), json!(1), 3),
        // anyOf evaluates every branch
        (
            json!({"anyOf": [true, {"type": "null"}, true]}),
            json!(null),
            1 + 3 + 1 + 2 + 1,
        ),
        // dependentRequired: 2 triggers + 2 names of the present trigger
        (
            json!({"dependentRequired": {"a": ["b", "c"], "x": ["y"]}}),
            json!({"a": 1, "b": 1, "c": 1}),
            1 + 2 + 2,
        ),
        // dependentSchemas: 2 triggers, the present one evaluated on the same instance
        (
            json!({"dependentSchemas": {"a": {"minProperties": 1}, "x": false}}),
            json!({"a": 1}),
            1 + 2 + 2,
        ),
        // numbers: each comparison 1
        (
            json!({"minimum": 0, "exclusiveMinimum": -1, "maximum": 9, "exclusiveMaximum": 10}),
            json!(5),
            5,
        ),
        // string keywords do not apply to numbers
        (
            json!({"minLength": 1, "maxLength": 5, "properties": {"a": true}}),
            json!(5),
            1,
        ),
        // length: scalars counted once plus one per bound
        (
            json!({"minLength": 1, "maxLength": 5}),
            json!("ab😀"),
            1 + 3 + 2,
        ),
        // annotations and $defs cost nothing
        (
            json!({"title": "t", "description": "d", "$comment": "c", "examples": [1], "$defs": {"a": true}}),
            json!(1),
            1,
        ),
    ];
    for (body, instance, units) in cases {
        let s = compile(body.clone()).unwrap();
        let (_, charged) = metered(&s, &instance);
        assert_eq!(charged, units, "{body} against {instance}");
    }
}

#[test]
fn memoized_pairs_are_charged_once() {
    // Two branches reach the same definition against the same instance.
    let s = compile(json!({
        "$defs": {"A": {"minLength": 0}},
        "allOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/A"}]
    }))
    .unwrap();
    let text = "x".repeat(1_000);
    let (r, units) = metered(&s, &json!(text));
    assert!(r.is_ok());
    // root 1 + allOf 2 + two branch pairs 2 + two $ref 2 + A once (1 + 1000 + 1)
    assert_eq!(units, 1 + 2 + 2 + 2 + 1_002);

    // Without memoization this would be 2^40 evaluations; with it, linear.
    let mut defs = serde_json::Map::new();
    defs.insert("d0".into(), json!({"minLength": 0}));
    for i in 1..=40 {
        let prev = format!("#/$defs/d{}", i - 1);
        defs.insert(
            format!("d{i}"),
            json!({"allOf": [{"$ref": prev}, {"$ref": prev}]}),
        );
    }
    let s = compile(json!({"$defs": defs, "$ref": "#/$defs/d40"})).unwrap();
    let (r, units) = metered(&s, &json!("abc"));
    assert!(r.is_ok());
    assert!(units < 400, "{units}");
}

#[test]
fn evaluation_semantics_and_diagnostics() {
    let s = compile(json!({
        "type": "object",
        "properties": {
            "a/b": {"type": "integer"},
            "list": {"type": "array", "items": {"type": "string", "maxLength": 2}},
            "n": {"exclusiveMinimum": 0, "maximum": 10}
        },
        "required": ["a/b"],
        "additionalProperties": {"type": "boolean"},
        "dependentRequired": {"n": ["list"]}
    }))
    .unwrap();
    assert!(s
        .validate(&json!({"a/b": 1.0, "list": ["ab"], "n": 10, "x": true}))
        .is_ok());
    let cases = [
        (json!([]), "", "/type", "type"),
        (
            json!({"a/b": 1.5}),
            "/a~1b",
            "/properties/a~1b/type",
            "type",
        ),
        (
            json!({"a/b": 1, "list": ["abc"]}),
            "/list/0",
            "/properties/list/items/maxLength",
            "maxLength",
        ),
        (
            json!({"a/b": 1, "n": 0, "list": []}),
            "/n",
            "/properties/n/exclusiveMinimum",
            "exclusiveMinimum",
        ),
        (
            json!({"a/b": 1, "x": 1}),
            "/x",
            "/additionalProperties/type",
            "type",
        ),
        (json!({}), "", "/required", "required"),
        (
            json!({"a/b": 1, "n": 1}),
            "",
            "/dependentRequired",
            "dependentRequired",
        ),
    ];
    for (instance, ip, sp, kw) in cases {
        let d = diagnostic(&s, instance.clone());
        assert_eq!(
            (
                d.instance_pointer.as_str(),
                d.schema_pointer.as_str(),
                d.keyword
            ),
            (ip, sp, Some(kw)),
            "{instance}"
        );
    }
    let v = Invalid::Diagnostic(diagnostic(&s, json!({}))).to_value("INVALID_INPUT");
    assert_eq!(
        v,
        json!({"code": "INVALID_INPUT", "instancePointer": "", "schemaPointer": "/required", "keyword": "required", "message": "missing required property \"a/b\""})
    );

    let one = compile(json!({"oneOf": [{"type": "integer"}, {"minimum": 0}]})).unwrap();
    assert!(one.validate(&json!(-1)).is_ok());
    assert!(one.validate(&json!(1.5)).is_ok());
    assert_eq!(diagnostic(&one, json!(1)).keyword, Some("oneOf"));
    let c = compile(json!({"contains": {"const": 1}, "minContains": 2})).unwrap();
    assert!(c.validate(&json!([1, 1])).is_ok());
    assert_eq!(diagnostic(&c, json!([1, 2])).keyword, Some("minContains"));
    let c = compile(json!({"contains": {"const": 1}, "maxContains": 1})).unwrap();
    assert_eq!(diagnostic(&c, json!([1, 1])).keyword, Some("maxContains"));
    assert_eq!(diagnostic(&c, json!([2])).keyword, Some("contains"));
    let c = compile(json!({"contains": false, "minContains": 0})).unwrap();
    assert!(c.validate(&json!([1])).is_ok());
    let e = compile(json!({"enum": [1, "1", null]})).unwrap();
    assert!(e.validate(&json!(1.0)).is_ok());
    assert_eq!(diagnostic(&e, json!(true)).keyword, Some("enum"));
    let f = compile(json!({"properties": {"a": false}})).unwrap();
    let d = diagnostic(&f, json!({"a": 1}));
    assert_eq!(
        (d.schema_pointer.as_str(), d.keyword),
        ("/properties/a", None)
    );
    // Instances must be JSON/1 values.
    assert!(matches!(
        compile(json!({}))
            .unwrap()
            .validate(&json!(9007199254740992u64)),
        Err(Invalid::Json(_))
    ));
}

#[test]
fn long_reference_chains_evaluate_on_a_small_stack() {
    // 4,000 definitions, each referring to the next: the longest acyclic
    // path the node limit allows, evaluated on a 256 KiB thread stack.
    let n = MAX_SCHEMA_NODES - 2;
    let mut defs = serde_json::Map::new();
    for i in 0..n {
        let body = if i + 1 < n {
            json!({"$ref": format!("#/$defs/d{}", i + 1)})
        } else {
            json!({"type": "string"})
        };
        defs.insert(format!("d{i}"), body);
    }
    let s = compile(json!({"$defs": defs, "$ref": "#/$defs/d0"})).unwrap();
    let outcome = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || {
            (
                s.validate(&json!("x")).is_ok(),
                s.validate(&json!(1)).is_err(),
            )
        })
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(outcome, (true, true));
}
