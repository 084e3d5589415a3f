//! FLOW Schema/1: a closed, bounded dialect of JSON Schema 2020-12.
//!
//! Compilation checks the keyword allowlist, keyword locations and value
//! shapes, root-only `$defs`, local acyclic `$ref`, and the structural limits.
//! Evaluation charges the normative work meter and reports exhaustion before
//! invalidity. A compiled [`Schema`] is one root inside a shared graph, so a
//! Capability Contract's methods and definitions compile together.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use crate::json::{self, number_value, Value};

mod evaluate;
mod explain;
#[cfg(test)]
mod tests;

use evaluate::*;

/// The exact `$schema` declaration of a Schema/1 file root.
pub const SCHEMA_URI: &str = "https://flow.jig.md/schemas/schema-1.json";
/// Maximum encoded bytes of one schema file (256 KiB).
pub const MAX_SCHEMA_BYTES: usize = 262_144;
/// Maximum schema nesting depth; the root is at depth 1.
pub const MAX_SCHEMA_DEPTH: usize = 64;
/// Maximum schema nodes in one schema graph.
pub const MAX_SCHEMA_NODES: usize = 4_096;
/// The deterministic work budget of one validation.
pub const WORK_BUDGET: u64 = 1_000_000;
/// Maximum characters of a `$defs` name (grammar `[A-Za-z][A-Za-z0-9]{0,63}`).
pub const MAX_DEFINITION_NAME_CHARS: usize = 64;

/// Stable compilation error codes.
pub mod codes {
    pub const SCHEMA_INVALID_JSON: &str = "SCHEMA_INVALID_JSON";
    pub const SCHEMA_INVALID: &str = "SCHEMA_INVALID";
    pub const SCHEMA_KEYWORD_UNSUPPORTED: &str = "SCHEMA_KEYWORD_UNSUPPORTED";
    pub const SCHEMA_REFERENCE_INVALID: &str = "SCHEMA_REFERENCE_INVALID";
    pub const SCHEMA_LIMIT_EXCEEDED: &str = "SCHEMA_LIMIT_EXCEEDED";
}
use codes::*;

/// A schema that failed to compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message} (at {pointer:?})")]
pub struct SchemaError {
    pub code: &'static str,
    /// RFC 6901 pointer into the schema document.
    pub pointer: String,
    pub message: String,
}

impl SchemaError {
    fn new(code: &'static str, pointer: &str, message: impl Into<String>) -> Self {
        SchemaError {
            code,
            pointer: pointer.to_owned(),
            message: message.into(),
        }
    }
}

/// Why an instance was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invalid {
    /// The instance is invalid; the first diagnostic found.
    Diagnostic(Diagnostic),
    /// The work meter crossed [`WORK_BUDGET`]: `SCHEMA_LIMIT_EXCEEDED`.
    LimitExceeded,
    /// The instance is not a JSON/1 value at all.
    Json(json::JsonError),
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Invalid::Diagnostic(d) => f.write_str(&d.message),
            Invalid::LimitExceeded => write!(f, "validation exceeds {WORK_BUDGET} work units"),
            Invalid::Json(e) => write!(f, "instance is not JSON/1: {e}"),
        }
    }
}

impl std::error::Error for Invalid {}

impl Invalid {
    /// The stable code to report: `SCHEMA_LIMIT_EXCEEDED` on exhaustion,
    /// otherwise the seam's instance code (`INVALID_INPUT`, ...).
    pub fn code(&self, instance_code: &'static str) -> &'static str {
        match self {
            Invalid::LimitExceeded => SCHEMA_LIMIT_EXCEEDED,
            Invalid::Diagnostic(_) | Invalid::Json(_) => instance_code,
        }
    }

    /// The diagnostic as the JSON object Schema/1 §5 describes.
    pub fn to_value(&self, instance_code: &'static str) -> Value {
        let mut out = serde_json::Map::new();
        out.insert("code".into(), Value::from(self.code(instance_code)));
        let (instance_pointer, schema_pointer, keyword) = match self {
            Invalid::Diagnostic(d) => (
                d.instance_pointer.as_str(),
                d.schema_pointer.as_str(),
                d.keyword,
            ),
            Invalid::LimitExceeded | Invalid::Json(_) => ("", "", None),
        };
        out.insert("instancePointer".into(), Value::from(instance_pointer));
        out.insert("schemaPointer".into(), Value::from(schema_pointer));
        if let Some(k) = keyword {
            out.insert("keyword".into(), Value::from(k));
        }
        out.insert("message".into(), Value::from(self.to_string()));
        Value::Object(out)
    }
}

/// One instance diagnostic; the caller supplies the code
/// (`INVALID_INPUT`, `INVALID_SETTINGS`, `INVALID_RESULT`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// RFC 6901 pointer into the instance; empty for the root.
    pub instance_pointer: String,
    /// RFC 6901 pointer to the failing keyword (or to a `false` schema).
    pub schema_pointer: String,
    pub keyword: Option<&'static str>,
    /// The failure in words, located (`/rows/0/age: expected integer, got
    /// "1"`): Schema/1 leaves the wording to the host.
    pub message: String,
}

/// A compiled schema: one root inside a shared compiled graph.
#[derive(Debug, Clone)]
pub struct Schema {
    graph: Arc<Graph>,
    root: NodeId,
}

type NodeId = usize;

#[derive(Debug)]
pub(crate) struct Graph {
    nodes: Vec<Node>,
}

#[derive(Debug)]
struct Node {
    pointer: String,
    kind: NodeKind,
}

#[derive(Debug)]
enum NodeKind {
    Bool(bool),
    Object(Box<Keywords>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Type {
    Null,
    Boolean,
    Object,
    Array,
    Number,
    Integer,
    String,
}

impl Type {
    fn parse(s: &str) -> Option<Type> {
        Some(match s {
            "null" => Type::Null,
            "boolean" => Type::Boolean,
            "object" => Type::Object,
            "array" => Type::Array,
            "number" => Type::Number,
            "integer" => Type::Integer,
            "string" => Type::String,
            _ => return None,
        })
    }

    fn matches(self, v: &Value) -> bool {
        match (self, v) {
            (Type::Null, Value::Null) => true,
            (Type::Boolean, Value::Bool(_)) => true,
            (Type::Object, Value::Object(_)) => true,
            (Type::Array, Value::Array(_)) => true,
            (Type::Number, Value::Number(_)) => true,
            (Type::Integer, Value::Number(n)) => number_value(n).fract() == 0.0,
            (Type::String, Value::String(_)) => true,
            _ => false,
        }
    }
}

/// Keywords of one schema object, in a fixed evaluation order.
#[derive(Debug, Default)]
struct Keywords {
    reference: Option<NodeId>,
    types: Option<Vec<Type>>,
    constant: Option<Value>,
    enumeration: Option<Vec<Value>>,
    all_of: Option<Vec<NodeId>>,
    any_of: Option<Vec<NodeId>>,
    one_of: Option<Vec<NodeId>>,
    not: Option<NodeId>,
    if_: Option<NodeId>,
    then_: Option<NodeId>,
    else_: Option<NodeId>,
    /// Sorted by RFC 8785 (UTF-16) member order.
    properties: Option<Vec<(String, NodeId)>>,
    required: Option<Vec<String>>,
    additional_properties: Option<NodeId>,
    min_properties: Option<u64>,
    max_properties: Option<u64>,
    dependent_required: Option<Vec<(String, Vec<String>)>>,
    dependent_schemas: Option<Vec<(String, NodeId)>>,
    prefix_items: Option<Vec<NodeId>>,
    items: Option<NodeId>,
    contains: Option<NodeId>,
    min_contains: Option<u64>,
    max_contains: Option<u64>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    minimum: Option<f64>,
    exclusive_minimum: Option<f64>,
    maximum: Option<f64>,
    exclusive_maximum: Option<f64>,
}

/// Keywords that 2020-12 or earlier drafts define but Schema/1 rejects, and
/// every unknown keyword: both are `SCHEMA_KEYWORD_UNSUPPORTED`.
const ALLOWED_KEYWORDS: &[&str] = &[
    "$schema",
    "$defs",
    "$ref",
    "$comment",
    "title",
    "description",
    "examples",
    "type",
    "enum",
    "const",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "properties",
    "required",
    "additionalProperties",
    "minProperties",
    "maxProperties",
    "dependentRequired",
    "dependentSchemas",
    "prefixItems",
    "items",
    "contains",
    "minContains",
    "maxContains",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
];

/// Escapes one RFC 6901 reference token.
pub fn escape_pointer_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

fn child_pointer(base: &str, token: &str) -> String {
    format!("{base}/{}", escape_pointer_token(token))
}

/// Whether `name` matches `[A-Za-z][A-Za-z0-9]{0,63}`.
pub fn is_definition_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= MAX_DEFINITION_NAME_CHARS
        && bytes[0].is_ascii_alphabetic()
        && bytes.iter().all(|b| b.is_ascii_alphanumeric())
}

/// Where a schema graph's roots come from and what the root may declare.
pub(crate) struct GraphBuilder {
    nodes: Vec<Node>,
    defs: BTreeMap<String, NodeId>,
    /// `$ref` sites awaiting resolution: (node holding the ref, target name, pointer).
    refs: Vec<(NodeId, String, String)>,
    /// Definition each node belongs to, for cycle detection.
    owner: Vec<Option<String>>,
}

impl GraphBuilder {
    pub(crate) fn new() -> Self {
        GraphBuilder {
            nodes: Vec::new(),
            defs: BTreeMap::new(),
            refs: Vec::new(),
            owner: Vec::new(),
        }
    }

    /// Compiles a `$defs` map located at `pointer` (already an object).
    pub(crate) fn add_defs(&mut self, defs: &Value, pointer: &str) -> Result<(), SchemaError> {
        let Value::Object(map) = defs else {
            return Err(SchemaError::new(
                SCHEMA_INVALID,
                pointer,
                "$defs must be an object",
            ));
        };
        // Register names first so references can be resolved in any order.
        for name in map.keys() {
            let p = child_pointer(pointer, name);
            if !is_definition_name(name) {
                return Err(SchemaError::new(
                    SCHEMA_INVALID,
                    &p,
                    format!("definition name {name:?} must match [A-Za-z][A-Za-z0-9]{{0,63}}"),
                ));
            }
        }
        for (name, schema) in map {
            let p = child_pointer(pointer, name);
            let id = self.compile(schema, &p, 2, Some(name))?;
            self.defs.insert(name.clone(), id);
        }
        Ok(())
    }

    /// Compiles one embedded root (no `$schema`, no `$defs`) at depth 1.
    pub(crate) fn add_root(
        &mut self,
        schema: &Value,
        pointer: &str,
    ) -> Result<NodeId, SchemaError> {
        self.compile(schema, pointer, 1, None)
    }

    fn compile(
        &mut self,
        schema: &Value,
        pointer: &str,
        depth: usize,
        owner: Option<&String>,
    ) -> Result<NodeId, SchemaError> {
        if depth > MAX_SCHEMA_DEPTH {
            return Err(SchemaError::new(
                SCHEMA_LIMIT_EXCEEDED,
                pointer,
                format!("schema depth exceeds {MAX_SCHEMA_DEPTH}"),
            ));
        }
        if self.nodes.len() >= MAX_SCHEMA_NODES {
            return Err(SchemaError::new(
                SCHEMA_LIMIT_EXCEEDED,
                pointer,
                format!("schema graph has more than {MAX_SCHEMA_NODES} nodes"),
            ));
        }
        let id = self.nodes.len();
        self.nodes.push(Node {
            pointer: pointer.to_owned(),
            kind: NodeKind::Bool(true),
        });
        self.owner.push(owner.cloned());
        let kind = match schema {
            Value::Bool(b) => NodeKind::Bool(*b),
            Value::Object(map) => {
                // Unsupported keywords first: they are the most specific finding.
                for key in map.keys() {
                    if !ALLOWED_KEYWORDS.contains(&key.as_str()) {
                        return Err(SchemaError::new(
                            SCHEMA_KEYWORD_UNSUPPORTED,
                            &child_pointer(pointer, key),
                            format!("keyword {key:?} is not part of Schema/1"),
                        ));
                    }
                }
                NodeKind::Object(Box::new(self.keywords(id, map, pointer, depth, owner)?))
            }
            _ => {
                return Err(SchemaError::new(
                    SCHEMA_INVALID,
                    pointer,
                    "a schema must be an object or a boolean",
                ))
            }
        };
        self.nodes[id].kind = kind;
        Ok(id)
    }

    fn keywords(
        &mut self,
        id: NodeId,
        map: &serde_json::Map<String, Value>,
        pointer: &str,
        depth: usize,
        owner: Option<&String>,
    ) -> Result<Keywords, SchemaError> {
        let mut k = Keywords::default();
        for (key, value) in map {
            let p = child_pointer(pointer, key);
            let invalid =
                |what: &str| SchemaError::new(SCHEMA_INVALID, &p, format!("{key} {what}"));
            match key.as_str() {
                "$schema" | "$defs" => {
                    return Err(SchemaError::new(
                        SCHEMA_INVALID,
                        &p,
                        format!("{key} is allowed only at a schema file root"),
                    ))
                }
                "$ref" => {
                    let Value::String(r) = value else {
                        return Err(invalid("must be a string"));
                    };
                    let Some(name) = r.strip_prefix("#/$defs/").filter(|n| is_definition_name(n))
                    else {
                        return Err(SchemaError::new(
                            SCHEMA_REFERENCE_INVALID,
                            &p,
                            format!("$ref {r:?} is not of the form #/$defs/<name>"),
                        ));
                    };
                    self.refs.push((id, name.to_owned(), p.clone()));
                }
                "$comment" | "title" | "description" => {
                    if !value.is_string() {
                        return Err(invalid("must be a string"));
                    }
                }
                "examples" => {
                    if !value.is_array() {
                        return Err(invalid("must be an array"));
                    }
                }
                "type" => {
                    let names: Vec<&Value> = match value {
                        Value::String(_) => vec![value],
                        Value::Array(items) if !items.is_empty() => items.iter().collect(),
                        _ => {
                            return Err(invalid("must be a type name or a non-empty array of them"))
                        }
                    };
                    let mut types = Vec::new();
                    for name in names {
                        let t = name
                            .as_str()
                            .and_then(Type::parse)
                            .ok_or_else(|| invalid("names an unknown type"))?;
                        if types.contains(&t) {
                            return Err(invalid("repeats a type name"));
                        }
                        types.push(t);
                    }
                    k.types = Some(types);
                }
                "enum" => {
                    let Value::Array(items) = value else {
                        return Err(invalid("must be an array"));
                    };
                    if items.iter().any(|v| v.is_array() || v.is_object()) {
                        return Err(invalid("members must be JSON scalars"));
                    }
                    k.enumeration = Some(items.clone());
                }
                "const" => {
                    if value.is_array() || value.is_object() {
                        return Err(invalid("must be a JSON scalar"));
                    }
                    k.constant = Some(value.clone());
                }
                "allOf" | "anyOf" | "oneOf" | "prefixItems" => {
                    let Value::Array(items) = value else {
                        return Err(invalid("must be a non-empty array of schemas"));
                    };
                    if items.is_empty() {
                        return Err(invalid("must be a non-empty array of schemas"));
                    }
                    let mut ids = Vec::with_capacity(items.len());
                    for (i, item) in items.iter().enumerate() {
                        ids.push(self.compile(item, &format!("{p}/{i}"), depth + 1, owner)?);
                    }
                    match key.as_str() {
                        "allOf" => k.all_of = Some(ids),
                        "anyOf" => k.any_of = Some(ids),
                        "oneOf" => k.one_of = Some(ids),
                        _ => k.prefix_items = Some(ids),
                    }
                }
                "not" | "if" | "then" | "else" | "additionalProperties" | "items" | "contains" => {
                    let child = self.compile(value, &p, depth + 1, owner)?;
                    let slot = match key.as_str() {
                        "not" => &mut k.not,
                        "if" => &mut k.if_,
                        "then" => &mut k.then_,
                        "else" => &mut k.else_,
                        "additionalProperties" => &mut k.additional_properties,
                        "items" => &mut k.items,
                        _ => &mut k.contains,
                    };
                    *slot = Some(child);
                }
                "properties" | "dependentSchemas" => {
                    let Value::Object(members) = value else {
                        return Err(invalid("must be an object of schemas"));
                    };
                    let mut entries = Vec::with_capacity(members.len());
                    for (name, sub) in members {
                        let child =
                            self.compile(sub, &child_pointer(&p, name), depth + 1, owner)?;
                        entries.push((name.clone(), child));
                    }
                    entries.sort_by(|a, b| json::compare_utf16(&a.0, &b.0));
                    if key == "properties" {
                        k.properties = Some(entries);
                    } else {
                        k.dependent_schemas = Some(entries);
                    }
                }
                "required" => {
                    k.required = Some(
                        string_set(value)
                            .ok_or_else(|| invalid("must be an array of unique strings"))?,
                    )
                }
                "dependentRequired" => {
                    let Value::Object(members) = value else {
                        return Err(invalid("must be an object of string arrays"));
                    };
                    let mut entries = Vec::with_capacity(members.len());
                    for (name, names) in members {
                        let names = string_set(names).ok_or_else(|| {
                            SchemaError::new(
                                SCHEMA_INVALID,
                                &child_pointer(&p, name),
                                "dependentRequired members must be arrays of unique strings",
                            )
                        })?;
                        entries.push((name.clone(), names));
                    }
                    entries.sort_by(|a, b| json::compare_utf16(&a.0, &b.0));
                    k.dependent_required = Some(entries);
                }
                "minProperties" | "maxProperties" | "minContains" | "maxContains" | "minItems"
                | "maxItems" | "minLength" | "maxLength" => {
                    let n = non_negative_integer(value)
                        .ok_or_else(|| invalid("must be a non-negative integer"))?;
                    let slot = match key.as_str() {
                        "minProperties" => &mut k.min_properties,
                        "maxProperties" => &mut k.max_properties,
                        "minContains" => &mut k.min_contains,
                        "maxContains" => &mut k.max_contains,
                        "minItems" => &mut k.min_items,
                        "maxItems" => &mut k.max_items,
                        "minLength" => &mut k.min_length,
                        _ => &mut k.max_length,
                    };
                    *slot = Some(n);
                }
                "minimum" | "exclusiveMinimum" | "maximum" | "exclusiveMaximum" => {
                    let Value::Number(n) = value else {
                        return Err(invalid("must be a number"));
                    };
                    let slot = match key.as_str() {
                        "minimum" => &mut k.minimum,
                        "exclusiveMinimum" => &mut k.exclusive_minimum,
                        "maximum" => &mut k.maximum,
                        _ => &mut k.exclusive_maximum,
                    };
                    *slot = Some(number_value(n));
                }
                _ => unreachable!("allowlist checked before"),
            }
        }
        Ok(k)
    }

    /// Resolves references, rejects cycles among definitions, and freezes
    /// the graph.
    pub(crate) fn finish(mut self) -> Result<Arc<Graph>, SchemaError> {
        // Edges between definitions: def owning the ref site -> target def.
        let mut edges: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let refs = std::mem::take(&mut self.refs);
        for (site, name, pointer) in &refs {
            let Some(&target) = self.defs.get(name) else {
                return Err(SchemaError::new(
                    SCHEMA_REFERENCE_INVALID,
                    pointer,
                    format!("$ref names missing definition {name:?}"),
                ));
            };
            if let NodeKind::Object(k) = &mut self.nodes[*site].kind {
                k.reference = Some(target);
            }
            if let Some(owner) = &self.owner[*site] {
                edges.entry(owner.clone()).or_default().push(name.clone());
            }
        }
        // Depth-first search for a cycle (iterative colouring).
        let mut state: HashMap<&str, u8> = HashMap::new();
        for start in self.defs.keys() {
            if state.get(start.as_str()).copied().unwrap_or(0) != 0 {
                continue;
            }
            let mut stack: Vec<(&str, usize)> = vec![(start.as_str(), 0)];
            state.insert(start.as_str(), 1);
            while let Some((node, next)) = stack.pop() {
                let targets = edges.get(node).map(Vec::as_slice).unwrap_or(&[]);
                if next < targets.len() {
                    stack.push((node, next + 1));
                    let t = targets[next].as_str();
                    match state.get(t).copied().unwrap_or(0) {
                        0 => {
                            state.insert(t, 1);
                            stack.push((t, 0));
                        }
                        1 => {
                            let pointer = refs
                                .iter()
                                .find(|(site, name, _)| {
                                    self.owner[*site].as_deref() == Some(node) && name == t
                                })
                                .map(|r| r.2.clone())
                                .unwrap_or_default();
                            return Err(SchemaError::new(
                                SCHEMA_REFERENCE_INVALID,
                                &pointer,
                                format!("$ref cycle through definition {t:?}"),
                            ));
                        }
                        _ => {}
                    }
                } else {
                    state.insert(node, 2);
                }
            }
        }
        Ok(Arc::new(Graph { nodes: self.nodes }))
    }
}

fn string_set(value: &Value) -> Option<Vec<String>> {
    let Value::Array(items) = value else {
        return None;
    };
    let mut out: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        let s = item.as_str()?;
        if out.iter().any(|o| o == s) {
            return None;
        }
        out.push(s.to_owned());
    }
    Some(out)
}

fn non_negative_integer(value: &Value) -> Option<u64> {
    let Value::Number(n) = value else {
        return None;
    };
    let f = number_value(n);
    (f >= 0.0 && f.fract() == 0.0).then_some(f as u64)
}

impl Schema {
    /// Compiles the bytes of a Schema/1 file (`input.schema.json`, ...).
    pub fn compile_file(bytes: &[u8]) -> Result<Schema, SchemaError> {
        if bytes.len() > MAX_SCHEMA_BYTES {
            return Err(SchemaError::new(
                SCHEMA_LIMIT_EXCEEDED,
                "",
                format!(
                    "schema file is {} bytes; the limit is {MAX_SCHEMA_BYTES}",
                    bytes.len()
                ),
            ));
        }
        let value = json::parse(bytes)
            .map_err(|e| SchemaError::new(SCHEMA_INVALID_JSON, "", e.to_string()))?;
        Schema::compile_value(&value)
    }

    /// Compiles a parsed Schema/1 file root. The value is checked against
    /// JSON/1 first, and its canonical size against the file limit.
    pub fn compile_value(value: &Value) -> Result<Schema, SchemaError> {
        json::check(value).map_err(|e| SchemaError::new(SCHEMA_INVALID_JSON, "", e.to_string()))?;
        // An in-memory value has no file; its smallest encoding must fit.
        let size = json::canonical(value).len();
        if size > MAX_SCHEMA_BYTES {
            return Err(SchemaError::new(
                SCHEMA_LIMIT_EXCEEDED,
                "",
                format!("schema is {size} canonical bytes; the limit is {MAX_SCHEMA_BYTES}"),
            ));
        }
        let Value::Object(root) = value else {
            return Err(SchemaError::new(
                SCHEMA_INVALID,
                "",
                "a schema file root must be an object",
            ));
        };
        match root.get("$schema") {
            Some(Value::String(s)) if s == SCHEMA_URI => {}
            Some(_) => {
                return Err(SchemaError::new(
                    SCHEMA_INVALID,
                    "/$schema",
                    format!("$schema must be exactly {SCHEMA_URI:?}"),
                ))
            }
            None => {
                return Err(SchemaError::new(
                    SCHEMA_INVALID,
                    "",
                    format!("the root must declare \"$schema\": {SCHEMA_URI:?}"),
                ))
            }
        }
        let mut builder = GraphBuilder::new();
        let mut body = root.clone();
        body.remove("$schema");
        let defs = body.remove("$defs");
        // The root is node 0 and depth 1; definitions sit at depth 2.
        let root_id = builder.add_root(&Value::Object(body), "")?;
        if let Some(defs) = defs {
            // Keyword checks on the root happen before definitions compile,
            // so an unsupported root keyword wins over a bad definition.
            builder.add_defs(&defs, "/$defs")?;
        }
        let graph = builder.finish()?;
        Ok(Schema {
            graph,
            root: root_id,
        })
    }

    pub(crate) fn from_graph(graph: Arc<Graph>, root: NodeId) -> Schema {
        Schema { graph, root }
    }

    /// The RFC 6901 pointer of this schema's root in its document.
    pub fn pointer(&self) -> &str {
        &self.graph.nodes[self.root].pointer
    }

    /// Whether this schema is the boolean `true` (accepts any JSON/1 value).
    pub fn accepts_anything(&self) -> bool {
        matches!(self.graph.nodes[self.root].kind, NodeKind::Bool(true))
    }

    /// Validates an instance, charging the normative work meter.
    pub fn validate(&self, instance: &Value) -> Result<(), Invalid> {
        json::check(instance).map_err(Invalid::Json)?;
        let (result, _) = self.evaluate(instance);
        result
    }

    /// Validates and also returns the work units charged (for tests and
    /// diagnostics). On exhaustion the units are past the budget.
    pub fn validate_metered(&self, instance: &Value) -> (Result<(), Invalid>, u64) {
        if let Err(e) = json::check(instance) {
            return (Err(Invalid::Json(e)), 0);
        }
        self.evaluate(instance)
    }

    fn evaluate(&self, instance: &Value) -> (Result<(), Invalid>, u64) {
        let mut ev = Evaluator {
            graph: &self.graph,
            units: 0,
            memo: HashMap::new(),
            locations: HashMap::new(),
        };
        match ev.run(self.root, instance) {
            Err(Exhausted) => (Err(Invalid::LimitExceeded), ev.units),
            Ok(None) => (Ok(()), ev.units),
            Ok(Some(d)) => {
                let mut d = (*d).clone();
                d.message = explain::sentence(&self.graph, &d, instance);
                (Err(Invalid::Diagnostic(d)), ev.units)
            }
        }
    }
}
