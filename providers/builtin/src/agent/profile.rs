//! The structured-output profile of a `responseSchema` (docs/src/agents.md):
//! the subset of Schema/1 that every strict JSON-Schema response format
//! accepts. It is checked before dispatch, so an endpoint never sees a
//! schema it may silently loosen; a schema outside it is `INVALID_INPUT`
//! and nothing is sent.

use serde_json::{Map, Value};

/// The root's `$schema`.
pub const SCHEMA_1: &str = "https://flow.jig.md/schemas/schema-1.json";
/// Nesting levels, the root included.
pub const MAX_DEPTH: usize = 8;
/// Properties of one object.
pub const MAX_OBJECT_PROPERTIES: usize = 32;
/// Properties across the whole schema.
pub const MAX_TOTAL_PROPERTIES: usize = 128;
/// Enum members across the whole schema.
pub const MAX_ENUM_MEMBERS: usize = 256;
/// Characters of property names plus enum strings.
pub const MAX_NAME_CHARS: usize = 120_000;
/// The same, when any one enum has more than [`LARGE_ENUM_MEMBERS`] members.
pub const MAX_NAME_CHARS_LARGE_ENUM: usize = 15_000;
pub const LARGE_ENUM_MEMBERS: usize = 250;
/// The largest `maxItems` of an array.
pub const MAX_ARRAY_ITEMS: u64 = 256;

/// Why a schema is outside the profile: `pointer` is where, in the schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("responseSchema at {pointer:?}: {message}")]
pub struct ProfileError {
    pub pointer: String,
    pub message: String,
}

#[derive(Default)]
struct Tally {
    properties: usize,
    enum_members: usize,
    name_chars: usize,
    large_enum: bool,
}

/// Check `schema` against the profile.
pub fn check(schema: &Value) -> Result<(), ProfileError> {
    let root = schema
        .as_object()
        .ok_or_else(|| fail("", "it must be an object"))?;
    if root.get("$schema").and_then(Value::as_str) != Some(SCHEMA_1) {
        return Err(fail(
            "",
            &format!("the root must declare \"$schema\": {SCHEMA_1:?}"),
        ));
    }
    let mut tally = Tally::default();
    object(root, "", 1, true, &mut tally)?;
    if tally.properties > MAX_TOTAL_PROPERTIES {
        return Err(fail(
            "",
            &format!("more than {MAX_TOTAL_PROPERTIES} properties in total"),
        ));
    }
    if tally.enum_members > MAX_ENUM_MEMBERS {
        return Err(fail(
            "",
            &format!("more than {MAX_ENUM_MEMBERS} enum members in total"),
        ));
    }
    let cap = if tally.large_enum {
        MAX_NAME_CHARS_LARGE_ENUM
    } else {
        MAX_NAME_CHARS
    };
    if tally.name_chars > cap {
        return Err(fail(
            "",
            &format!("property names and enum strings exceed {cap} characters"),
        ));
    }
    Ok(())
}

fn fail(pointer: &str, message: &str) -> ProfileError {
    ProfileError {
        pointer: pointer.to_string(),
        message: message.to_string(),
    }
}

fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// Only these keywords (plus `description`) may appear on a node of kind
/// `allowed`.
fn closed(node: &Map<String, Value>, at: &str, allowed: &[&str]) -> Result<(), ProfileError> {
    for key in node.keys() {
        if key == "description" && node[key].is_string() {
            continue;
        }
        if !allowed.contains(&key.as_str()) {
            return Err(fail(at, &format!("keyword {key:?} is not allowed here")));
        }
    }
    Ok(())
}

fn object(
    node: &Map<String, Value>,
    at: &str,
    depth: usize,
    root: bool,
    tally: &mut Tally,
) -> Result<(), ProfileError> {
    if depth > MAX_DEPTH {
        return Err(fail(at, &format!("more than {MAX_DEPTH} levels")));
    }
    let allowed: &[&str] = if root {
        &[
            "$schema",
            "type",
            "properties",
            "required",
            "additionalProperties",
        ]
    } else {
        &["type", "properties", "required", "additionalProperties"]
    };
    closed(node, at, allowed)?;
    if node.get("type") != Some(&Value::String("object".into())) {
        return Err(fail(at, "an object must have \"type\": \"object\""));
    }
    if node.get("additionalProperties") != Some(&Value::Bool(false)) {
        return Err(fail(
            at,
            "an object must have \"additionalProperties\": false",
        ));
    }
    let properties = node
        .get("properties")
        .and_then(Value::as_object)
        .ok_or_else(|| fail(at, "an object must list its properties"))?;
    if properties.is_empty() || properties.len() > MAX_OBJECT_PROPERTIES {
        return Err(fail(
            at,
            &format!("an object has 1 to {MAX_OBJECT_PROPERTIES} properties"),
        ));
    }
    let required = node
        .get("required")
        .and_then(Value::as_array)
        .ok_or_else(|| fail(at, "an object must list every property in \"required\""))?;
    let mut listed: Vec<&str> = Vec::new();
    for name in required {
        let name = name
            .as_str()
            .ok_or_else(|| fail(at, "\"required\" lists property names"))?;
        if !properties.contains_key(name) || listed.contains(&name) {
            return Err(fail(
                at,
                "\"required\" must list every property exactly once",
            ));
        }
        listed.push(name);
    }
    if listed.len() != properties.len() {
        return Err(fail(
            at,
            "every property must be required (no optional properties)",
        ));
    }
    for (name, schema) in properties {
        tally.properties += 1;
        tally.name_chars += name.chars().count();
        let here = format!("{at}/properties/{}", escape(name));
        value(schema, &here, depth + 1, tally)?;
    }
    Ok(())
}

fn value(schema: &Value, at: &str, depth: usize, tally: &mut Tally) -> Result<(), ProfileError> {
    if depth > MAX_DEPTH {
        return Err(fail(at, &format!("more than {MAX_DEPTH} levels")));
    }
    let node = schema
        .as_object()
        .ok_or_else(|| fail(at, "a property schema must be an object"))?;
    let (kind, nullable) = match node.get("type") {
        Some(Value::String(kind)) => (kind.as_str(), false),
        Some(Value::Array(kinds)) => {
            let names: Vec<&str> = kinds.iter().filter_map(Value::as_str).collect();
            match names.as_slice() {
                [kind, "null"] | ["null", kind] if names.len() == kinds.len() => {
                    if *kind != "string" && *kind != "integer" {
                        return Err(fail(at, "only a string or an integer may be nullable"));
                    }
                    (*kind, true)
                }
                _ => {
                    return Err(fail(
                        at,
                        "a type array is one of string or integer plus \"null\"",
                    ))
                }
            }
        }
        _ => return Err(fail(at, "every schema names its \"type\"")),
    };
    match kind {
        "object" => object(node, at, depth, false, tally),
        "array" => {
            closed(node, at, &["type", "items", "maxItems", "minItems"])?;
            let max = node
                .get("maxItems")
                .and_then(Value::as_u64)
                .filter(|n| *n <= MAX_ARRAY_ITEMS)
                .ok_or_else(|| {
                    fail(
                        at,
                        &format!("an array needs an integer \"maxItems\" 0..{MAX_ARRAY_ITEMS}"),
                    )
                })?;
            if let Some(min) = node.get("minItems") {
                match min.as_u64() {
                    Some(min) if min <= max => {}
                    _ => return Err(fail(at, "\"minItems\" must be an integer 0..maxItems")),
                }
            }
            let items = node
                .get("items")
                .ok_or_else(|| fail(at, "an array needs one \"items\" schema"))?;
            value(items, &format!("{at}/items"), depth + 1, tally)
        }
        "string" => {
            closed(node, at, &["type", "enum"])?;
            if let Some(members) = node.get("enum") {
                let members = members
                    .as_array()
                    .ok_or_else(|| fail(at, "\"enum\" is an array"))?;
                let strings = members.iter().filter(|m| m.is_string()).count();
                let nulls = members.iter().filter(|m| m.is_null()).count();
                if strings == 0 || strings + nulls != members.len() {
                    return Err(fail(
                        at,
                        "\"enum\" lists at least one string (and only strings)",
                    ));
                }
                if nullable != (nulls == 1) || nulls > 1 {
                    return Err(fail(
                        at,
                        "a nullable enum lists null exactly once; a plain one never",
                    ));
                }
                tally.enum_members += members.len();
                tally.large_enum |= members.len() > LARGE_ENUM_MEMBERS;
                tally.name_chars += members
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|s| s.chars().count())
                    .sum::<usize>();
            }
            Ok(())
        }
        "integer" => closed(node, at, &["type"]),
        other => Err(fail(at, &format!("type {other:?} is not in the profile"))),
    }
}

/// The schema as sent to the endpoint: the profile's schema without the
/// root `$schema` (a Schema/1 marker, not part of the response format).
pub fn wire_schema(schema: &Value) -> Value {
    let mut schema = schema.clone();
    if let Some(root) = schema.as_object_mut() {
        root.remove("$schema");
    }
    schema
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn root(properties: Value) -> Value {
        let required: Vec<String> = properties.as_object().unwrap().keys().cloned().collect();
        json!({"$schema": SCHEMA_1, "type": "object", "properties": properties,
               "required": required, "additionalProperties": false})
    }

    fn closed_object(properties: Value) -> Value {
        let mut v = root(properties);
        v.as_object_mut().unwrap().remove("$schema");
        v
    }

    #[test]
    fn the_documented_shapes_pass() {
        let schema = root(json!({
            "verdict": {"type": "string", "enum": ["pass", "fail"]},
            "score": {"type": "integer"},
            "note": {"type": ["string", "null"]},
            "level": {"type": ["string", "null"], "enum": ["low", null]},
            "count": {"type": ["null", "integer"]},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8, "minItems": 1},
            "detail": closed_object(json!({"why": {"type": "string", "description": "reason"}})),
        }));
        check(&schema).unwrap();
        assert!(wire_schema(&schema).get("$schema").is_none());
    }

    #[test]
    fn the_root_needs_schema_1_and_properties() {
        let mut s = root(json!({"a": {"type": "string"}}));
        s.as_object_mut().unwrap().remove("$schema");
        assert!(check(&s).is_err());
        assert!(check(&json!({"$schema": SCHEMA_1, "type": "object", "properties": {}, "required": [], "additionalProperties": false})).is_err());
        assert!(check(&json!("x")).is_err());
    }

    #[test]
    fn what_the_profile_refuses() {
        let bad = [
            json!({"type": "boolean"}),
            json!({"type": "number"}),
            json!({"$ref": "#/$defs/x"}),
            json!({"anyOf": [{"type": "string"}]}),
            json!({"type": "string", "enum": []}),
            json!({"type": "string", "enum": [1]}),
            json!({"type": "string", "enum": ["a", null]}),
            json!({"type": ["string", "null"], "enum": [null]}),
            json!({"type": ["object", "null"]}),
            json!({"type": ["array", "null"], "items": {"type": "string"}, "maxItems": 1}),
            json!({"type": "array", "items": {"type": "string"}}),
            json!({"type": "array", "items": {"type": "string"}, "maxItems": 257}),
            json!({"type": "array", "items": {"type": "string"}, "maxItems": 2, "minItems": 3}),
            json!({"type": "object", "additionalProperties": true, "properties": {"a": {"type": "string"}}, "required": ["a"]}),
            json!({"type": "object", "additionalProperties": false, "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "required": ["a"]}),
            json!({"type": "string", "pattern": "x"}),
            json!({"type": "integer", "minimum": 1}),
        ];
        for schema in bad {
            let s = root(json!({ "p": schema }));
            assert!(check(&s).is_err(), "{s}");
        }
        let with_defs = {
            let mut s = root(json!({"a": {"type": "string"}}));
            s["$defs"] = json!({});
            s
        };
        assert!(check(&with_defs).is_err());
    }

    #[test]
    fn an_object_has_at_most_32_properties() {
        let props = |n: usize| {
            Value::Object(
                (0..n)
                    .map(|i| (format!("p{i}"), json!({"type": "integer"})))
                    .collect(),
            )
        };
        assert!(check(&root(props(MAX_OBJECT_PROPERTIES))).is_ok());
        assert!(check(&root(props(MAX_OBJECT_PROPERTIES + 1))).is_err());
    }

    #[test]
    fn at_most_128_properties_in_total() {
        let inner = |n: usize| {
            closed_object(Value::Object(
                (0..n)
                    .map(|i| (format!("q{i}"), json!({"type": "integer"})))
                    .collect(),
            ))
        };
        // 4 objects of 31 + the 4 holding properties = 128.
        let at = root(json!({"a": inner(31), "b": inner(31), "c": inner(31), "d": inner(31)}));
        assert!(check(&at).is_ok());
        let past = root(json!({"a": inner(31), "b": inner(31), "c": inner(31), "d": inner(32)}));
        assert!(check(&past).unwrap_err().message.contains("128"));
    }

    #[test]
    fn at_most_8_levels() {
        let nest = |levels: usize| {
            let mut v = json!({"type": "string"});
            for _ in 1..levels {
                v = closed_object(json!({ "n": v }));
            }
            let mut r = v;
            r["$schema"] = json!(SCHEMA_1);
            r
        };
        // `levels` counts the objects plus the innermost string.
        assert!(check(&nest(MAX_DEPTH)).is_ok());
        assert!(check(&nest(MAX_DEPTH + 1)).is_err());
    }

    #[test]
    fn at_most_256_enum_members_in_total() {
        let e = |n: usize| json!({"type": "string", "enum": (0..n).map(|i| format!("e{i}")).collect::<Vec<_>>()});
        assert!(check(&root(json!({"a": e(128), "b": e(128)}))).is_ok());
        assert!(check(&root(json!({"a": e(128), "b": e(129)}))).is_err());
    }

    #[test]
    fn name_characters_are_capped() {
        let e = |n: usize, width: usize| json!({"type": "string", "enum": (0..n).map(|i| format!("{i:0width$}")).collect::<Vec<_>>()});
        // 120,000 characters: 200 members of 600 characters, minus the name "a".
        let mut members: Vec<String> = (0..200).map(|i| format!("{i:0600}")).collect();
        members[0].truncate(599);
        let at = root(json!({"a": {"type": "string", "enum": members.clone()}}));
        assert!(check(&at).is_ok());
        members[0].push('x');
        let past = root(json!({"a": {"type": "string", "enum": members}}));
        assert!(check(&past).is_err());
        // With an enum past 250 members the cap is 15,000.
        let large_at = root(json!({"a": e(251, 59)}));
        assert!(check(&large_at).is_ok()); // 251 * 59 + 1 = 14,810
        let large_past = root(json!({"a": e(251, 60)}));
        assert!(check(&large_past).is_err()); // 251 * 60 + 1 = 15,061
    }
}
