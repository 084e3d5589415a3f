//! `FLOW.md` Metadata/1: the frontmatter delimiters, the restricted YAML
//! (1.2 JSON schema, no tags, anchors, aliases, merge keys or duplicate
//! keys), the bounds, and the closed vocabulary.
//!
//! YAML is read at the event level so that scalar style, tags and anchors are
//! visible: a plain `yes`, `~`, `0x1F` or `.inf` stays the string it is.

use std::collections::BTreeMap;

use saphyr_parser::{Event, Parser, ScalarStyle};
use serde_json::{Map, Value};

use super::error::{codes, PackageError};
use super::path::check_author_reference;
use crate::contract::is_local_name;
use crate::json;

/// Maximum bytes from the start of `FLOW.md` through the closing delimiter.
pub const MAX_FRONTMATTER_BYTES: usize = 262_144;
/// Maximum nesting depth of the frontmatter value (root is 1).
pub const MAX_METADATA_DEPTH: usize = 16;
/// Maximum total nodes of the frontmatter value.
pub const MAX_METADATA_NODES: usize = 4_096;
/// Maximum entries in one mapping.
pub const MAX_MAP_ENTRIES: usize = 256;
/// Maximum items in one sequence.
pub const MAX_SEQUENCE_ITEMS: usize = 256;
/// Maximum Unicode scalars of `description`.
pub const MAX_DESCRIPTION_CHARS: usize = 16_384;
/// Outcome names every Run has; packages cannot redeclare them.
pub const RESERVED_OUTCOMES: [&str; 4] = ["done", "failed", "cancelled", "error"];

/// A capability slot declared under `uses`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Use {
    /// `contract: ./path` — the logical path with `./` stripped.
    Contract { path: String },
    /// `local: true`.
    Local,
}

/// Maximum access an attachment requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    ReadWrite,
}

/// The parsed frontmatter of `FLOW.md`.
#[derive(Debug, Clone, PartialEq)]
pub struct Metadata {
    pub name: String,
    pub description: String,
    pub uses: BTreeMap<String, Use>,
    pub outcomes: BTreeMap<String, String>,
    pub attachments: BTreeMap<String, Access>,
    /// Channel declarations as written; validated by Channel Contract/1 rules.
    pub channels: BTreeMap<String, Value>,
    /// `x-<LocalName>` extension values; inert.
    pub extensions: BTreeMap<String, Value>,
    /// The frontmatter as a JSON/1 value.
    pub value: Value,
    /// The Markdown body after the closing delimiter, exact bytes.
    pub body: String,
}

fn err(code: &'static str, message: impl Into<String>) -> PackageError {
    PackageError::at(code, "FLOW.md", message)
}

fn invalid(pointer: &str, message: impl Into<String>) -> PackageError {
    let mut e = err(codes::METADATA_INVALID, message);
    e.pointer = Some(pointer.to_owned());
    e
}

/// Splits `FLOW.md` into (frontmatter YAML text, body).
fn split(bytes: &[u8]) -> Result<(&str, &str), PackageError> {
    if bytes.starts_with(&[0xEF, 0xBB, 0xBF]) {
        return Err(err(
            codes::METADATA_ENCODING_INVALID,
            "FLOW.md begins with a BOM",
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| {
        err(
            codes::METADATA_ENCODING_INVALID,
            "FLOW.md is not valid UTF-8",
        )
    })?;
    let after_open = if let Some(rest) = text.strip_prefix("---\n") {
        rest
    } else if let Some(rest) = text.strip_prefix("---\r\n") {
        rest
    } else {
        return Err(err(
            codes::METADATA_DELIMITER_INVALID,
            "FLOW.md must begin with a \"---\" line",
        ));
    };
    let yaml_start = text.len() - after_open.len();
    // Find the next line that is exactly `---`.
    let mut line_start = yaml_start;
    loop {
        if line_start > text.len() {
            break;
        }
        let rest = &text[line_start..];
        let line_end = rest.find('\n').map(|i| line_start + i);
        let line = match line_end {
            Some(end) => &text[line_start..end],
            None => rest,
        };
        let line_body = line.strip_suffix('\r').unwrap_or(line);
        if line_body == "---" && (line_end.is_some() || !line.ends_with('\r')) {
            let closing_end = line_end.map_or(text.len(), |e| e + 1);
            if closing_end > MAX_FRONTMATTER_BYTES {
                break;
            }
            return Ok((&text[yaml_start..line_start], &text[closing_end..]));
        }
        match line_end {
            Some(end) => {
                line_start = end + 1;
                if line_start > MAX_FRONTMATTER_BYTES {
                    break;
                }
            }
            None => {
                return Err(err(
                    codes::METADATA_DELIMITER_INVALID,
                    "FLOW.md frontmatter has no closing \"---\" line",
                ))
            }
        }
    }
    Err(err(
        codes::METADATA_LIMIT_EXCEEDED,
        format!("FLOW.md frontmatter exceeds {MAX_FRONTMATTER_BYTES} bytes"),
    ))
}

/// Parses and validates `FLOW.md` bytes. Author references are checked for
/// shape only; the package checks that they resolve.
pub fn parse_metadata(bytes: &[u8]) -> Result<Metadata, PackageError> {
    let (yaml, body) = split(bytes)?;
    let value = yaml_to_json(yaml)?;
    json::check(&value).map_err(|e| {
        err(
            codes::METADATA_INVALID,
            format!("frontmatter is not JSON/1: {e}"),
        )
    })?;
    let mut metadata = vocabulary(&value)?;
    metadata.value = value;
    metadata.body = body.to_owned();
    Ok(metadata)
}

fn yaml_error(message: impl Into<String>) -> PackageError {
    err(codes::METADATA_YAML_INVALID, message)
}

fn limit(message: impl Into<String>) -> PackageError {
    err(codes::METADATA_LIMIT_EXCEEDED, message)
}

enum Frame {
    Seq(Vec<Value>),
    Map(Map<String, Value>, Option<String>),
}

/// Converts the restricted YAML to a JSON value, enforcing bounds as it goes.
fn yaml_to_json(yaml: &str) -> Result<Value, PackageError> {
    let mut parser = Parser::new_from_str(yaml);
    let mut stack: Vec<Frame> = Vec::new();
    let mut root: Option<Value> = None;
    let mut nodes = 0usize;
    let mut documents = 0usize;
    while let Some(event) = parser.next_event() {
        let (event, _span) = event.map_err(|e| yaml_error(format!("YAML: {e}")))?;
        let is_sequence = matches!(&event, Event::SequenceStart(..));
        let value = match event {
            Event::StreamStart | Event::StreamEnd | Event::Nothing | Event::DocumentEnd => continue,
            Event::DocumentStart(_) => {
                documents += 1;
                if documents > 1 {
                    return Err(yaml_error("frontmatter holds more than one YAML document"));
                }
                continue;
            }
            Event::Alias(_) => return Err(yaml_error("YAML aliases are not allowed")),
            Event::Scalar(text, style, anchor, tag) => {
                if anchor != 0 {
                    return Err(yaml_error("YAML anchors are not allowed"));
                }
                if tag.is_some() {
                    return Err(yaml_error("YAML tags are not allowed"));
                }
                // A mapping key position?
                if let Some(Frame::Map(map, key @ None)) = stack.last_mut() {
                    if style == ScalarStyle::Plain && scalar_value(&text).is_some() {
                        return Err(yaml_error(format!("mapping key {text:?} is not a string")));
                    }
                    if style == ScalarStyle::Plain && text == "<<" {
                        return Err(yaml_error("YAML merge keys are not allowed"));
                    }
                    if map.contains_key(text.as_ref()) {
                        return Err(yaml_error(format!("duplicate mapping key {text:?}")));
                    }
                    if map.len() == MAX_MAP_ENTRIES {
                        return Err(limit(format!(
                            "a mapping has more than {MAX_MAP_ENTRIES} entries"
                        )));
                    }
                    *key = Some(text.into_owned());
                    continue;
                }
                if style == ScalarStyle::Plain {
                    scalar_value(&text).unwrap_or_else(|| Ok(Value::String(text.to_string())))?
                } else {
                    Value::String(text.into_owned())
                }
            }
            Event::SequenceStart(anchor, tag) | Event::MappingStart(anchor, tag) => {
                if anchor != 0 {
                    return Err(yaml_error("YAML anchors are not allowed"));
                }
                if tag.is_some() {
                    return Err(yaml_error("YAML tags are not allowed"));
                }
                if let Some(Frame::Map(_, None)) = stack.last() {
                    return Err(yaml_error("mapping keys must be strings"));
                }
                nodes += 1;
                if nodes > MAX_METADATA_NODES {
                    return Err(limit(format!("more than {MAX_METADATA_NODES} nodes")));
                }
                if stack.len() + 1 > MAX_METADATA_DEPTH {
                    return Err(limit(format!("nesting deeper than {MAX_METADATA_DEPTH}")));
                }
                stack.push(if is_sequence {
                    Frame::Seq(Vec::new())
                } else {
                    Frame::Map(Map::new(), None)
                });
                continue;
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Frame::Seq(items)) => Value::Array(items),
                _ => return Err(yaml_error("unbalanced YAML sequence")),
            },
            Event::MappingEnd => match stack.pop() {
                Some(Frame::Map(map, None)) => Value::Object(map),
                _ => return Err(yaml_error("unbalanced YAML mapping")),
            },
        };
        let is_scalar = !value.is_array() && !value.is_object();
        if is_scalar {
            nodes += 1;
            if nodes > MAX_METADATA_NODES {
                return Err(limit(format!("more than {MAX_METADATA_NODES} nodes")));
            }
            if stack.len() + 1 > MAX_METADATA_DEPTH {
                return Err(limit(format!("nesting deeper than {MAX_METADATA_DEPTH}")));
            }
        }
        match stack.last_mut() {
            None => root = Some(value),
            Some(Frame::Seq(items)) => {
                if items.len() == MAX_SEQUENCE_ITEMS {
                    return Err(limit(format!(
                        "a sequence has more than {MAX_SEQUENCE_ITEMS} items"
                    )));
                }
                items.push(value);
            }
            Some(Frame::Map(map, key)) => {
                let key = key.take().expect("value follows a key");
                map.insert(key, value);
            }
        }
    }
    Ok(root.unwrap_or(Value::Null))
}

/// The JSON value of an exact plain `null`/`true`/`false`/JSON number, or
/// `None` for a plain scalar that stays a string.
fn scalar_value(text: &str) -> Option<Result<Value, PackageError>> {
    match text {
        "null" => return Some(Ok(Value::Null)),
        "true" => return Some(Ok(Value::Bool(true))),
        "false" => return Some(Ok(Value::Bool(false))),
        _ => {}
    }
    if !is_json_number(text) {
        return None;
    }
    Some(
        json::parse(text.as_bytes())
            .map_err(|e| err(codes::METADATA_INVALID, format!("number {text}: {e}"))),
    )
}

fn is_json_number(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => {
            while matches!(b.get(i), Some(b'0'..=b'9')) {
                i += 1;
            }
        }
        _ => return false,
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        if !matches!(b.get(i), Some(b'0'..=b'9')) {
            return false;
        }
        while matches!(b.get(i), Some(b'0'..=b'9')) {
            i += 1;
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !matches!(b.get(i), Some(b'0'..=b'9')) {
            return false;
        }
        while matches!(b.get(i), Some(b'0'..=b'9')) {
            i += 1;
        }
    }
    i == b.len()
}

fn pointer(parts: &[&str]) -> String {
    parts
        .iter()
        .map(|p| format!("/{}", crate::schema::escape_pointer_token(p)))
        .collect()
}

fn object<'v>(value: &'v Value, at: &str) -> Result<&'v Map<String, Value>, PackageError> {
    value
        .as_object()
        .ok_or_else(|| invalid(at, format!("{} must be a mapping", display(at))))
}

fn display(at: &str) -> &str {
    if at.is_empty() {
        "the frontmatter"
    } else {
        at
    }
}

fn local_key(name: &str, at: &str) -> Result<(), PackageError> {
    if is_local_name(name) {
        Ok(())
    } else {
        Err(invalid(at, format!("{name:?} is not a LocalName")))
    }
}

fn vocabulary(value: &Value) -> Result<Metadata, PackageError> {
    let root = object(value, "")?;
    let mut m = Metadata {
        name: String::new(),
        description: String::new(),
        uses: BTreeMap::new(),
        outcomes: BTreeMap::new(),
        attachments: BTreeMap::new(),
        channels: BTreeMap::new(),
        extensions: BTreeMap::new(),
        value: Value::Null,
        body: String::new(),
    };
    for (key, v) in root {
        let at = pointer(&[key]);
        match key.as_str() {
            "name" => match v {
                Value::String(s) if is_local_name(s) => m.name = s.clone(),
                _ => return Err(invalid(&at, "name must be a LocalName")),
            },
            "description" => match v {
                Value::String(s) if !s.is_empty() && s.chars().count() <= MAX_DESCRIPTION_CHARS => {
                    m.description = s.clone()
                }
                _ => {
                    return Err(invalid(
                        &at,
                        format!("description must be 1 to {MAX_DESCRIPTION_CHARS} characters"),
                    ))
                }
            },
            "uses" => {
                for (slot, decl) in object(v, &at)? {
                    let sp = pointer(&[key, slot]);
                    local_key(slot, &sp)?;
                    let d = object(decl, &sp)?;
                    let use_ = match (d.get("contract"), d.get("local"), d.len()) {
                        (Some(Value::String(r)), None, 1) => {
                            let path = check_author_reference(r).map_err(|e| PackageError {
                                pointer: Some(format!("{sp}/contract")),
                                path: Some("FLOW.md".into()),
                                ..e
                            })?;
                            Use::Contract {
                                path: path.to_owned(),
                            }
                        }
                        (None, Some(Value::Bool(true)), 1) => Use::Local,
                        _ => {
                            return Err(invalid(
                                &sp,
                                "a slot is exactly {contract: ./path} or {local: true}",
                            ))
                        }
                    };
                    m.uses.insert(slot.clone(), use_);
                }
            }
            "outcomes" => {
                for (name, text) in object(v, &at)? {
                    let op = pointer(&[key, name]);
                    local_key(name, &op)?;
                    if RESERVED_OUTCOMES.contains(&name.as_str()) {
                        return Err(invalid(&op, format!("outcome {name:?} is reserved")));
                    }
                    match text {
                        Value::String(s) if !s.is_empty() => {
                            m.outcomes.insert(name.clone(), s.clone());
                        }
                        _ => return Err(invalid(&op, "an outcome needs a non-empty description")),
                    }
                }
            }
            "attachments" => {
                for (name, mode) in object(v, &at)? {
                    let ap = pointer(&[key, name]);
                    local_key(name, &ap)?;
                    let access = match mode.as_str() {
                        Some("read") => Access::Read,
                        Some("read-write") => Access::ReadWrite,
                        _ => return Err(invalid(&ap, "access must be read or read-write")),
                    };
                    m.attachments.insert(name.clone(), access);
                }
            }
            "channels" => {
                crate::contract::parse_channel_declarations(v)
                    .map_err(|e| invalid(&format!("{at}{}", e.pointer), e.message))?;
                for (name, decl) in object(v, &at)? {
                    m.channels.insert(name.clone(), decl.clone());
                }
            }
            other => match other.strip_prefix("x-") {
                Some(rest) if is_local_name(rest) => {
                    m.extensions.insert(key.clone(), v.clone());
                }
                _ => return Err(invalid(&at, format!("unknown field {other:?}"))),
            },
        }
    }
    if m.name.is_empty() {
        return Err(invalid("", "name is required"));
    }
    if m.description.is_empty() {
        return Err(invalid("", "description is required"));
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Metadata, PackageError> {
        parse_metadata(s.as_bytes())
    }

    #[test]
    fn minimum_document() {
        let m = parse("---\nname: resize-image\ndescription: Resize an image.\n---\n# Body\r\n")
            .unwrap();
        assert_eq!(m.name, "resize-image");
        assert_eq!(m.body, "# Body\r\n");
        let m = parse("---\r\nname: a\r\ndescription: b\r\n---").unwrap();
        assert_eq!(m.body, "");
    }

    #[test]
    fn scalars_follow_the_json_schema() {
        let m = parse(
            "---\nname: a\ndescription: b\nx-s:\n  - yes\n  - on\n  - ~\n  - 0x1F\n  - .inf\n  - True\n  - null\n  - 1.5\n  - 'true'\n  - -0\n---\n",
        )
        .unwrap();
        assert_eq!(
            m.extensions["x-s"],
            serde_json::json!(["yes", "on", "~", "0x1F", ".inf", "True", null, 1.5, "true", 0])
        );
    }

    #[test]
    fn unsafe_yaml_rejects() {
        for doc in [
            "---\nname: a\nname: b\ndescription: c\n---\n",
            "---\nname: !!str a\ndescription: c\n---\n",
            "---\nname: &x a\ndescription: *x\n---\n",
            "---\nname: a\ndescription: c\nx-m:\n  <<: {a: 1}\n---\n",
            "---\nname: a\ndescription: c\nx-m:\n  1: a\n---\n",
            "---\nname: a\ndescription: c\nx-m:\n  [a]: a\n---\n",
        ] {
            assert_eq!(
                parse(doc).unwrap_err().code,
                codes::METADATA_YAML_INVALID,
                "{doc}"
            );
        }
    }

    #[test]
    fn vocabulary_is_closed() {
        assert_eq!(
            parse("---\nname: a\ndescription: b\nflow: 1\n---\n")
                .unwrap_err()
                .code,
            codes::METADATA_INVALID
        );
        assert_eq!(
            parse("---\nname: a\ndescription: b\noutcomes:\n  done: x\n---\n")
                .unwrap_err()
                .code,
            codes::METADATA_INVALID
        );
        assert!(parse("---\nname: a\ndescription: b\nx-tool: {a: [1]}\n---\n").is_ok());
    }

    #[test]
    fn delimiters() {
        for doc in [
            "\u{feff}---\nname: a\n---\n",
            "--- \nname: a\n---\n",
            "---\nname: a\n",
            "name: a\n",
        ] {
            let code = parse(doc).unwrap_err().code;
            assert!(
                code == codes::METADATA_DELIMITER_INVALID
                    || code == codes::METADATA_ENCODING_INVALID,
                "{doc:?} {code}"
            );
        }
    }
}
