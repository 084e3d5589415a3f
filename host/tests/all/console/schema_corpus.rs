//! (schema, value) cases for holding the console's in-page Schema/1
//! validator to `flow`'s: the schemas and instances of the flow crate's
//! own tests, one accepted and one refused case per keyword, the work
//! meter at its budget and one past it, the JSON/1 limits an instance
//! keeps, and schemas generated over every keyword from a fixed seed. The
//! answers are `flow::schema`'s, computed here.

use flow::schema::{Schema, SCHEMA_URI, WORK_BUDGET};
use serde_json::{json, Value};

/// One case: a schema file root, an instance, and whether `flow` accepts.
pub struct Case {
    pub schema: Value,
    pub value: Value,
    pub accepted: bool,
}

fn root(mut body: Value) -> Value {
    body.as_object_mut()
        .expect("a schema object")
        .insert("$schema".into(), json!(SCHEMA_URI));
    body
}

/// `flow`'s answer; the schema must compile (an admitted one does).
fn case(schema: Value, value: Value) -> Case {
    let compiled = Schema::compile_value(&schema)
        .unwrap_or_else(|e| panic!("the corpus schema {schema} does not compile: {e}"));
    let accepted = compiled.validate(&value).is_ok();
    Case {
        schema,
        value,
        accepted,
    }
}

/// The schemas of `flow/tests/data` with instances from flow's tests.
fn flow_data() -> Vec<Case> {
    let data = |name: &str| -> Value {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../flow/tests/data")
            .join(name);
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
    };
    let result = data("result.schema.json");
    let mut out = vec![
        case(
            result.clone(),
            json!({"outcome": "done", "output": {"artifact": "a", "score": 0.5}}),
        ),
        case(
            result.clone(),
            json!({"outcome": "blocked", "output": {"reason": "x"}}),
        ),
        case(
            result,
            json!({"outcome": "done", "output": {"reason": "x"}}),
        ),
    ];
    for name in ["input.schema.json", "settings.schema.json"] {
        let schema = data(name);
        for value in [
            json!({}),
            json!(null),
            json!({"topic": "t"}),
            json!({"topic": "t", "depth": 2}),
            json!({"model": "m", "temperature": 0.5}),
            json!([1, 2]),
        ] {
            out.push(case(schema.clone(), value));
        }
    }
    out
}

/// An accepted and a refused instance for every keyword (and the
/// applicators' pass-on), as flow's evaluation tests exercise them.
fn keywords() -> Vec<Case> {
    let pairs: Vec<(Value, Vec<Value>)> = vec![
        (json!({}), vec![json!(1), json!({"a": [null]})]),
        (
            json!({"type": "integer"}),
            vec![json!(1), json!(1.0), json!(1.5), json!("1")],
        ),
        (
            json!({"type": ["string", "null"]}),
            vec![json!(null), json!("s"), json!(0)],
        ),
        (
            json!({"type": "number"}),
            vec![json!(2), json!(0.25), json!(true)],
        ),
        (json!({"type": "object"}), vec![json!({}), json!([])]),
        (json!({"type": "array"}), vec![json!([]), json!({})]),
        (json!({"type": "boolean"}), vec![json!(false), json!(0)]),
        (
            json!({"const": 1}),
            vec![json!(1), json!(1.0), json!(2), json!("1")],
        ),
        (json!({"const": null}), vec![json!(null), json!(false)]),
        (
            json!({"enum": ["a", 2, true, null]}),
            vec![json!("a"), json!(2.0), json!(null), json!("b"), json!([2])],
        ),
        (
            json!({"allOf": [{"minimum": 1}, {"maximum": 3}]}),
            vec![json!(2), json!(4)],
        ),
        (
            json!({"anyOf": [{"type": "string"}, {"minimum": 5}]}),
            vec![json!("x"), json!(6), json!(1)],
        ),
        (
            json!({"oneOf": [{"minimum": 1}, {"maximum": 3}]}),
            vec![json!(0), json!(5), json!(2)],
        ),
        (
            json!({"not": {"type": "string"}}),
            vec![json!(1), json!("s")],
        ),
        (
            json!({"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"minimum": 0}}),
            vec![json!("ab"), json!("a"), json!(1), json!(-1)],
        ),
        (
            json!({"if": {"const": 1}, "then": false}),
            vec![json!(1), json!(2)],
        ),
        (
            json!({"if": {"const": 1}, "else": false}),
            vec![json!(1), json!(2)],
        ),
        (
            json!({"properties": {"a": {"type": "string"}, "b": false}}),
            vec![
                json!({"a": "x"}),
                json!({"a": 1}),
                json!({"b": 1}),
                json!(7),
            ],
        ),
        (
            json!({"required": ["a", "b"]}),
            vec![json!({"a": 1, "b": 2}), json!({"a": 1}), json!([])],
        ),
        (
            json!({"properties": {"a": true}, "additionalProperties": {"type": "integer"}}),
            vec![json!({"a": "x", "b": 1}), json!({"b": "x"})],
        ),
        (
            json!({"additionalProperties": false}),
            vec![json!({}), json!({"x": 1})],
        ),
        (
            json!({"minProperties": 1, "maxProperties": 2}),
            vec![json!({"a": 1}), json!({}), json!({"a": 1, "b": 2, "c": 3})],
        ),
        (
            json!({"dependentRequired": {"a": ["b"]}}),
            vec![json!({"a": 1, "b": 1}), json!({"b": 1}), json!({"a": 1})],
        ),
        (
            json!({"dependentSchemas": {"a": {"required": ["c"]}}}),
            vec![json!({"a": 1, "c": 1}), json!({"c": 1}), json!({"a": 1})],
        ),
        (
            json!({"prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false}),
            vec![
                json!(["a", 1]),
                json!(["a"]),
                json!([1]),
                json!(["a", 1, 2]),
            ],
        ),
        (
            json!({"items": {"minimum": 0}}),
            vec![json!([0, 1]), json!([0, -1])],
        ),
        (
            json!({"contains": {"const": 1}}),
            vec![json!([0, 1]), json!([0]), json!([])],
        ),
        (
            json!({"contains": {"const": 1}, "minContains": 2, "maxContains": 3}),
            vec![
                json!([1, 1]),
                json!([1]),
                json!([1, 1, 1, 1]),
                json!([1, 1, 1]),
            ],
        ),
        (
            json!({"contains": {"const": 1}, "minContains": 0}),
            vec![json!([]), json!([2])],
        ),
        (json!({"minContains": 3}), vec![json!([])]),
        (
            json!({"minItems": 1, "maxItems": 2}),
            vec![json!([1]), json!([]), json!([1, 2, 3])],
        ),
        (
            json!({"minLength": 2, "maxLength": 3}),
            vec![
                json!("ab"),
                json!("a"),
                json!("abcd"),
                json!("é😀"),
                json!("😀"),
            ],
        ),
        (
            json!({"minimum": 1.5, "maximum": 3}),
            vec![json!(1.5), json!(3), json!(1), json!(3.5)],
        ),
        (
            json!({"exclusiveMinimum": 1, "exclusiveMaximum": 3}),
            vec![json!(2), json!(1), json!(3)],
        ),
        (
            json!({"$defs": {"pos": {"minimum": 0}, "list": {"type": "array", "items": {"$ref": "#/$defs/pos"}}},
                   "$ref": "#/$defs/list"}),
            vec![json!([1, 2]), json!([1, -2]), json!({})],
        ),
        (
            json!({"title": "t", "description": "d", "$comment": "c", "examples": [1]}),
            vec![json!(1)],
        ),
    ];
    pairs
        .into_iter()
        .flat_map(|(schema, values)| {
            let schema = root(schema);
            values.into_iter().map(move |v| case(schema.clone(), v))
        })
        .collect()
}

/// The work meter at its budget and one unit past it, with a memoized
/// definition (charged once per instance however often it is named).
fn budget() -> Vec<Case> {
    let n = WORK_BUDGET as usize;
    let length = root(json!({"minLength": 1}));
    // Root 1 + allOf 2 + two references (1 + 1 each) + the definition
    // once (1 + characters + 1).
    let memo = root(json!({"$defs": {"d": {"minLength": 0}},
        "allOf": [{"$ref": "#/$defs/d"}, {"$ref": "#/$defs/d"}]}));
    let contains = root(json!({"contains": true}));
    vec![
        case(length.clone(), json!("a".repeat(n - 2))),
        case(length.clone(), json!("a".repeat(n - 1))),
        // Exhaustion even though `type` already fails.
        case(
            root(json!({"type": "integer", "minLength": 0})),
            json!("a".repeat(n)),
        ),
        case(memo.clone(), json!("a".repeat(n - 9))),
        case(memo, json!("a".repeat(n - 8))),
        case(contains.clone(), json!(vec![0; 65_536])),
        case(contains, json!(vec![0; 65_537])),
    ]
}

/// Instances at the JSON/1 limits and past them.
fn json1_limits() -> Vec<Case> {
    let nested = |depth: usize| {
        let mut v = json!(0);
        for _ in 1..depth {
            v = json!([v]);
        }
        v
    };
    let any = root(json!({}));
    vec![
        case(any.clone(), nested(128)),
        case(any.clone(), nested(129)),
        case(any.clone(), json!(9_007_199_254_740_991_i64)),
        case(any.clone(), json!(-9_007_199_254_740_991_i64)),
        case(any.clone(), json!(9_007_199_254_740_992_i64)),
        case(any.clone(), json!({"a".repeat(1024): 1})),
        case(any, json!({"a".repeat(1025): 1})),
    ]
}

/// xorshift64*: the same schemas every run.
struct Seeded(u64);

impl Seeded {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<T: Clone>(&mut self, from: &[T]) -> T {
        from[self.below(from.len())].clone()
    }
}

const NAMES: &[&str] = &["a", "b", "c", "é"];
const STRINGS: &[&str] = &["", "a", "ab", "abc", "é", "😀x", "b"];
const NUMBERS: &[f64] = &[-2.0, -1.5, 0.0, 0.5, 1.0, 2.0, 3.0];
const TYPES: &[&str] = &[
    "null", "boolean", "object", "array", "number", "integer", "string",
];

fn scalar(r: &mut Seeded) -> Value {
    match r.below(5) {
        0 => json!(null),
        1 => json!(r.below(2) == 0),
        2 => json!(r.pick(NUMBERS)),
        3 => json!(r.below(4) as i64 - 1),
        _ => json!(r.pick(STRINGS)),
    }
}

fn value(r: &mut Seeded, depth: usize) -> Value {
    match (depth, r.below(7)) {
        (0, _) | (_, 0..=3) => scalar(r),
        (_, 4 | 5) => {
            let mut members = serde_json::Map::new();
            for _ in 0..r.below(4) {
                members.insert(r.pick(NAMES).to_string(), value(r, depth - 1));
            }
            Value::Object(members)
        }
        _ => Value::Array((0..r.below(5)).map(|_| value(r, depth - 1)).collect()),
    }
}

fn count(r: &mut Seeded) -> Value {
    json!(r.below(4))
}

fn schema(r: &mut Seeded, depth: usize, refs: bool) -> Value {
    if depth == 0 || r.below(8) == 0 {
        return match r.below(3) {
            0 => json!(r.below(3) != 0),
            _ => json!({"type": r.pick(TYPES)}),
        };
    }
    let mut k = serde_json::Map::new();
    for _ in 0..1 + r.below(3) {
        let sub = |r: &mut Seeded| schema(r, depth - 1, refs);
        let list = |r: &mut Seeded| -> Value { (0..1 + r.below(3)).map(|_| sub(r)).collect() };
        let names = |r: &mut Seeded| -> Vec<String> {
            let mut out: Vec<String> = Vec::new();
            for _ in 0..r.below(3) {
                let name = r.pick(NAMES).to_string();
                if !out.contains(&name) {
                    out.push(name);
                }
            }
            out
        };
        let (key, v): (&str, Value) = match r.below(31) {
            0 => ("type", json!(r.pick(TYPES))),
            1 => {
                let mut types = vec![r.pick(TYPES)];
                let other = r.pick(TYPES);
                if !types.contains(&other) {
                    types.push(other);
                }
                ("type", json!(types))
            }
            2 => ("const", scalar(r)),
            3 => ("enum", (0..1 + r.below(3)).map(|_| scalar(r)).collect()),
            4 => ("allOf", list(r)),
            5 => ("anyOf", list(r)),
            6 => ("oneOf", list(r)),
            7 => ("not", sub(r)),
            8 => ("if", sub(r)),
            9 => ("then", sub(r)),
            10 => ("else", sub(r)),
            11 => (
                "properties",
                names(r).into_iter().map(|n| (n, sub(r))).collect(),
            ),
            12 => ("required", json!(names(r))),
            13 => ("additionalProperties", sub(r)),
            14 => ("minProperties", count(r)),
            15 => ("maxProperties", count(r)),
            16 => (
                "dependentRequired",
                names(r).into_iter().map(|n| (n, json!(names(r)))).collect(),
            ),
            17 => (
                "dependentSchemas",
                names(r).into_iter().map(|n| (n, sub(r))).collect(),
            ),
            18 => ("prefixItems", list(r)),
            19 => ("items", sub(r)),
            20 => ("contains", sub(r)),
            21 => ("minContains", count(r)),
            22 => ("maxContains", count(r)),
            23 => ("minItems", count(r)),
            24 => ("maxItems", count(r)),
            25 => ("minLength", count(r)),
            26 => ("maxLength", count(r)),
            27 => ("minimum", json!(r.pick(NUMBERS))),
            28 => ("exclusiveMinimum", json!(r.pick(NUMBERS))),
            29 => ("maximum", json!(r.pick(NUMBERS))),
            _ if refs => ("$ref", json!(format!("#/$defs/d{}", r.below(2)))),
            _ => ("exclusiveMaximum", json!(r.pick(NUMBERS))),
        };
        k.insert(key.to_string(), v);
    }
    Value::Object(k)
}

/// Schemas over every keyword (with two definitions they may name), each
/// with instances drawn from a small domain so both answers occur.
fn generated(schemas: usize, values: usize) -> Vec<Case> {
    let mut r = Seeded(0x6a69_6720_636f_6e73);
    let mut out = Vec::new();
    while out.len() < schemas * values {
        let body = schema(&mut r, 3, true);
        let body = match body {
            Value::Object(k) => Value::Object(k),
            other => json!({"allOf": [other]}),
        };
        let mut file = root(body);
        file["$defs"] = json!({"d0": schema(&mut r, 2, false), "d1": schema(&mut r, 2, false)});
        if Schema::compile_value(&file).is_err() {
            continue;
        }
        for _ in 0..values {
            let instance = value(&mut r, 3);
            out.push(case(file.clone(), instance));
        }
    }
    out
}

/// Every case, in a fixed order.
pub fn corpus() -> Vec<Case> {
    let mut out = flow_data();
    out.extend(keywords());
    out.extend(budget());
    out.extend(json1_limits());
    out.extend(generated(600, 8));
    out
}
