//! Ports: what a package declares (`channels` in FLOW.md, inline or by
//! contract) and the check that an endpoint fits the port it is mapped to.

use std::collections::BTreeMap;

use flow::contract;
use flow::contract::Start;
use flow::json::Value;
use flow::package::Package;
use flow::schema::Schema;
use flow::wire::ChannelContractIdentity;
use flow::wire::Delivery;
use serde_json::json;

use super::{nontrivial, Endpoint, Port, ReaderState, Role, Source};

/// Compile an inline item schema exactly as a `channels` declaration's
/// `schema` is compiled (no file-root `$schema` required).
pub(super) fn inline_schema(raw: &Value) -> Result<Schema, String> {
    let decl = json!({ "item": { "direction": "send", "schema": raw } });
    contract::parse_channel_declarations(&decl)
        .map_err(|e| format!("the item schema is not Schema/1: {}", e.message))?
        .remove("item")
        .and_then(|d| d.schema)
        .ok_or_else(|| "the item schema is not Schema/1".to_string())
}

/// A package-local `./` Channel Contract/1 reference, resolved in `package`.
pub(super) fn resolve_contract(
    package: &Package,
    reference: &str,
) -> Result<contract::ChannelContract, String> {
    let path = reference.strip_prefix("./").unwrap_or(reference);
    let canonical = !path.is_empty()
        && path
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != "..");
    if !canonical {
        return Err(format!(
            "{reference:?} is not a canonical package-local reference"
        ));
    }
    let bytes = package
        .files()
        .get(path)
        .ok_or_else(|| format!("{reference:?} is not a file of the calling package"))?;
    contract::ChannelContract::parse(bytes).map_err(|e| {
        format!(
            "{reference:?} is not a Channel Contract/1 descriptor: {}",
            e.message
        )
    })
}

pub(super) fn declared_ports(package: &Package) -> Result<BTreeMap<String, Port>, String> {
    let raw = &package.metadata().channels;
    if raw.is_empty() {
        return Ok(BTreeMap::new());
    }
    let map: serde_json::Map<String, Value> =
        raw.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let decls = contract::parse_channel_declarations(&Value::Object(map)).map_err(|e| {
        format!(
            "the callee's channel declarations are invalid: {}",
            e.message
        )
    })?;
    Ok(decls
        .into_iter()
        .map(|(name, decl)| {
            let contract = package
                .channel_contract(&name)
                .map(|c| ChannelContractIdentity {
                    id: c.id.clone(),
                    version: c.version.clone(),
                    digest: c.digest.clone(),
                });
            let schema_raw = match (&decl.contract, raw[&name].get("schema")) {
                (Some(_), _) => package
                    .channel_contract(&name)
                    .and_then(|c| c.descriptor.get("item").cloned()),
                (None, s) => s.cloned(),
            };
            let port = Port {
                decl,
                schema_raw,
                contract,
            };
            (name, port)
        })
        .collect())
}

/// The ports a contract method declares (`declared`: its raw `channels`
/// member), with `./` channel contracts resolved in `caller`.
pub(super) fn method_ports(
    declared: Option<&Value>,
    caller: &Package,
) -> Result<BTreeMap<String, Port>, String> {
    let Some(raw) = declared.filter(|d| !d.is_null()) else {
        return Ok(BTreeMap::new());
    };
    let decls = contract::parse_channel_declarations(raw).map_err(|e| {
        format!(
            "the method's channel declarations are invalid: {}",
            e.message
        )
    })?;
    let mut ports = BTreeMap::new();
    for (name, decl) in decls {
        let (contract, schema_raw) = match &decl.contract {
            Some(reference) => {
                let bytes = caller
                    .resolve_reference(reference)
                    .map_err(|e| format!("port {name:?}: {e}"))?;
                let c = contract::ChannelContract::parse(bytes).map_err(|e| {
                    format!(
                        "port {name:?}: {reference:?} is not a Channel Contract/1 descriptor: {}",
                        e.message
                    )
                })?;
                let identity = ChannelContractIdentity {
                    id: c.id.clone(),
                    version: c.version.clone(),
                    digest: c.digest.clone(),
                };
                (Some(identity), c.descriptor.get("item").cloned())
            }
            None => (None, raw[&name].get("schema").cloned()),
        };
        let port = Port {
            decl,
            schema_raw,
            contract,
        };
        ports.insert(name, port);
    }
    Ok(ports)
}

/// Channel Contract/1 §1 and §3: may endpoint `e` of `source` fill `port`?
pub(super) fn check_port(
    name: &str,
    port: &Port,
    e: &Endpoint,
    source: &Source,
) -> Result<(), String> {
    let decl = &port.decl;
    let want_send = decl.direction == contract::Direction::Send;
    match (e.role, want_send) {
        (Role::Writer, true) | (Role::Reader(_), false) => {}
        (Role::SourceRef, _) => {
            return Err(format!("a source reference cannot fill port {name:?}"))
        }
        _ => return Err(format!("port {name:?} has the other direction")),
    }
    let delivery_ok = match decl.delivery {
        None => true,
        Some(contract::Delivery::Direct) => source.delivery == Delivery::Direct,
        Some(contract::Delivery::Broadcast) => source.delivery == Delivery::Broadcast,
    };
    if !delivery_ok {
        return Err(format!("port {name:?} requires the other delivery profile"));
    }
    if let Some(failed) = &source.failed {
        return Err(format!(
            "the channel for {name:?} failed: {}",
            failed.code.as_str()
        ));
    }
    match e.role {
        Role::Writer => {
            if source.sealed {
                return Err(format!("the writer for {name:?} is sealed"));
            }
            if source.contract.is_some() && port.contract != source.contract {
                return Err(format!(
                    "port {name:?} must declare the source's exact channel contract"
                ));
            }
        }
        Role::Reader(r) => {
            let reader = &source.readers[&r];
            if !matches!(reader.state, ReaderState::Open) {
                return Err(format!("the receiver for {name:?} was disposed or ended"));
            }
            if decl.start == Start::Beginning && reader.start != 1 {
                return Err(format!(
                    "port {name:?} reads from the beginning, the receiver starts at {}",
                    reader.start
                ));
            }
            if port.contract.is_some() && port.contract != source.contract {
                return Err(format!(
                    "port {name:?} requires a source with its exact channel contract"
                ));
            }
            if let Some(schema) = &decl.schema {
                if reader
                    .queue
                    .iter()
                    .any(|(_, v)| schema.validate(v).is_err())
                {
                    return Err(format!("queued items do not satisfy port {name:?}"));
                }
            }
        }
        Role::SourceRef => {}
    }
    if let (Some(raw), Role::Writer) = (nontrivial(&port.schema_raw), e.role) {
        let live = source
            .readers
            .values()
            .filter(|r| matches!(r.state, ReaderState::Open));
        for reader in live {
            if nontrivial(&reader.schema_raw).is_some_and(|other| other != raw) {
                return Err(format!(
                    "port {name:?} conflicts with a live receiver's item schema"
                ));
            }
        }
    }
    if let (Some(a), Some(b), Role::Reader(_)) = (
        nontrivial(&port.schema_raw),
        nontrivial(&source.writer_raw),
        e.role,
    ) {
        if a != b {
            return Err(format!(
                "port {name:?} conflicts with the admitted writer's item schema"
            ));
        }
    }
    if let (Some(a), Some(b)) = (nontrivial(&port.schema_raw), nontrivial(&source.schema_raw)) {
        if a != b {
            return Err(format!(
                "port {name:?} declares an item schema different from the channel's"
            ));
        }
    }
    Ok(())
}
