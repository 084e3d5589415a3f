//! FLOW JSON/1: the bounded value model every other FLOW format stands on.
//!
//! The in-memory value is [`serde_json::Value`]. This module adds what plain
//! JSON parsers disagree about: a strict parser that rejects duplicate member
//! names, lone surrogates, BOMs and out-of-domain numbers before a value is
//! built; the absolute size limits; JSON/1 equality; RFC 8785 canonical
//! bytes for digests; and a string as an ASCII-only literal, the one way
//! untrusted text is quoted in a message.
//!
//! Integral numbers are always stored as `i64` so that `1` and `1.0` are the
//! same in-memory value; negative zero is stored as integer zero.

use std::cmp::Ordering;
use std::fmt;

pub use serde_json::Value;
use serde_json::{Map, Number};

/// Maximum UTF-8 encoded bytes of one document or frame.
pub const MAX_DOCUMENT_BYTES: usize = 16_777_216;
/// Maximum value depth; the root value is at depth 1.
pub const MAX_DEPTH: usize = 128;
/// Maximum total value nodes, including the root.
pub const MAX_NODES: usize = 262_144;
/// Maximum members in one object.
pub const MAX_OBJECT_MEMBERS: usize = 65_536;
/// Maximum items in one array.
pub const MAX_ARRAY_ITEMS: usize = 65_536;
/// Maximum UTF-8 bytes of one string value.
pub const MAX_STRING_BYTES: usize = 8_388_608;
/// Maximum UTF-8 bytes of one member name.
pub const MAX_MEMBER_NAME_BYTES: usize = 1_024;
/// Maximum bytes of one number token.
pub const MAX_NUMBER_TOKEN_BYTES: usize = 128;
/// The largest magnitude an integral number may have.
pub const MAX_SAFE_INTEGER: i64 = 9_007_199_254_740_991;

/// What went wrong, in JSON/1's terms. Seams map these onto their own codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JsonErrorKind {
    /// A UTF-8 byte order mark begins the document.
    Bom,
    /// The bytes are not valid UTF-8.
    InvalidUtf8,
    /// The text is not RFC 8259 JSON.
    Syntax,
    /// An object repeats a member name.
    DuplicateMember,
    /// A string or member name holds a literal or escaped lone surrogate.
    LoneSurrogate,
    /// A number is NaN, infinite, or integral outside the safe range.
    NumberOutOfDomain,
    /// One of the absolute limits is exceeded.
    LimitExceeded,
}

/// A JSON/1 failure: the kind, the byte offset and the line and column
/// when parsing, and a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct JsonError {
    pub kind: JsonErrorKind,
    pub offset: Option<usize>,
    /// Where `offset` is for a person reading the text, 1-based.
    pub position: Option<Position>,
    pub message: String,
}

/// A place in a text as an editor shows it: the line (1-based, after each
/// `\n`) and the column (1-based, in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Position {
    pub line: usize,
    pub column: usize,
}

impl Position {
    /// Where byte `offset` of `bytes` is; the bytes before it are UTF-8
    /// (an offset is only ever given past valid text).
    pub fn of(bytes: &[u8], offset: usize) -> Position {
        let before = &bytes[..offset.min(bytes.len())];
        let line_start = before
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |newline| newline + 1);
        Position {
            line: before.iter().filter(|b| **b == b'\n').count() + 1,
            column: String::from_utf8_lossy(&before[line_start..])
                .chars()
                .count()
                + 1,
        }
    }
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.position, self.offset) {
            (Some(at), _) => write!(
                f,
                "{} at line {}, column {}",
                self.message, at.line, at.column
            ),
            (None, Some(offset)) => write!(f, "{} at byte {}", self.message, offset),
            (None, None) => f.write_str(&self.message),
        }
    }
}

impl JsonError {
    fn new(kind: JsonErrorKind, offset: Option<usize>, message: impl Into<String>) -> Self {
        JsonError {
            kind,
            offset,
            position: None,
            message: message.into(),
        }
    }

    /// The same error placed by line and column in `bytes`, the document
    /// its offset is in.
    fn in_document(self, bytes: &[u8]) -> Self {
        JsonError {
            position: self.offset.map(|offset| Position::of(bytes, offset)),
            ..self
        }
    }
}

/// Parses one strict JSON/1 document.
pub fn parse(bytes: &[u8]) -> Result<Value, JsonError> {
    parse_with_limit(bytes, MAX_DOCUMENT_BYTES)
}

/// Parses one strict JSON/1 document whose seam fixes a lower byte limit.
/// A limit above [`MAX_DOCUMENT_BYTES`] is clamped to it. An error names
/// its line and column.
pub fn parse_with_limit(bytes: &[u8], max_bytes: usize) -> Result<Value, JsonError> {
    parse_document(bytes, max_bytes).map_err(|e| e.in_document(bytes))
}

fn parse_document(bytes: &[u8], max_bytes: usize) -> Result<Value, JsonError> {
    let max_bytes = max_bytes.min(MAX_DOCUMENT_BYTES);
    if bytes.len() > max_bytes {
        return Err(JsonError::new(
            JsonErrorKind::LimitExceeded,
            None,
            format!(
                "document is {} bytes; the limit is {max_bytes}",
                bytes.len()
            ),
        ));
    }
    if bytes.starts_with(&[0xEF, 0xBB, 0xBF]) {
        return Err(JsonError::new(
            JsonErrorKind::Bom,
            Some(0),
            "document begins with a byte order mark",
        ));
    }
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            return Err(JsonError::new(
                JsonErrorKind::InvalidUtf8,
                Some(e.valid_up_to()),
                "invalid UTF-8",
            ))
        }
    };
    let mut parser = Parser {
        bytes,
        text,
        pos: 0,
        nodes: 0,
    };
    parser.skip_ws();
    let value = parser.value(1)?;
    parser.skip_ws();
    if parser.pos != bytes.len() {
        return Err(parser.error(JsonErrorKind::Syntax, "trailing data after the value"));
    }
    Ok(value)
}

/// Bytes that end a plain run inside a string: quote, backslash, controls.
static STRING_SPECIAL: [bool; 256] = {
    let mut table = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        table[i] = true;
        i += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};

struct Parser<'a> {
    bytes: &'a [u8],
    /// The same input as validated text, sliced at ASCII boundaries.
    text: &'a str,
    pos: usize,
    nodes: usize,
}

impl Parser<'_> {
    fn error(&self, kind: JsonErrorKind, message: impl Into<String>) -> JsonError {
        JsonError::new(kind, Some(self.pos), message)
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn expect_literal(&mut self, literal: &[u8]) -> Result<(), JsonError> {
        if self.bytes[self.pos..].starts_with(literal) {
            self.pos += literal.len();
            Ok(())
        } else {
            Err(self.error(JsonErrorKind::Syntax, "invalid literal"))
        }
    }

    fn count_node(&mut self) -> Result<(), JsonError> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(self.error(
                JsonErrorKind::LimitExceeded,
                format!("more than {MAX_NODES} value nodes"),
            ));
        }
        Ok(())
    }

    fn value(&mut self, depth: usize) -> Result<Value, JsonError> {
        if depth > MAX_DEPTH {
            return Err(self.error(
                JsonErrorKind::LimitExceeded,
                format!("value depth exceeds {MAX_DEPTH}"),
            ));
        }
        self.count_node()?;
        match self.peek() {
            None => Err(self.error(JsonErrorKind::Syntax, "unexpected end of input")),
            Some(b'n') => self.expect_literal(b"null").map(|()| Value::Null),
            Some(b't') => self.expect_literal(b"true").map(|()| Value::Bool(true)),
            Some(b'f') => self.expect_literal(b"false").map(|()| Value::Bool(false)),
            Some(b'"') => self
                .string(MAX_STRING_BYTES, "string value")
                .map(Value::String),
            Some(b'-' | b'0'..=b'9') => self.number().map(Value::Number),
            Some(b'[') => self.array(depth),
            Some(b'{') => self.object(depth),
            Some(_) => Err(self.error(JsonErrorKind::Syntax, "unexpected character")),
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, JsonError> {
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Value::Array(items));
        }
        loop {
            self.skip_ws();
            if items.len() == MAX_ARRAY_ITEMS {
                return Err(self.error(
                    JsonErrorKind::LimitExceeded,
                    format!("array has more than {MAX_ARRAY_ITEMS} items"),
                ));
            }
            items.push(self.value(depth + 1)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Value::Array(items));
                }
                _ => return Err(self.error(JsonErrorKind::Syntax, "expected ',' or ']'")),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value, JsonError> {
        self.pos += 1;
        let mut members = Map::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Value::Object(members));
        }
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(self.error(JsonErrorKind::Syntax, "expected a member name"));
            }
            let name_offset = self.pos;
            let name = self.string(MAX_MEMBER_NAME_BYTES, "member name")?;
            if members.len() == MAX_OBJECT_MEMBERS {
                return Err(JsonError::new(
                    JsonErrorKind::LimitExceeded,
                    Some(name_offset),
                    format!("object has more than {MAX_OBJECT_MEMBERS} members"),
                ));
            }
            // The duplicate is found before the member's value is parsed.
            let slot = match members.entry(name) {
                serde_json::map::Entry::Vacant(slot) => slot,
                serde_json::map::Entry::Occupied(taken) => {
                    return Err(JsonError::new(
                        JsonErrorKind::DuplicateMember,
                        Some(name_offset),
                        format!("duplicate member name {:?}", taken.key()),
                    ))
                }
            };
            self.skip_ws();
            if self.peek() != Some(b':') {
                return Err(self.error(JsonErrorKind::Syntax, "expected ':'"));
            }
            self.pos += 1;
            self.skip_ws();
            slot.insert(self.value(depth + 1)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Value::Object(members));
                }
                _ => return Err(self.error(JsonErrorKind::Syntax, "expected ',' or '}'")),
            }
        }
    }

    fn hex4(&mut self) -> Result<u16, JsonError> {
        let Some(digits) = self.bytes.get(self.pos..self.pos + 4) else {
            return Err(self.error(JsonErrorKind::Syntax, "truncated \\u escape"));
        };
        let mut unit = 0u16;
        for &d in digits {
            let v = match d {
                b'0'..=b'9' => d - b'0',
                b'a'..=b'f' => d - b'a' + 10,
                b'A'..=b'F' => d - b'A' + 10,
                _ => return Err(self.error(JsonErrorKind::Syntax, "invalid \\u escape")),
            };
            unit = unit << 4 | u16::from(v);
        }
        self.pos += 4;
        Ok(unit)
    }

    /// Reads a string token starting at the opening quote. The input is
    /// already known to be valid UTF-8, so literal surrogates cannot occur;
    /// escaped ones must pair.
    fn string(&mut self, max_bytes: usize, what: &str) -> Result<String, JsonError> {
        let start = self.pos;
        self.pos += 1;
        let mut out = String::new();
        loop {
            // Copy the longest run of plain bytes at once. Runs end at
            // ASCII bytes, which are always character boundaries.
            let run_start = self.pos;
            let rest = &self.bytes[run_start..];
            let run = rest
                .iter()
                .position(|b| STRING_SPECIAL[usize::from(*b)])
                .unwrap_or(rest.len());
            self.pos += run;
            out.push_str(&self.text[run_start..self.pos]);
            if out.len() > max_bytes {
                return Err(JsonError::new(
                    JsonErrorKind::LimitExceeded,
                    Some(start),
                    format!("{what} exceeds {max_bytes} UTF-8 bytes"),
                ));
            }
            match self.peek() {
                None => return Err(self.error(JsonErrorKind::Syntax, "unterminated string")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let Some(e) = self.peek() else {
                        return Err(self.error(JsonErrorKind::Syntax, "unterminated string"));
                    };
                    self.pos += 1;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let escape_at = self.pos - 2;
                            let unit = self.hex4()?;
                            let c = match unit {
                                0xD800..=0xDBFF => {
                                    if self.bytes[self.pos..].starts_with(b"\\u") {
                                        self.pos += 2;
                                        let low = self.hex4()?;
                                        if !(0xDC00..=0xDFFF).contains(&low) {
                                            return Err(JsonError::new(
                                                JsonErrorKind::LoneSurrogate,
                                                Some(escape_at),
                                                "escaped high surrogate without a low surrogate",
                                            ));
                                        }
                                        let scalar = 0x10000
                                            + ((u32::from(unit) - 0xD800) << 10)
                                            + (u32::from(low) - 0xDC00);
                                        char::from_u32(scalar).expect("paired surrogates")
                                    } else {
                                        return Err(JsonError::new(
                                            JsonErrorKind::LoneSurrogate,
                                            Some(escape_at),
                                            "escaped high surrogate without a low surrogate",
                                        ));
                                    }
                                }
                                0xDC00..=0xDFFF => {
                                    return Err(JsonError::new(
                                        JsonErrorKind::LoneSurrogate,
                                        Some(escape_at),
                                        "escaped lone low surrogate",
                                    ))
                                }
                                _ => char::from_u32(u32::from(unit)).expect("BMP scalar"),
                            };
                            out.push(c);
                        }
                        _ => {
                            self.pos -= 1;
                            return Err(self.error(JsonErrorKind::Syntax, "invalid escape"));
                        }
                    }
                }
                Some(_) => {
                    return Err(self.error(
                        JsonErrorKind::Syntax,
                        "unescaped control character in string",
                    ))
                }
            }
        }
    }

    fn number(&mut self) -> Result<Number, JsonError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.error(JsonErrorKind::Syntax, "invalid number")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.error(JsonErrorKind::Syntax, "invalid number fraction"));
            }
            self.digits();
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.error(JsonErrorKind::Syntax, "invalid number exponent"));
            }
            self.digits();
        }
        let token = &self.bytes[start..self.pos];
        if token.len() > MAX_NUMBER_TOKEN_BYTES {
            return Err(JsonError::new(
                JsonErrorKind::LimitExceeded,
                Some(start),
                format!("number token exceeds {MAX_NUMBER_TOKEN_BYTES} bytes"),
            ));
        }
        // Short plain integers are exact in i64 and need no float parse.
        if token.len() <= 16 && token.iter().all(|b| b.is_ascii_digit() || *b == b'-') {
            let mut magnitude: i64 = 0;
            for &d in token.iter().filter(|b| b.is_ascii_digit()) {
                magnitude = magnitude * 10 + i64::from(d - b'0');
            }
            let value = if token[0] == b'-' {
                -magnitude
            } else {
                magnitude
            };
            if value.unsigned_abs() <= MAX_SAFE_INTEGER as u64 {
                return Ok(Number::from(value));
            }
        }
        let text = std::str::from_utf8(token).expect("ASCII number token");
        // Rust's f64 parser is correctly rounded (round-half-even).
        let value: f64 = text
            .parse()
            .map_err(|_| JsonError::new(JsonErrorKind::Syntax, Some(start), "invalid number"))?;
        number_from_f64(value).map_err(|message| {
            JsonError::new(JsonErrorKind::NumberOutOfDomain, Some(start), message)
        })
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
    }
}

/// Converts a binary64 value into the normalized in-memory number: integral
/// values become `i64` (negative zero becomes zero), others stay `f64`.
pub fn number_from_f64(value: f64) -> Result<Number, String> {
    if !value.is_finite() {
        return Err("number is not finite".to_owned());
    }
    if value.fract() == 0.0 {
        if value.abs() > MAX_SAFE_INTEGER as f64 {
            return Err(format!(
                "integral number outside ±{MAX_SAFE_INTEGER} must be a string"
            ));
        }
        // Exact: |value| <= 2^53 - 1.
        return Ok(Number::from(value as i64));
    }
    Ok(Number::from_f64(value).expect("finite"))
}

/// The binary64 value of a number. `serde_json` numbers are always finite.
pub fn number_value(n: &Number) -> f64 {
    if let Some(i) = n.as_i64() {
        i as f64
    } else if let Some(u) = n.as_u64() {
        u as f64
    } else {
        n.as_f64().unwrap_or(f64::NAN)
    }
}

/// Whether a number is in the JSON/1 domain: finite, and integral values
/// within the safe range.
fn number_in_domain(n: &Number) -> Result<(), String> {
    if let Some(i) = n.as_i64() {
        if i.unsigned_abs() > MAX_SAFE_INTEGER as u64 {
            return Err(format!(
                "integral number outside ±{MAX_SAFE_INTEGER} must be a string"
            ));
        }
        return Ok(());
    }
    if n.as_u64().is_some() {
        return Err(format!(
            "integral number outside ±{MAX_SAFE_INTEGER} must be a string"
        ));
    }
    number_from_f64(number_value(n)).map(|_| ())
}

/// Checks that an in-memory value satisfies the JSON/1 domain and the
/// absolute limits, including its encoded size.
pub fn check(value: &Value) -> Result<(), JsonError> {
    let mut nodes = 0usize;
    check_node(value, 1, &mut nodes)?;
    let size = encoded_len(value);
    if size > MAX_DOCUMENT_BYTES {
        return Err(JsonError::new(
            JsonErrorKind::LimitExceeded,
            None,
            format!("encoded value is {size} bytes; the limit is {MAX_DOCUMENT_BYTES}"),
        ));
    }
    Ok(())
}

fn limit(message: String) -> JsonError {
    JsonError::new(JsonErrorKind::LimitExceeded, None, message)
}

fn check_string(s: &str, max: usize, what: &str) -> Result<(), JsonError> {
    if s.len() > max {
        return Err(limit(format!("{what} exceeds {max} UTF-8 bytes")));
    }
    Ok(())
}

fn check_node(value: &Value, depth: usize, nodes: &mut usize) -> Result<(), JsonError> {
    if depth > MAX_DEPTH {
        return Err(limit(format!("value depth exceeds {MAX_DEPTH}")));
    }
    *nodes += 1;
    if *nodes > MAX_NODES {
        return Err(limit(format!("more than {MAX_NODES} value nodes")));
    }
    match value {
        Value::Null | Value::Bool(_) => Ok(()),
        Value::Number(n) => number_in_domain(n)
            .map_err(|m| JsonError::new(JsonErrorKind::NumberOutOfDomain, None, m)),
        Value::String(s) => check_string(s, MAX_STRING_BYTES, "string value"),
        Value::Array(items) => {
            if items.len() > MAX_ARRAY_ITEMS {
                return Err(limit(format!(
                    "array has more than {MAX_ARRAY_ITEMS} items"
                )));
            }
            items
                .iter()
                .try_for_each(|item| check_node(item, depth + 1, nodes))
        }
        Value::Object(members) => {
            if members.len() > MAX_OBJECT_MEMBERS {
                return Err(limit(format!(
                    "object has more than {MAX_OBJECT_MEMBERS} members"
                )));
            }
            members.iter().try_for_each(|(name, member)| {
                check_string(name, MAX_MEMBER_NAME_BYTES, "member name")?;
                check_node(member, depth + 1, nodes)
            })
        }
    }
}

/// JSON/1 equality: numbers by binary64 value (`-0 == 0`, `1 == 1.0`),
/// objects independent of member order.
pub fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Number(x), Value::Number(y)) => number_value(x) == number_value(y),
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| equal(v, w)))
        }
        _ => false,
    }
}

/// RFC 8785 canonical bytes of a value already known to satisfy [`check`].
pub fn canonical(value: &Value) -> Vec<u8> {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out.into_bytes()
}

/// RFC 8785 canonical text of a value already known to satisfy [`check`].
pub fn canonical_string(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

/// `text` as a JSON string literal in ASCII alone: `"` and `\` escaped,
/// printable ASCII kept, every other character (controls, DEL, anything
/// beyond ASCII) as `\uXXXX` UTF-16 escapes. Untrusted text quoted this
/// way cannot move a terminal's cursor, change its colours or hide itself.
pub fn ascii_quote(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            ' '..='~' => out.push(c),
            c => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
    out
}

/// Orders member names by their UTF-16 code units, as RFC 8785 requires.
pub fn compare_utf16(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => out.push_str(&format_number(number_value(n))),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(members) => {
            let mut entries: Vec<(&String, &Value)> = members.iter().collect();
            // BTreeMap order is UTF-8 byte order; it differs from UTF-16
            // order only when supplementary characters meet U+E000..U+FFFF.
            entries.sort_by(|a, b| compare_utf16(a.0, b.0));
            out.push('{');
            for (i, (name, member)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(name, out);
                out.push(':');
                write_canonical(member, out);
            }
            out.push('}');
        }
    }
}

fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Formats a finite binary64 value exactly as ECMAScript's
/// `Number.prototype.toString` does (RFC 8785 §3.2.2.3).
pub fn format_number(value: f64) -> String {
    if value == 0.0 {
        return "0".to_owned();
    }
    if !value.is_finite() {
        // Callers guarantee finiteness; keep the output well-defined anyway.
        return "null".to_owned();
    }
    // Below 2^53 every integer is exact and its digits are the shortest.
    if value.fract() == 0.0 && value.abs() < 9_007_199_254_740_992.0 {
        return (value as i64).to_string();
    }
    let (digits, exponent) = shortest_digits(value.abs());
    let k = digits.len() as i32;
    let n = exponent + 1;
    let mut out = String::new();
    if value < 0.0 {
        out.push('-');
    }
    if k <= n && n <= 21 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        out.push_str(&digits[..n as usize]);
        out.push('.');
        out.push_str(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-n) as usize));
        out.push_str(&digits);
    } else {
        out.push_str(&digits[..1]);
        if k > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if n > 0 { '+' } else { '-' });
        out.push_str(&(n - 1).abs().to_string());
    }
    out
}

/// Splits Rust's `{:e}` rendering into (significant digits, exponent).
fn split_scientific(text: &str) -> (String, i32) {
    let (mantissa, exponent) = text.split_once('e').expect("exponent form");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    (digits, exponent.parse().expect("decimal exponent"))
}

/// The shortest round-tripping significant digits of a positive finite
/// value and the decimal exponent of the first digit.
///
/// Rust's `{:e}` gives the shortest digits nearest to the value. When two
/// shortest candidates are exactly equally near, ECMAScript takes the one
/// whose last digit is even, which Rust does not promise; that tie is
/// detected from the exact decimal expansion and resolved here.
fn shortest_digits(value: f64) -> (String, i32) {
    let (digits, exponent) = split_scientific(&format!("{value:e}"));
    let k = digits.len();
    // A tie needs the exact value to have exactly k + 1 significant digits.
    // A value m * 2^q (m odd, q < 0) has exactly -q fractional digits, so
    // its significant digits number about exponent + 1 - q: most values
    // have far too many and are ruled out without further formatting.
    let bits = value.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let mantissa = if biased == 0 {
        bits & ((1 << 52) - 1)
    } else {
        (bits & ((1 << 52) - 1)) | (1 << 52)
    };
    let q = biased.max(1) - 1075 + mantissa.trailing_zeros() as i32;
    if q < 0 && exponent + 1 - q > k as i32 + 2 {
        return (digits, exponent);
    }
    // Rounded previews rule out most remaining values cheaply.
    let (preview, preview_exp) = split_scientific(&format!("{value:.prec$e}", prec = k + 8));
    if preview_exp != exponent && preview_exp != exponent - 1 {
        return (digits, exponent);
    }
    if !preview[k..].starts_with("5") || !preview[k + 1..].bytes().all(|b| b == b'0') {
        return (digits, exponent);
    }
    // Exact expansion: a binary64 value has at most 767 significant digits.
    let (exact, exact_exp) = split_scientific(&format!("{value:.800e}"));
    if exact_exp != exponent
        || exact.as_bytes()[k] != b'5'
        || !exact.as_bytes()[k + 1..].iter().all(|b| *b == b'0')
    {
        return (digits, exponent);
    }
    let truncated = &exact[..k];
    let last = truncated.as_bytes()[k - 1] - b'0';
    let even = if last.is_multiple_of(2) {
        truncated.to_owned()
    } else {
        match increment(truncated) {
            Some(up) => up,
            None => return (digits, exponent),
        }
    };
    if even == digits {
        return (digits, exponent);
    }
    let candidate = format!("{}.{}e{}", &even[..1], &even[1..], exponent);
    if candidate.parse::<f64>() == Ok(value) {
        let trimmed = even.trim_end_matches('0');
        return (trimmed.to_owned(), exponent);
    }
    (digits, exponent)
}

/// Adds one unit in the last place of a digit string; `None` on carry out.
fn increment(digits: &str) -> Option<String> {
    let mut bytes = digits.as_bytes().to_vec();
    for b in bytes.iter_mut().rev() {
        if *b == b'9' {
            *b = b'0';
        } else {
            *b += 1;
            return Some(String::from_utf8(bytes).expect("ASCII digits"));
        }
    }
    None
}

/// The length of the value's compact serialization, without building it.
fn encoded_len(value: &Value) -> usize {
    match value {
        Value::Null => 4,
        Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(n) => format_number(number_value(n)).len(),
        Value::String(s) => string_len(s),
        Value::Array(items) => {
            2 + items.len().saturating_sub(1) + items.iter().map(encoded_len).sum::<usize>()
        }
        Value::Object(members) => {
            2 + members.len().saturating_sub(1)
                + members
                    .iter()
                    .map(|(k, v)| string_len(k) + 1 + encoded_len(v))
                    .sum::<usize>()
        }
    }
}

fn string_len(s: &str) -> usize {
    2 + s
        .chars()
        .map(|c| match c {
            '"' | '\\' | '\u{8}' | '\u{c}' | '\n' | '\r' | '\t' => 2,
            c if (c as u32) < 0x20 => 6,
            c => c.len_utf8(),
        })
        .sum::<usize>()
}

#[cfg(test)]
mod tests;
