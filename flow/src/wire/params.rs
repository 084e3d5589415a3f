//! Typed params and results of every Run/1 method, each checked on decode.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::errors::{clamp_message, ErrorCode, RpcError};
use super::method::Method;
use super::{
    is_local_name, is_wire_id, INVALID_PARAMS, MAX_ATTACHMENTS, MAX_CHANNELS,
    MAX_CONTRACT_REF_BYTES, MAX_INTENT_CHARS, MAX_SAFE_INTEGER, PROTOCOL,
};

/// Method params (or a result) did not have the method's closed shape.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid params: {0}")]
pub struct InvalidParams(pub String);

impl InvalidParams {
    /// The `-32602` error object for this failure.
    pub fn to_rpc(&self) -> RpcError {
        RpcError::standard(
            INVALID_PARAMS,
            clamp_message(&self.0, ErrorCode::InvalidInput),
        )
    }
}

pub(super) fn bad(msg: impl Into<String>) -> InvalidParams {
    InvalidParams(msg.into())
}

/// A closed object reader: checks member names and hands out typed fields.
pub(super) struct Fields<'a> {
    pub(super) obj: &'a Map<String, Value>,
    pub(super) what: &'static str,
}

impl<'a> Fields<'a> {
    fn new(value: &'a Value, what: &'static str, allowed: &[&str]) -> Result<Self, InvalidParams> {
        let obj = value
            .as_object()
            .ok_or_else(|| bad(format!("{what} must be an object")))?;
        if let Some(k) = obj.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(bad(format!("{what} has unknown member {k:?}")));
        }
        Ok(Fields { obj, what })
    }

    fn opt(&self, name: &str) -> Option<&'a Value> {
        self.obj.get(name)
    }

    fn req(&self, name: &str) -> Result<&'a Value, InvalidParams> {
        self.obj
            .get(name)
            .ok_or_else(|| bad(format!("{} needs {name:?}", self.what)))
    }

    fn string(&self, name: &str) -> Result<&'a str, InvalidParams> {
        self.req(name)?
            .as_str()
            .ok_or_else(|| bad(format!("{}.{name} must be a string", self.what)))
    }

    fn wire_id(&self, name: &str) -> Result<String, InvalidParams> {
        let s = self.string(name)?;
        if !is_wire_id(s) {
            return Err(bad(format!("{}.{name} is not a valid token", self.what)));
        }
        Ok(s.to_string())
    }

    fn local_name(&self, name: &str) -> Result<String, InvalidParams> {
        let s = self.string(name)?;
        if !is_local_name(s) {
            return Err(bad(format!("{}.{name} is not a LocalName", self.what)));
        }
        Ok(s.to_string())
    }
}

pub(super) fn safe_integer(v: &Value, what: &str, min: u64) -> Result<u64, InvalidParams> {
    let n = match v {
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                .map(|f| f as u64)
        }),
        _ => None,
    };
    match n {
        Some(n) if n >= min && n <= MAX_SAFE_INTEGER => Ok(n),
        _ => Err(bad(format!(
            "{what} must be an integer in {min}..={MAX_SAFE_INTEGER}"
        ))),
    }
}

/// Attachment access mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    ReadWrite,
}

impl Access {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::ReadWrite => "read-write",
        }
    }
}

/// One sandbox-local attachment root.
#[derive(Debug, Clone, PartialEq)]
pub struct Attachment {
    pub path: String,
    pub access: Access,
}

impl Attachment {
    fn from_value(v: &Value) -> Result<Self, InvalidParams> {
        let f = Fields::new(v, "attachment", &["path", "access"])?;
        let path = f.string("path")?;
        if path.is_empty() {
            return Err(bad("attachment path must be nonempty"));
        }
        let access = match f.string("access")? {
            "read" => Access::Read,
            "read-write" => Access::ReadWrite,
            _ => return Err(bad("attachment access must be read or read-write")),
        };
        Ok(Attachment {
            path: path.to_string(),
            access,
        })
    }

    fn to_value(&self) -> Value {
        serde_json::json!({"path": self.path, "access": self.access.as_str()})
    }
}

/// Channel delivery mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    Direct,
    Broadcast,
}

impl Delivery {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Delivery::Direct => "direct",
            Delivery::Broadcast => "broadcast",
        }
    }

    fn parse(v: &Value) -> Result<Self, InvalidParams> {
        match v.as_str() {
            Some("direct") => Ok(Delivery::Direct),
            Some("broadcast") => Ok(Delivery::Broadcast),
            _ => Err(bad("delivery must be direct or broadcast")),
        }
    }
}

/// The right an endpoint grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelDirection {
    Send,
    Receive,
}

/// Exact Channel Contract/1 source identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelContractIdentity {
    pub id: String,
    pub version: String,
    pub digest: String,
}

impl ChannelContractIdentity {
    fn from_value(v: &Value) -> Result<Self, InvalidParams> {
        let f = Fields::new(v, "contract", &["id", "version", "digest"])?;
        let id = f.string("id")?;
        let version = f.string("version")?;
        let digest = f.string("digest")?;
        if !crate::contract::is_contract_id(id) {
            return Err(bad(
                "contract id must be a canonical https://<dns-name>/<segment>... URI",
            ));
        }
        let semver = version.split('.').collect::<Vec<_>>();
        let semver_ok = semver.len() == 3
            && semver.iter().all(|p| {
                !p.is_empty()
                    && p.bytes().all(|c| c.is_ascii_digit())
                    && (p.len() == 1 || !p.starts_with('0'))
            });
        if !semver_ok {
            return Err(bad("contract version must be MAJOR.MINOR.PATCH"));
        }
        let hex = digest.strip_prefix("sha256:").unwrap_or("");
        if hex.len() != 64 || !hex.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(bad("contract digest must be sha256:<64 lowercase hex>"));
        }
        Ok(ChannelContractIdentity {
            id: id.into(),
            version: version.into(),
            digest: digest.into(),
        })
    }

    fn to_value(&self) -> Value {
        serde_json::json!({"id": self.id, "version": self.version, "digest": self.digest})
    }
}

/// A host-granted channel endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelGrant {
    pub endpoint: String,
    pub direction: ChannelDirection,
    pub delivery: Delivery,
    pub contract: Option<ChannelContractIdentity>,
    /// Present exactly for receivers; `1` for direct delivery.
    pub start_sequence: Option<u64>,
}

impl ChannelGrant {
    /// Parses one grant object.
    pub fn from_value(v: &Value) -> Result<Self, InvalidParams> {
        let f = Fields::new(
            v,
            "channel grant",
            &[
                "endpoint",
                "direction",
                "delivery",
                "contract",
                "startSequence",
            ],
        )?;
        let endpoint = f.wire_id("endpoint")?;
        let delivery = Delivery::parse(f.req("delivery")?)?;
        let contract = f
            .opt("contract")
            .map(ChannelContractIdentity::from_value)
            .transpose()?;
        let (direction, start_sequence) = match f.string("direction")? {
            "send" => {
                if f.opt("startSequence").is_some() {
                    return Err(bad("a send grant has no startSequence"));
                }
                (ChannelDirection::Send, None)
            }
            "receive" => {
                let s = safe_integer(f.req("startSequence")?, "startSequence", 1)?;
                if delivery == Delivery::Direct && s != 1 {
                    return Err(bad("a direct receiver starts at sequence 1"));
                }
                (ChannelDirection::Receive, Some(s))
            }
            _ => return Err(bad("direction must be send or receive")),
        };
        Ok(ChannelGrant {
            endpoint,
            direction,
            delivery,
            contract,
            start_sequence,
        })
    }

    /// The grant object.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("endpoint".into(), Value::String(self.endpoint.clone()));
        m.insert(
            "direction".into(),
            Value::String(
                match self.direction {
                    ChannelDirection::Send => "send",
                    ChannelDirection::Receive => "receive",
                }
                .into(),
            ),
        );
        m.insert(
            "delivery".into(),
            Value::String(self.delivery.as_str().into()),
        );
        if let Some(c) = &self.contract {
            m.insert("contract".into(), c.to_value());
        }
        if let Some(s) = self.start_sequence {
            m.insert("startSequence".into(), Value::from(s));
        }
        Value::Object(m)
    }
}

pub(super) fn name_map<T>(
    v: &Value,
    what: &str,
    max: usize,
    item: impl Fn(&Value) -> Result<T, InvalidParams>,
) -> Result<BTreeMap<String, T>, InvalidParams> {
    let obj = v
        .as_object()
        .ok_or_else(|| bad(format!("{what} must be an object")))?;
    if obj.len() > max {
        return Err(bad(format!("{what} has more than {max} entries")));
    }
    obj.iter()
        .map(|(k, v)| {
            if !is_local_name(k) {
                return Err(bad(format!("{what} key {k:?} is not a LocalName")));
            }
            Ok((k.clone(), item(v)?))
        })
        .collect()
}

pub(super) fn channel_refs(v: Option<&Value>) -> Result<BTreeMap<String, String>, InvalidParams> {
    match v {
        None => Ok(BTreeMap::new()),
        Some(v) => name_map(v, "channels", MAX_CHANNELS, |e| match e.as_str() {
            Some(s) if is_wire_id(s) => Ok(s.to_string()),
            _ => Err(bad("a channel reference must be an endpoint token")),
        }),
    }
}

pub(super) fn refs_value(refs: &BTreeMap<String, String>) -> Value {
    Value::Object(
        refs.iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect(),
    )
}

/// `flow/run` params: the complete context of one invocation.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowRunParams {
    pub protocol: String,
    pub input: Value,
    pub settings: Map<String, Value>,
    pub attachments: BTreeMap<String, Attachment>,
    pub scratch: String,
    pub deadline_unix_ms: u64,
    pub channels: BTreeMap<String, ChannelGrant>,
}

impl FlowRunParams {
    /// Parses and checks `flow/run` params.
    pub fn from_value(v: &Value) -> Result<Self, InvalidParams> {
        let f = Fields::new(
            v,
            "flow/run params",
            &[
                "protocol",
                "input",
                "settings",
                "attachments",
                "scratch",
                "deadlineUnixMs",
                "channels",
            ],
        )?;
        if f.string("protocol")? != PROTOCOL {
            return Err(bad("protocol must be \"run/1\""));
        }
        let input = f.req("input")?.clone();
        let settings = f
            .req("settings")?
            .as_object()
            .ok_or_else(|| bad("settings must be an object"))?
            .clone();
        let attachments = name_map(
            f.req("attachments")?,
            "attachments",
            MAX_ATTACHMENTS,
            Attachment::from_value,
        )?;
        let scratch = f.string("scratch")?;
        if scratch.is_empty() {
            return Err(bad("scratch must be nonempty"));
        }
        let deadline_unix_ms = safe_integer(f.req("deadlineUnixMs")?, "deadlineUnixMs", 0)?;
        let channels = match f.opt("channels") {
            None => BTreeMap::new(),
            Some(c) => name_map(c, "channels", MAX_CHANNELS, ChannelGrant::from_value)?,
        };
        let mut endpoints: Vec<&str> = channels.values().map(|g| g.endpoint.as_str()).collect();
        endpoints.sort_unstable();
        if endpoints.windows(2).any(|w| w[0] == w[1]) {
            return Err(bad("channel grants must name distinct endpoints"));
        }
        Ok(FlowRunParams {
            protocol: PROTOCOL.into(),
            input,
            settings,
            attachments,
            scratch: scratch.into(),
            deadline_unix_ms,
            channels,
        })
    }

    /// The params object.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("protocol".into(), Value::String(self.protocol.clone()));
        m.insert("input".into(), self.input.clone());
        m.insert("settings".into(), Value::Object(self.settings.clone()));
        m.insert(
            "attachments".into(),
            Value::Object(
                self.attachments
                    .iter()
                    .map(|(k, a)| (k.clone(), a.to_value()))
                    .collect(),
            ),
        );
        m.insert("scratch".into(), Value::String(self.scratch.clone()));
        m.insert("deadlineUnixMs".into(), Value::from(self.deadline_unix_ms));
        if !self.channels.is_empty() {
            m.insert(
                "channels".into(),
                Value::Object(
                    self.channels
                        .iter()
                        .map(|(k, g)| (k.clone(), g.to_value()))
                        .collect(),
                ),
            );
        }
        Value::Object(m)
    }
}

/// `flow/run-child` params.
#[derive(Debug, Clone, PartialEq)]
pub struct RunChildParams {
    pub operation_id: String,
    pub slot: String,
    pub intent: Option<String>,
    pub input: Value,
    pub channels: BTreeMap<String, String>,
}

impl RunChildParams {
    /// Parses and checks `flow/run-child` params.
    pub fn from_value(v: &Value) -> Result<Self, InvalidParams> {
        let f = Fields::new(
            v,
            "flow/run-child params",
            &["operationId", "slot", "intent", "input", "channels"],
        )?;
        let intent = match f.opt("intent") {
            None => None,
            Some(Value::String(s)) => {
                let n = s.chars().count();
                if n == 0 || n > MAX_INTENT_CHARS {
                    return Err(bad(format!(
                        "intent must have 1-{MAX_INTENT_CHARS} characters"
                    )));
                }
                Some(s.clone())
            }
            Some(_) => return Err(bad("intent must be a string")),
        };
        Ok(RunChildParams {
            operation_id: f.wire_id("operationId")?,
            slot: f.local_name("slot")?,
            intent,
            input: f.req("input")?.clone(),
            channels: channel_refs(f.opt("channels"))?,
        })
    }

    /// The params object.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert(
            "operationId".into(),
            Value::String(self.operation_id.clone()),
        );
        m.insert("slot".into(), Value::String(self.slot.clone()));
        if let Some(i) = &self.intent {
            m.insert("intent".into(), Value::String(i.clone()));
        }
        m.insert("input".into(), self.input.clone());
        if !self.channels.is_empty() {
            m.insert("channels".into(), refs_value(&self.channels));
        }
        Value::Object(m)
    }
}

/// `capability/call` params.
#[derive(Debug, Clone, PartialEq)]
pub struct CapabilityCallParams {
    pub operation_id: String,
    pub slot: String,
    pub method: String,
    pub input: Value,
    pub channels: BTreeMap<String, String>,
}

impl CapabilityCallParams {
    /// Parses and checks `capability/call` params.
    pub fn from_value(v: &Value) -> Result<Self, InvalidParams> {
        let f = Fields::new(
            v,
            "capability/call params",
            &["operationId", "slot", "method", "input", "channels"],
        )?;
        Ok(CapabilityCallParams {
            operation_id: f.wire_id("operationId")?,
            slot: f.local_name("slot")?,
            method: f.local_name("method")?,
            input: f.req("input")?.clone(),
            channels: channel_refs(f.opt("channels"))?,
        })
    }

    /// The params object.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert(
            "operationId".into(),
            Value::String(self.operation_id.clone()),
        );
        m.insert("slot".into(), Value::String(self.slot.clone()));
        m.insert("method".into(), Value::String(self.method.clone()));
        m.insert("input".into(), self.input.clone());
        if !self.channels.is_empty() {
            m.insert("channels".into(), refs_value(&self.channels));
        }
        Value::Object(m)
    }
}

/// `request/cancel` params.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CancelParams {
    pub request_id: String,
}

impl CancelParams {
    /// Parses and checks `request/cancel` params.
    pub fn from_value(v: &Value) -> Result<Self, InvalidParams> {
        let f = Fields::new(v, "request/cancel params", &["requestId"])?;
        Ok(CancelParams {
            request_id: f.wire_id("requestId")?,
        })
    }

    /// The params object.
    pub fn to_value(&self) -> Value {
        serde_json::json!({"requestId": self.request_id})
    }
}

/// `channel/create` params.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChannelCreateParams {
    pub delivery: Option<Delivery>,
    /// A Schema/1 object or boolean.
    pub schema: Option<Value>,
    /// A package-local `./` contract reference.
    pub contract: Option<String>,
}

impl ChannelCreateParams {
    /// Parses and checks `channel/create` params.
    pub fn from_value(v: &Value) -> Result<Self, InvalidParams> {
        let f = Fields::new(
            v,
            "channel/create params",
            &["delivery", "schema", "contract"],
        )?;
        let delivery = f.opt("delivery").map(Delivery::parse).transpose()?;
        let schema = match f.opt("schema") {
            None => None,
            Some(s @ (Value::Object(_) | Value::Bool(_))) => Some(s.clone()),
            Some(_) => return Err(bad("schema must be an object or boolean")),
        };
        let contract = match f.opt("contract") {
            None => None,
            Some(Value::String(c))
                if c.len() > 2
                    && c.len() <= MAX_CONTRACT_REF_BYTES
                    && c.starts_with("./")
                    && !c.contains('\\') =>
            {
                Some(c.clone())
            }
            Some(_) => return Err(bad("contract must be a ./ package-local reference")),
        };
        if schema.is_some() && contract.is_some() {
            return Err(bad("schema and contract are mutually exclusive"));
        }
        Ok(ChannelCreateParams {
            delivery,
            schema,
            contract,
        })
    }

    /// The params object.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        if let Some(d) = self.delivery {
            m.insert("delivery".into(), Value::String(d.as_str().into()));
        }
        if let Some(s) = &self.schema {
            m.insert("schema".into(), s.clone());
        }
        if let Some(c) = &self.contract {
            m.insert("contract".into(), Value::String(c.clone()));
        }
        Value::Object(m)
    }
}

/// `channel/subscribe` params.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelSubscribeParams {
    pub source: String,
}

impl ChannelSubscribeParams {
    /// Parses and checks `channel/subscribe` params.
    pub fn from_value(v: &Value) -> Result<Self, InvalidParams> {
        let f = Fields::new(v, "channel/subscribe params", &["source"])?;
        Ok(ChannelSubscribeParams {
            source: f.wire_id("source")?,
        })
    }

    /// The params object.
    pub fn to_value(&self) -> Value {
        serde_json::json!({"source": self.source})
    }
}

/// `channel/send` params.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelSendParams {
    pub endpoint: String,
    pub value: Value,
}

impl ChannelSendParams {
    /// Parses and checks `channel/send` params.
    pub fn from_value(v: &Value) -> Result<Self, InvalidParams> {
        let f = Fields::new(v, "channel/send params", &["endpoint", "value"])?;
        Ok(ChannelSendParams {
            endpoint: f.wire_id("endpoint")?,
            value: f.req("value")?.clone(),
        })
    }

    /// The params object.
    pub fn to_value(&self) -> Value {
        serde_json::json!({"endpoint": self.endpoint, "value": self.value})
    }
}

/// `channel/next`, `channel/close` and `channel/release` params.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelEndpointParams {
    pub endpoint: String,
}

impl ChannelEndpointParams {
    /// Parses and checks endpoint params.
    pub fn from_value(v: &Value) -> Result<Self, InvalidParams> {
        let f = Fields::new(v, "channel endpoint params", &["endpoint"])?;
        Ok(ChannelEndpointParams {
            endpoint: f.wire_id("endpoint")?,
        })
    }

    /// The params object.
    pub fn to_value(&self) -> Value {
        serde_json::json!({"endpoint": self.endpoint})
    }
}

/// A complete Run result: `{outcome, output}`.
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    pub outcome: String,
    pub output: Value,
}

impl RunResult {
    /// `{"outcome":"done","output":output}`.
    pub fn done(output: Value) -> Self {
        RunResult {
            outcome: "done".into(),
            output,
        }
    }

    /// Parses and checks a Run result.
    pub fn from_value(v: &Value) -> Result<Self, InvalidParams> {
        let f = Fields::new(v, "run result", &["outcome", "output"])?;
        Ok(RunResult {
            outcome: f.local_name("outcome")?,
            output: f.req("output")?.clone(),
        })
    }

    /// The result object.
    pub fn to_value(&self) -> Value {
        serde_json::json!({"outcome": self.outcome, "output": self.output})
    }
}

/// A successful `capability/call` result: exactly one arm.
#[derive(Debug, Clone, PartialEq)]
pub enum CapabilityResult {
    /// `{"value": v}`.
    Value(Value),
    /// `{"error": {"name", "data"}}`: a declared application error.
    Error { name: String, data: Value },
}

impl CapabilityResult {
    /// Parses and checks a capability result.
    pub fn from_value(v: &Value) -> Result<Self, InvalidParams> {
        let f = Fields::new(v, "capability result", &["value", "error"])?;
        match (f.opt("value"), f.opt("error")) {
            (Some(value), None) => Ok(CapabilityResult::Value(value.clone())),
            (None, Some(error)) => {
                let e = Fields::new(error, "capability error", &["name", "data"])?;
                Ok(CapabilityResult::Error {
                    name: e.local_name("name")?,
                    data: e.req("data")?.clone(),
                })
            }
            _ => Err(bad("capability result has exactly one of value and error")),
        }
    }

    /// The result object.
    pub fn to_value(&self) -> Value {
        match self {
            CapabilityResult::Value(v) => serde_json::json!({"value": v}),
            CapabilityResult::Error { name, data } => {
                serde_json::json!({"error": {"name": name, "data": data}})
            }
        }
    }
}

/// How a receiver finished, as reported by `channel/release`.
#[derive(Debug, Clone, PartialEq)]
pub enum ReleaseStatus {
    Released,
    Ended {
        last_sequence: u64,
    },
    Failed {
        code: ErrorCode,
        details: Option<Value>,
    },
}

/// A successful result of one of the `channel/*` requests.
#[derive(Debug, Clone, PartialEq)]
pub enum ChannelResult {
    /// `null`: send accepted or writer sealed.
    Accepted,
    /// A direct pair from `channel/create`.
    Pair {
        send: ChannelGrant,
        receive: ChannelGrant,
    },
    /// A broadcast writer and its subscription source.
    Broadcast { send: ChannelGrant, source: String },
    /// A broadcast receive grant from `channel/subscribe`.
    Subscription(ChannelGrant),
    /// One item from `channel/next`.
    Item { sequence: u64, value: Value },
    /// A clean end from `channel/next`.
    End { last_sequence: u64 },
    /// A `channel/release` settlement.
    Release(ReleaseStatus),
}

impl ChannelResult {
    /// Parses any channel result shape. The request's method decides which
    /// shapes a peer should accept; see [`ChannelResult::fits`].
    pub fn from_value(v: &Value) -> Result<Self, InvalidParams> {
        let Some(obj) = v.as_object() else {
            return if v.is_null() {
                Ok(ChannelResult::Accepted)
            } else {
                Err(bad("channel result must be null or an object"))
            };
        };
        if obj.contains_key("item") {
            let f = Fields::new(v, "channel result", &["item"])?;
            let i = Fields::new(f.req("item")?, "channel item", &["sequence", "value"])?;
            return Ok(ChannelResult::Item {
                sequence: safe_integer(i.req("sequence")?, "sequence", 1)?,
                value: i.req("value")?.clone(),
            });
        }
        if obj.contains_key("end") {
            let f = Fields::new(v, "channel result", &["end"])?;
            let e = Fields::new(f.req("end")?, "channel end", &["lastSequence"])?;
            return Ok(ChannelResult::End {
                last_sequence: safe_integer(e.req("lastSequence")?, "lastSequence", 0)?,
            });
        }
        if obj.contains_key("status") {
            let status = obj.get("status").and_then(Value::as_str);
            return match status {
                Some("released") => {
                    Fields::new(v, "release result", &["status"])?;
                    Ok(ChannelResult::Release(ReleaseStatus::Released))
                }
                Some("ended") => {
                    let f = Fields::new(v, "release result", &["status", "lastSequence"])?;
                    Ok(ChannelResult::Release(ReleaseStatus::Ended {
                        last_sequence: safe_integer(f.req("lastSequence")?, "lastSequence", 0)?,
                    }))
                }
                Some("failed") => {
                    let f = Fields::new(v, "release result", &["status", "code", "details"])?;
                    let code = ErrorCode::parse_wire(f.string("code")?)
                        .ok_or_else(|| bad("release failure code must be a wire code"))?;
                    Ok(ChannelResult::Release(ReleaseStatus::Failed {
                        code,
                        details: f.opt("details").cloned(),
                    }))
                }
                _ => Err(bad("unknown release status")),
            };
        }
        if obj.contains_key("source") {
            let f = Fields::new(v, "channel broadcast", &["send", "source"])?;
            let send = ChannelGrant::from_value(f.req("send")?)?;
            if send.direction != ChannelDirection::Send || send.delivery != Delivery::Broadcast {
                return Err(bad("broadcast creation returns a broadcast send grant"));
            }
            return Ok(ChannelResult::Broadcast {
                send,
                source: f.wire_id("source")?,
            });
        }
        if obj.contains_key("send") || obj.contains_key("receive") {
            let f = Fields::new(v, "channel pair", &["send", "receive"])?;
            let send = ChannelGrant::from_value(f.req("send")?)?;
            let receive = ChannelGrant::from_value(f.req("receive")?)?;
            if send.direction != ChannelDirection::Send
                || receive.direction != ChannelDirection::Receive
                || send.delivery != Delivery::Direct
                || receive.delivery != Delivery::Direct
            {
                return Err(bad(
                    "a channel pair is a direct sender and a direct receiver",
                ));
            }
            return Ok(ChannelResult::Pair { send, receive });
        }
        let grant = ChannelGrant::from_value(v)?;
        if grant.direction != ChannelDirection::Receive || grant.delivery != Delivery::Broadcast {
            return Err(bad("a subscription is a broadcast receive grant"));
        }
        Ok(ChannelResult::Subscription(grant))
    }

    /// Whether this result shape answers a request of `method`.
    pub fn fits(&self, method: Method) -> bool {
        matches!(
            (method, self),
            (
                Method::ChannelCreate,
                ChannelResult::Pair { .. } | ChannelResult::Broadcast { .. }
            ) | (Method::ChannelSubscribe, ChannelResult::Subscription(_))
                | (
                    Method::ChannelSend | Method::ChannelClose,
                    ChannelResult::Accepted
                )
                | (
                    Method::ChannelNext,
                    ChannelResult::Item { .. } | ChannelResult::End { .. }
                )
                | (Method::ChannelRelease, ChannelResult::Release(_))
        )
    }
}
