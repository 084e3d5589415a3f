//! FLOW Capability Contract/1 and Channel Contract/1 descriptors.
//!
//! A descriptor is validated completely (closed fields, identity URI and
//! SemVer grammar, bounds, the embedded Schema/1 graph compiled as one) and
//! identified by a domain-separated SHA-256 of its RFC 8785 bytes.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use crate::json::{self, Value};
use crate::package::path::check_author_reference;
use crate::schema::{self, GraphBuilder, Schema, SchemaError};

/// Exact `$schema` of a Capability Contract/1 descriptor.
pub const CAPABILITY_SCHEMA_URI: &str =
    "https://flow.jig.md/schemas/capability-contract-1.schema.json";
/// Exact `$schema` of a Channel Contract/1 descriptor.
pub const CHANNEL_SCHEMA_URI: &str = "https://flow.jig.md/schemas/channel-contract-1.schema.json";
/// Domain separator of the capability descriptor digest.
pub const CAPABILITY_DOMAIN: &[u8] = b"FLOW-Capability-Contract/1\0";
/// Domain separator of the channel descriptor digest.
pub const CHANNEL_DOMAIN: &[u8] = b"FLOW-Channel-Contract/1\0";
/// Maximum UTF-8 bytes of one descriptor.
pub const MAX_DESCRIPTOR_BYTES: usize = 262_144;
/// Method count bounds.
pub const MIN_METHODS: usize = 1;
pub const MAX_METHODS: usize = 256;
/// Maximum named errors of one method.
pub const MAX_ERRORS: usize = 128;
/// Maximum `$defs` entries of one descriptor.
pub const MAX_DEFS: usize = 1_024;
/// Maximum channel declarations in one `channels` map.
pub const MAX_CHANNELS: usize = 256;
/// Maximum UTF-8 bytes of a channel contract's `semantics`.
pub const MAX_SEMANTICS_BYTES: usize = 16_384;
/// Maximum characters of a `LocalName`.
pub const MAX_LOCAL_NAME_CHARS: usize = 64;
/// Maximum bytes of a channel declaration's `contract` reference.
pub const MAX_CHANNEL_REFERENCE_BYTES: usize = 4_096;

/// Stable error codes.
pub mod codes {
    /// The descriptor bytes are not JSON/1.
    pub const CONTRACT_INVALID_JSON: &str = "CONTRACT_INVALID_JSON";
    /// The descriptor violates Capability/Channel Contract/1.
    pub const CONTRACT_INVALID: &str = "CONTRACT_INVALID";
    /// The descriptor exceeds a byte bound.
    pub const CONTRACT_LIMIT_EXCEEDED: &str = "CONTRACT_LIMIT_EXCEEDED";
}
use codes::*;

/// A descriptor that failed validation. Embedded schema failures keep the
/// Schema/1 code (`SCHEMA_INVALID`, ...) and pointer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message} (at {pointer:?})")]
pub struct ContractError {
    pub code: &'static str,
    pub pointer: String,
    pub message: String,
}

impl ContractError {
    fn new(code: &'static str, pointer: &str, message: impl Into<String>) -> Self {
        ContractError {
            code,
            pointer: pointer.to_owned(),
            message: message.into(),
        }
    }
}

impl From<SchemaError> for ContractError {
    fn from(e: SchemaError) -> Self {
        ContractError {
            code: e.code,
            pointer: e.pointer,
            message: e.message,
        }
    }
}

/// One method: compiled input/output schemas and named error data schemas.
#[derive(Debug, Clone)]
pub struct Method {
    pub input: Schema,
    pub output: Schema,
    pub errors: BTreeMap<String, Schema>,
    pub channels: BTreeMap<String, ChannelDeclaration>,
}

/// A validated Capability Contract/1 descriptor.
#[derive(Debug, Clone)]
pub struct Contract {
    pub id: String,
    pub version: String,
    /// `sha256:<64 hex>` over the domain separator and RFC 8785 bytes.
    pub digest: String,
    pub descriptor: Value,
    methods: BTreeMap<String, Method>,
}

impl Contract {
    /// Parses and validates descriptor bytes.
    pub fn parse(bytes: &[u8]) -> Result<Contract, ContractError> {
        let value = parse_descriptor(bytes)?;
        Contract::from_value(value)
    }

    /// Validates a parsed descriptor.
    pub fn from_value(descriptor: Value) -> Result<Contract, ContractError> {
        json::check(&descriptor)
            .map_err(|e| ContractError::new(CONTRACT_INVALID_JSON, "", e.to_string()))?;
        check_canonical_size(&descriptor)?;
        let root = expect_object(&descriptor, "")?;
        closed(
            root,
            "",
            &[
                "$schema",
                "flowCapabilityContract",
                "id",
                "version",
                "methods",
                "$defs",
            ],
        )?;
        match root.get("$schema") {
            Some(Value::String(s)) if s == CAPABILITY_SCHEMA_URI => {}
            _ => {
                return Err(ContractError::new(
                    CONTRACT_INVALID,
                    "/$schema",
                    format!("$schema must be exactly {CAPABILITY_SCHEMA_URI:?}"),
                ))
            }
        }
        match root.get("flowCapabilityContract") {
            Some(Value::Number(n)) if json::number_value(n) == 1.0 => {}
            _ => {
                return Err(ContractError::new(
                    CONTRACT_INVALID,
                    "/flowCapabilityContract",
                    "flowCapabilityContract must be the integer 1",
                ))
            }
        }
        let id = contract_id(root.get("id"))?;
        let version = contract_version(root.get("version"))?;

        let mut builder = GraphBuilder::new();
        compile_defs(&mut builder, root.get("$defs"))?;

        let Some(Value::Object(methods_value)) = root.get("methods") else {
            return Err(ContractError::new(
                CONTRACT_INVALID,
                "/methods",
                "methods must be an object",
            ));
        };
        if methods_value.len() < MIN_METHODS || methods_value.len() > MAX_METHODS {
            return Err(ContractError::new(
                CONTRACT_INVALID,
                "/methods",
                format!("methods must have {MIN_METHODS} to {MAX_METHODS} entries"),
            ));
        }
        // Compile every embedded root into one graph, then attach Schemas.
        struct Pending {
            input: usize,
            output: usize,
            errors: Vec<(String, usize)>,
            channels: BTreeMap<String, PendingChannel>,
        }
        let mut pending = BTreeMap::new();
        for (name, method) in methods_value {
            let p = format!("/methods/{}", schema::escape_pointer_token(name));
            local_name(name, &p)?;
            let m = expect_object(method, &p)?;
            closed(m, &p, &["input", "output", "errors", "channels"])?;
            let input = builder.add_root(required(m, "input", &p)?, &format!("{p}/input"))?;
            let output = builder.add_root(required(m, "output", &p)?, &format!("{p}/output"))?;
            let errors_p = format!("{p}/errors");
            let errors_map = expect_object(required(m, "errors", &p)?, &errors_p)?;
            if errors_map.len() > MAX_ERRORS {
                return Err(ContractError::new(
                    CONTRACT_INVALID,
                    &errors_p,
                    format!("a method declares at most {MAX_ERRORS} errors"),
                ));
            }
            let mut errors = Vec::new();
            for (error, schema) in errors_map {
                let ep = format!("{errors_p}/{}", schema::escape_pointer_token(error));
                local_name(error, &ep)?;
                errors.push((error.clone(), builder.add_root(schema, &ep)?));
            }
            let channels = match m.get("channels") {
                Some(c) => channel_declarations(&mut builder, c, &format!("{p}/channels"))?,
                None => BTreeMap::new(),
            };
            pending.insert(
                name.clone(),
                Pending {
                    input,
                    output,
                    errors,
                    channels,
                },
            );
        }
        let graph = builder.finish()?;
        let methods = pending
            .into_iter()
            .map(|(name, p)| {
                let method = Method {
                    input: Schema::from_graph(graph.clone(), p.input),
                    output: Schema::from_graph(graph.clone(), p.output),
                    errors: p
                        .errors
                        .into_iter()
                        .map(|(n, id)| (n, Schema::from_graph(graph.clone(), id)))
                        .collect(),
                    channels: p
                        .channels
                        .into_iter()
                        .map(|(n, c)| (n, c.finish(&graph)))
                        .collect(),
                };
                (name, method)
            })
            .collect();
        let digest = digest(&descriptor);
        Ok(Contract {
            id,
            version,
            digest,
            descriptor,
            methods,
        })
    }

    pub fn method(&self, name: &str) -> Option<&Method> {
        self.methods.get(name)
    }

    pub fn methods(&self) -> &BTreeMap<String, Method> {
        &self.methods
    }
}

/// `SHA-256("FLOW-Capability-Contract/1\0" || RFC8785(descriptor))`.
pub fn digest(descriptor: &Value) -> String {
    domain_digest(CAPABILITY_DOMAIN, descriptor)
}

/// `SHA-256("FLOW-Channel-Contract/1\0" || RFC8785(descriptor))`.
pub fn channel_digest(descriptor: &Value) -> String {
    domain_digest(CHANNEL_DOMAIN, descriptor)
}

fn domain_digest(domain: &[u8], descriptor: &Value) -> String {
    let mut hasher = Sha256::new();
    hasher.update(domain);
    hasher.update(json::canonical(descriptor));
    crate::digest::finish(hasher)
}

/// Direction of a declared channel port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Send,
    Receive,
}

/// Delivery profile a port requires; `None` accepts either.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    Direct,
    Broadcast,
}

/// Where a receive port starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    Beginning,
    Suffix,
}

/// One validated channel declaration (Channel Contract/1 §1).
#[derive(Debug, Clone)]
pub struct ChannelDeclaration {
    pub direction: Direction,
    pub required: bool,
    /// Inline item schema; `None` means generic JSON/1 (or see `contract`).
    pub schema: Option<Schema>,
    /// Package-local `./` descriptor reference, exclusive with `schema`.
    pub contract: Option<String>,
    pub delivery: Option<Delivery>,
    /// Receive ports only; defaults to `Beginning`.
    pub start: Start,
}

struct PendingChannel {
    direction: Direction,
    required: bool,
    schema: Option<usize>,
    contract: Option<String>,
    delivery: Option<Delivery>,
    start: Start,
}

impl PendingChannel {
    fn finish(self, graph: &std::sync::Arc<schema::Graph>) -> ChannelDeclaration {
        ChannelDeclaration {
            direction: self.direction,
            required: self.required,
            schema: self.schema.map(|id| Schema::from_graph(graph.clone(), id)),
            contract: self.contract,
            delivery: self.delivery,
            start: self.start,
        }
    }
}

fn channel_declarations(
    builder: &mut GraphBuilder,
    value: &Value,
    pointer: &str,
) -> Result<BTreeMap<String, PendingChannel>, ContractError> {
    let map = expect_object(value, pointer)?;
    if map.len() > MAX_CHANNELS {
        return Err(ContractError::new(
            CONTRACT_INVALID,
            pointer,
            format!("at most {MAX_CHANNELS} channels"),
        ));
    }
    let mut out = BTreeMap::new();
    for (name, decl) in map {
        let p = format!("{pointer}/{}", schema::escape_pointer_token(name));
        local_name(name, &p)?;
        let d = expect_object(decl, &p)?;
        closed(
            d,
            &p,
            &[
                "direction",
                "required",
                "schema",
                "contract",
                "delivery",
                "start",
            ],
        )?;
        let direction = match d.get("direction").and_then(Value::as_str) {
            Some("send") => Direction::Send,
            Some("receive") => Direction::Receive,
            _ => {
                return Err(ContractError::new(
                    CONTRACT_INVALID,
                    &format!("{p}/direction"),
                    "direction must be \"send\" or \"receive\"",
                ))
            }
        };
        let required = match d.get("required") {
            None => true,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                return Err(ContractError::new(
                    CONTRACT_INVALID,
                    &format!("{p}/required"),
                    "required must be a boolean",
                ))
            }
        };
        if d.contains_key("schema") && d.contains_key("contract") {
            return Err(ContractError::new(
                CONTRACT_INVALID,
                &p,
                "schema and contract are mutually exclusive",
            ));
        }
        let schema = match d.get("schema") {
            Some(s) => Some(builder.add_root(s, &format!("{p}/schema"))?),
            None => None,
        };
        let contract = match d.get("contract") {
            None => None,
            Some(Value::String(r)) => {
                let cp = format!("{p}/contract");
                if r.len() > MAX_CHANNEL_REFERENCE_BYTES {
                    return Err(ContractError::new(
                        CONTRACT_INVALID,
                        &cp,
                        "contract reference is too long",
                    ));
                }
                check_author_reference(r)
                    .map_err(|e| ContractError::new(CONTRACT_INVALID, &cp, e.message))?;
                Some(r.clone())
            }
            Some(_) => {
                return Err(ContractError::new(
                    CONTRACT_INVALID,
                    &format!("{p}/contract"),
                    "contract must be a ./ reference string",
                ))
            }
        };
        let delivery = match d.get("delivery") {
            None => None,
            Some(v) => Some(match v.as_str() {
                Some("direct") => Delivery::Direct,
                Some("broadcast") => Delivery::Broadcast,
                _ => {
                    return Err(ContractError::new(
                        CONTRACT_INVALID,
                        &format!("{p}/delivery"),
                        "delivery must be \"direct\" or \"broadcast\"",
                    ))
                }
            }),
        };
        let start = match d.get("start") {
            None => Start::Beginning,
            Some(v) => {
                if direction != Direction::Receive {
                    return Err(ContractError::new(
                        CONTRACT_INVALID,
                        &format!("{p}/start"),
                        "start is allowed only on receive ports",
                    ));
                }
                match v.as_str() {
                    Some("beginning") => Start::Beginning,
                    Some("suffix") => Start::Suffix,
                    _ => {
                        return Err(ContractError::new(
                            CONTRACT_INVALID,
                            &format!("{p}/start"),
                            "start must be \"beginning\" or \"suffix\"",
                        ))
                    }
                }
            }
        };
        out.insert(
            name.clone(),
            PendingChannel {
                direction,
                required,
                schema,
                contract,
                delivery,
                start,
            },
        );
    }
    Ok(out)
}

/// Validates a standalone `channels` declaration map (as in `FLOW.md`),
/// compiling inline item schemas as one graph.
pub fn parse_channel_declarations(
    value: &Value,
) -> Result<BTreeMap<String, ChannelDeclaration>, ContractError> {
    let mut builder = GraphBuilder::new();
    let pending = channel_declarations(&mut builder, value, "")?;
    let graph = builder.finish()?;
    Ok(pending
        .into_iter()
        .map(|(n, c)| (n, c.finish(&graph)))
        .collect())
}

/// A validated Channel Contract/1 descriptor.
#[derive(Debug, Clone)]
pub struct ChannelContract {
    pub id: String,
    pub version: String,
    pub semantics: String,
    pub digest: String,
    pub descriptor: Value,
    pub item: Schema,
}

impl ChannelContract {
    pub fn parse(bytes: &[u8]) -> Result<ChannelContract, ContractError> {
        ChannelContract::from_value(parse_descriptor(bytes)?)
    }

    pub fn from_value(descriptor: Value) -> Result<ChannelContract, ContractError> {
        json::check(&descriptor)
            .map_err(|e| ContractError::new(CONTRACT_INVALID_JSON, "", e.to_string()))?;
        check_canonical_size(&descriptor)?;
        let root = expect_object(&descriptor, "")?;
        closed(
            root,
            "",
            &["$schema", "id", "version", "semantics", "item", "$defs"],
        )?;
        match root.get("$schema") {
            Some(Value::String(s)) if s == CHANNEL_SCHEMA_URI => {}
            _ => {
                return Err(ContractError::new(
                    CONTRACT_INVALID,
                    "/$schema",
                    format!("$schema must be exactly {CHANNEL_SCHEMA_URI:?}"),
                ))
            }
        }
        let id = contract_id(root.get("id"))?;
        let version = contract_version(root.get("version"))?;
        let semantics = match root.get("semantics") {
            Some(Value::String(s)) if !s.is_empty() && s.len() <= MAX_SEMANTICS_BYTES => s.clone(),
            _ => {
                return Err(ContractError::new(
                    CONTRACT_INVALID,
                    "/semantics",
                    format!("semantics must be a non-empty string of at most {MAX_SEMANTICS_BYTES} UTF-8 bytes"),
                ))
            }
        };
        let mut builder = GraphBuilder::new();
        compile_defs(&mut builder, root.get("$defs"))?;
        let item = builder.add_root(required(root, "item", "")?, "/item")?;
        let graph = builder.finish()?;
        let digest = channel_digest(&descriptor);
        Ok(ChannelContract {
            id,
            version,
            semantics,
            digest,
            descriptor,
            item: Schema::from_graph(graph, item),
        })
    }
}

fn parse_descriptor(bytes: &[u8]) -> Result<Value, ContractError> {
    if bytes.len() > MAX_DESCRIPTOR_BYTES {
        return Err(ContractError::new(
            CONTRACT_LIMIT_EXCEEDED,
            "",
            format!(
                "descriptor is {} bytes; the limit is {MAX_DESCRIPTOR_BYTES}",
                bytes.len()
            ),
        ));
    }
    json::parse(bytes).map_err(|e| ContractError::new(CONTRACT_INVALID_JSON, "", e.to_string()))
}

/// A descriptor built in memory must also fit the byte bound; its canonical
/// form is the smallest encoding, so that is what is measured.
fn check_canonical_size(descriptor: &Value) -> Result<(), ContractError> {
    let size = json::canonical(descriptor).len();
    if size > MAX_DESCRIPTOR_BYTES {
        return Err(ContractError::new(
            CONTRACT_LIMIT_EXCEEDED,
            "",
            format!("descriptor is {size} canonical bytes; the limit is {MAX_DESCRIPTOR_BYTES}"),
        ));
    }
    Ok(())
}

fn compile_defs(builder: &mut GraphBuilder, defs: Option<&Value>) -> Result<(), ContractError> {
    if let Some(defs) = defs {
        let map = expect_object(defs, "/$defs")?;
        if map.len() > MAX_DEFS {
            return Err(ContractError::new(
                CONTRACT_INVALID,
                "/$defs",
                format!("at most {MAX_DEFS} definitions"),
            ));
        }
        builder.add_defs(defs, "/$defs")?;
    }
    Ok(())
}

fn expect_object<'v>(
    value: &'v Value,
    pointer: &str,
) -> Result<&'v serde_json::Map<String, Value>, ContractError> {
    value
        .as_object()
        .ok_or_else(|| ContractError::new(CONTRACT_INVALID, pointer, "expected an object"))
}

fn required<'v>(
    map: &'v serde_json::Map<String, Value>,
    field: &str,
    pointer: &str,
) -> Result<&'v Value, ContractError> {
    map.get(field).ok_or_else(|| {
        ContractError::new(
            CONTRACT_INVALID,
            pointer,
            format!("missing required field {field:?}"),
        )
    })
}

fn closed(
    map: &serde_json::Map<String, Value>,
    pointer: &str,
    allowed: &[&str],
) -> Result<(), ContractError> {
    for key in map.keys() {
        if !allowed.contains(&key.as_str()) {
            return Err(ContractError::new(
                CONTRACT_INVALID,
                &format!("{pointer}/{}", schema::escape_pointer_token(key)),
                format!("unknown field {key:?}"),
            ));
        }
    }
    Ok(())
}

/// Whether `name` is a `LocalName`: 1–64 chars of `[a-z0-9]+(?:-[a-z0-9]+)*`.
pub fn is_local_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_LOCAL_NAME_CHARS
        && name.split('-').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

fn local_name(name: &str, pointer: &str) -> Result<(), ContractError> {
    if is_local_name(name) {
        Ok(())
    } else {
        Err(ContractError::new(
            CONTRACT_INVALID,
            pointer,
            format!("{name:?} is not a LocalName"),
        ))
    }
}

/// Whether `id` is a canonical Contract ID:
/// `https://<dns-name>/<segment>[/<segment>...]` in lower ASCII.
pub fn is_contract_id(id: &str) -> bool {
    let Some(rest) = id.strip_prefix("https://") else {
        return false;
    };
    let Some((host, path)) = rest.split_once('/') else {
        return false;
    };
    let labels: Vec<&str> = host.split('.').collect();
    if labels.len() < 2 || !labels.iter().all(|l| is_dns_label(l)) {
        return false;
    }
    if is_numeric_label(labels[labels.len() - 1]) {
        return false;
    }
    path.split('/').all(|seg| {
        !seg.is_empty()
            && seg != "."
            && seg != ".."
            && seg
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._~-".contains(&b))
    })
}

/// Whether a host ending in `label` is an IP literal rather than a DNS name:
/// a URL parser reads a host whose last label is a number (decimal, or hex
/// after `0x`) as IPv4 in any of its spellings (`127.1`, `0x7f.0.0.1`,
/// `1.2.3`, or `999.1.1.1`, which is no address at all), never as a name.
fn is_numeric_label(label: &str) -> bool {
    let digits = label.strip_prefix("0x").unwrap_or(label);
    let hex = digits.len() < label.len();
    digits.bytes().all(|b| {
        if hex {
            b.is_ascii_hexdigit()
        } else {
            b.is_ascii_digit()
        }
    })
}

fn is_dns_label(label: &str) -> bool {
    let b = label.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && b.len() <= 63
        && alnum(&b[0])
        && alnum(&b[b.len() - 1])
        && b.iter().all(|c| alnum(c) || *c == b'-')
}

/// Whether `version` is a SemVer core `MAJOR.MINOR.PATCH` without leading zeroes.
pub fn is_version(version: &str) -> bool {
    let parts: Vec<&str> = version.split('.').collect();
    parts.len() == 3
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.bytes().all(|b| b.is_ascii_digit())
                && (p.len() == 1 || !p.starts_with('0'))
        })
}

fn contract_id(value: Option<&Value>) -> Result<String, ContractError> {
    match value {
        Some(Value::String(s)) if is_contract_id(s) => Ok(s.clone()),
        _ => Err(ContractError::new(
            CONTRACT_INVALID,
            "/id",
            "id must be a canonical https://<dns-name>/<segment>... URI",
        )),
    }
}

fn contract_version(value: Option<&Value>) -> Result<String, ContractError> {
    match value {
        Some(Value::String(s)) if is_version(s) => Ok(s.clone()),
        _ => Err(ContractError::new(
            CONTRACT_INVALID,
            "/version",
            "version must be an exact SemVer core MAJOR.MINOR.PATCH",
        )),
    }
}
