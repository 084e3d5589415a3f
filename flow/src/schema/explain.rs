//! A diagnostic in words: what the instance holds and what the schema
//! expected, one sentence, for people (Schema/1 §5 leaves human wording to
//! the host; the pointers and keyword stay the normative part).
//!
//! Worded once, for the diagnostic a validation returns, from the compiled
//! node its schema pointer names and the instance value its instance
//! pointer names: the failures evaluation meets and discards (inside
//! `anyOf`, `not`, an `if`) cost no words.

use super::{Diagnostic, Graph, Keywords, NodeKind, Type};
use crate::json::{self, Value};

/// How much of a value a sentence quotes before it is cut (`…`).
const QUOTED_CHARS: usize = 60;
/// How many members of an `enum` a sentence lists before `…`.
const LISTED_MEMBERS: usize = 8;

/// `diagnostic` in words, located: `missing required property "csv"` at
/// the root, `/rows/0/age: expected integer, got "1"` below it.
pub(super) fn sentence(graph: &Graph, diagnostic: &Diagnostic, instance: &Value) -> String {
    let value = instance
        .pointer(&diagnostic.instance_pointer)
        .unwrap_or(&Value::Null);
    let node_pointer = match diagnostic.keyword {
        Some(keyword) => diagnostic
            .schema_pointer
            .strip_suffix(keyword)
            .and_then(|p| p.strip_suffix('/'))
            .unwrap_or(&diagnostic.schema_pointer),
        None => &diagnostic.schema_pointer,
    };
    let node = graph.nodes.iter().find(|n| n.pointer == node_pointer);
    let (at, words) = match (node.map(|n| &n.kind), diagnostic.keyword) {
        (Some(NodeKind::Object(k)), Some(keyword)) => (
            diagnostic.instance_pointer.as_str(),
            keyword_words(graph, k, keyword, value),
        ),
        // A `false` schema: a member `additionalProperties` refuses reads
        // best at its object.
        _ => match diagnostic.schema_pointer.ends_with("/additionalProperties") {
            true => {
                let (object, name) = split_last(&diagnostic.instance_pointer);
                (object, format!("unexpected property {}", quote_name(&name)))
            }
            false => (
                diagnostic.instance_pointer.as_str(),
                format!("no value is allowed here, got {}", quote(value)),
            ),
        },
    };
    match at {
        "" => words,
        at => format!("{at}: {words}"),
    }
}

/// What `keyword` of `k` expected of `value`.
fn keyword_words(graph: &Graph, k: &Keywords, keyword: &str, value: &Value) -> String {
    let members = || value.as_object().map_or(0, |m| m.len() as u64);
    let items = || value.as_array().map_or(0, |a| a.len() as u64);
    let length = || value.as_str().map_or(0, |s| s.chars().count() as u64);
    let x = || quote(value);
    let bound = |b: Option<f64>| b.map(number).unwrap_or_default();
    let count = |b: Option<u64>| b.unwrap_or_default();
    match keyword {
        "type" => {
            let types = k.types.as_deref().unwrap_or_default();
            let names: Vec<&str> = types.iter().map(|t| type_name(*t)).collect();
            format!("expected {}, got {}", or_list(&names), quote(value))
        }
        "const" => match &k.constant {
            Some(c) => format!("expected {}, got {}", quote(c), quote(value)),
            None => format!("got {}", quote(value)),
        },
        "enum" => {
            let allowed = k.enumeration.as_deref().unwrap_or_default();
            let mut listed: Vec<String> = allowed.iter().take(LISTED_MEMBERS).map(quote).collect();
            if allowed.len() > LISTED_MEMBERS {
                listed.push("…".into());
            }
            format!("{} is not one of {}", quote(value), listed.join(", "))
        }
        "anyOf" => format!(
            "{} matches none of the {} allowed forms (anyOf)",
            quote(value),
            k.any_of.as_ref().map_or(0, Vec::len)
        ),
        "oneOf" => {
            let branches = k.one_of.as_deref().unwrap_or_default();
            match passing(graph, branches, value) {
                Some(0) => format!(
                    "{} matches none of the {} forms, and exactly one must match (oneOf)",
                    quote(value),
                    branches.len()
                ),
                Some(n) => format!(
                    "{} matches {n} of the {} forms, and exactly one must match (oneOf)",
                    quote(value),
                    branches.len()
                ),
                None => format!("{} does not match exactly one form (oneOf)", quote(value)),
            }
        }
        "not" => format!("{} matches a form that is not allowed (not)", quote(value)),
        "required" => {
            let object = value.as_object();
            let missing = k
                .required
                .iter()
                .flatten()
                .find(|name| object.is_some_and(|o| !o.contains_key(*name)));
            match missing {
                Some(name) => format!("missing required property {}", quote_name(name)),
                None => "missing a required property".into(),
            }
        }
        "dependentRequired" => {
            let object = value.as_object();
            let has = |name: &String| object.is_some_and(|o| o.contains_key(name));
            let missing = k
                .dependent_required
                .iter()
                .flatten()
                .find_map(|(trigger, names)| {
                    has(trigger)
                        .then(|| names.iter().find(|n| !has(n)).map(|n| (trigger, n)))
                        .flatten()
                });
            match missing {
                Some((trigger, name)) => format!(
                    "property {} requires property {}, which is missing",
                    quote_name(trigger),
                    quote_name(name)
                ),
                None => "missing a dependent required property".into(),
            }
        }
        "minProperties" => format!(
            "has {} properties, fewer than the minimum {}",
            members(),
            count(k.min_properties)
        ),
        "maxProperties" => format!(
            "has {} properties, more than the maximum {}",
            members(),
            count(k.max_properties)
        ),
        "contains" => "no item matches what it must contain (contains)".into(),
        "minContains" => format!(
            "fewer than {} items match what it must contain (minContains)",
            count(k.min_contains)
        ),
        "maxContains" => format!(
            "more than {} items match what it may contain (maxContains)",
            count(k.max_contains)
        ),
        "minItems" => format!(
            "has {} items, fewer than the minimum {}",
            items(),
            count(k.min_items)
        ),
        "maxItems" => format!(
            "has {} items, more than the maximum {}",
            items(),
            count(k.max_items)
        ),
        "minLength" => format!(
            "{} is {} characters long, shorter than the minimum {}",
            quote(value),
            length(),
            count(k.min_length)
        ),
        "maxLength" => format!(
            "{} is {} characters long, longer than the maximum {}",
            quote(value),
            length(),
            count(k.max_length)
        ),
        "minimum" => format!("{} is less than the minimum {}", x(), bound(k.minimum)),
        "exclusiveMinimum" => format!(
            "{} is not greater than {} (exclusiveMinimum)",
            x(),
            bound(k.exclusive_minimum)
        ),
        "maximum" => format!("{} is greater than the maximum {}", x(), bound(k.maximum)),
        "exclusiveMaximum" => format!(
            "{} is not less than {} (exclusiveMaximum)",
            x(),
            bound(k.exclusive_maximum)
        ),
        other => format!("{} fails {other}", quote(value)),
    }
}

/// How many of `branches` accept `value`; `None` when the work budget ran
/// out counting.
fn passing(graph: &Graph, branches: &[super::NodeId], value: &Value) -> Option<usize> {
    let mut passed = 0;
    for &branch in branches {
        let mut ev = super::evaluate::Evaluator {
            graph,
            units: 0,
            memo: Default::default(),
            locations: Default::default(),
        };
        if ev.run(branch, value).ok()?.is_none() {
            passed += 1;
        }
    }
    Some(passed)
}

fn type_name(t: Type) -> &'static str {
    match t {
        Type::Null => "null",
        Type::Boolean => "boolean",
        Type::Object => "object",
        Type::Array => "array",
        Type::Number => "number",
        Type::Integer => "integer",
        Type::String => "string",
    }
}

/// `a`, `a or b`, `a, b or c`.
fn or_list(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => (*one).to_string(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

/// A value as its JSON text, cut at [`QUOTED_CHARS`] characters.
fn quote(value: &Value) -> String {
    let text = String::from_utf8_lossy(&json::canonical(value)).into_owned();
    match text.char_indices().nth(QUOTED_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// A property name as a JSON string.
fn quote_name(name: &str) -> String {
    quote(&Value::String(name.to_string()))
}

/// A schema bound as JSON writes it: `5`, not `5.0`.
fn number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 9_007_199_254_740_992.0 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

/// A pointer's parent and its last token, unescaped.
fn split_last(pointer: &str) -> (&str, String) {
    match pointer.rfind('/') {
        Some(i) => (
            &pointer[..i],
            pointer[i + 1..].replace("~1", "/").replace("~0", "~"),
        ),
        None => ("", String::new()),
    }
}

#[cfg(test)]
mod tests {
    use crate::schema::{Invalid, Schema};
    use serde_json::json;

    fn words(schema: serde_json::Value, instance: serde_json::Value) -> String {
        let mut schema = schema;
        schema["$schema"] = json!(crate::schema::SCHEMA_URI);
        let compiled = Schema::compile_value(&schema).expect("a schema");
        match compiled.validate(&instance) {
            Err(Invalid::Diagnostic(d)) => d.message,
            other => panic!("a diagnostic, not {other:?}"),
        }
    }

    #[test]
    fn each_keyword_says_what_it_expected_and_what_it_got() {
        let csv = json!({"type": "object", "required": ["csv"]});
        assert_eq!(words(csv, json!({})), r#"missing required property "csv""#);
        let rows = json!({"properties": {"rows": {"items": {"properties": {"age": {"type": "integer"}}}}}});
        assert_eq!(
            words(rows, json!({"rows": [{"age": "1"}]})),
            r#"/rows/0/age: expected integer, got "1""#
        );
        let tone = json!({"properties": {"tone": {"enum": ["warm", "curt"]}}});
        assert_eq!(
            words(tone, json!({"tone": "loud"})),
            r#"/tone: "loud" is not one of "warm", "curt""#
        );
        let closed = json!({"properties": {"a": true}, "additionalProperties": false});
        assert_eq!(
            words(closed, json!({"a": 1, "b/c": 2})),
            r#"unexpected property "b/c""#
        );
        assert_eq!(
            words(json!({"type": ["string", "null"]}), json!(5)),
            "expected string or null, got 5"
        );
        assert_eq!(
            words(json!({"minimum": 5}), json!(1.5)),
            "1.5 is less than the minimum 5"
        );
        assert_eq!(
            words(json!({"maxLength": 2}), json!("abc")),
            r#""abc" is 3 characters long, longer than the maximum 2"#
        );
        assert_eq!(
            words(json!({"minItems": 2}), json!([1])),
            "has 1 items, fewer than the minimum 2"
        );
        let one = json!({"oneOf": [{"type": "number"}, {"type": "integer"}]});
        assert_eq!(
            words(one, json!(3)),
            "3 matches 2 of the 2 forms, and exactly one must match (oneOf)"
        );
        let dependent = json!({"dependentRequired": {"a": ["b"]}});
        assert_eq!(
            words(dependent, json!({"a": 1})),
            r#"property "a" requires property "b", which is missing"#
        );
        assert_eq!(
            words(json!({"const": "x"}), json!("y")),
            r#"expected "x", got "y""#
        );
        assert_eq!(
            words(json!({"items": false}), json!([1])),
            "/0: no value is allowed here, got 1"
        );
    }

    /// A value's JSON text is quoted whole up to [`super::QUOTED_CHARS`]
    /// characters and cut one past; an `enum` lists
    /// [`super::LISTED_MEMBERS`] members, and `…` past them.
    #[test]
    fn quotes_and_lists_are_bounded_at_their_limits() {
        let at = "x".repeat(super::QUOTED_CHARS - 2); // with its quotes
        let said = words(json!({"type": "integer"}), json!(at));
        assert_eq!(said, format!("expected integer, got \"{at}\""));
        let past = "x".repeat(super::QUOTED_CHARS - 1);
        let said = words(json!({"type": "integer"}), json!(past));
        assert!(said.ends_with("x…"), "{said}");
        let members = |n: usize| (0..n).map(|i| json!(i)).collect::<Vec<_>>();
        let listed = words(json!({"enum": members(super::LISTED_MEMBERS)}), json!("x"));
        assert_eq!(listed, r#""x" is not one of 0, 1, 2, 3, 4, 5, 6, 7"#);
        let cut = words(
            json!({"enum": members(super::LISTED_MEMBERS + 1)}),
            json!("x"),
        );
        assert_eq!(cut, r#""x" is not one of 0, 1, 2, 3, 4, 5, 6, 7, …"#);
    }

    #[test]
    fn a_long_value_is_cut() {
        let long = "x".repeat(500);
        let said = words(json!({"type": "integer"}), json!(long));
        assert!(said.ends_with("…"), "{said}");
        assert!(said.chars().count() < 100, "{said}");
    }
}
