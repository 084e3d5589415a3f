//! Receivers the host itself holds: the sources of a root's declared send
//! ports for `jig run --receive`, read by the host, and the writers the
//! host fails when a Run ends.

use std::collections::BTreeMap;
use std::sync::Arc;

use flow::contract;
use flow::json::Value;
use flow::package::Package;
use flow::wire::ChannelCreateParams;
use flow::wire::Delivery;
use flow::wire::ErrorCode;
use flow::wire::OperationalError;

use super::ports::declared_ports;
use super::{op, Broker, HolderId, Role};

/// A receive endpoint the host itself holds, for one declared send port of
/// a root Run (`jig run --receive`).
#[derive(Debug, Clone)]
pub struct HostReceiver {
    pub port: String,
    pub endpoint: String,
    pub start_sequence: u64,
}

impl Broker {
    /// For each named send port of the root `package`, create the source
    /// the port declares (its schema or contract, its delivery; direct when
    /// either is accepted) owned by `host`, with `host` holding the
    /// receiver. Returns the writers to map into the root (port → token,
    /// for [`Broker::transfer`]) and the receivers. A name that is not a
    /// declared send port is `INVALID_INPUT`; nothing is allocated then.
    pub(crate) fn host_receivers(
        &self,
        host: HolderId,
        package: &Package,
        names: &[String],
    ) -> Result<(BTreeMap<String, String>, Vec<HostReceiver>), OperationalError> {
        let invalid = |m: String| op(ErrorCode::InvalidInput, m);
        let ports = declared_ports(package).map_err(invalid)?;
        for name in names {
            match ports.get(name) {
                Some(port) if port.decl.direction == contract::Direction::Send => {}
                Some(_) => {
                    return Err(invalid(format!(
                        "{name:?} is a receive port; only send ports can be received"
                    )))
                }
                None => {
                    let sends: Vec<&str> = ports
                        .iter()
                        .filter(|(_, p)| p.decl.direction == contract::Direction::Send)
                        .map(|(n, _)| n.as_str())
                        .collect();
                    return Err(invalid(format!(
                        "the target declares no send port {name:?} (send ports: {})",
                        if sends.is_empty() {
                            "none".to_string()
                        } else {
                            sends.join(", ")
                        }
                    )));
                }
            }
        }
        let mut writers = BTreeMap::new();
        let mut receivers = Vec::new();
        for name in names {
            let decl = &ports[name].decl;
            let broadcast = decl.delivery == Some(contract::Delivery::Broadcast);
            let params = ChannelCreateParams {
                delivery: Some(if broadcast {
                    Delivery::Broadcast
                } else {
                    Delivery::Direct
                }),
                schema: match decl.contract {
                    Some(_) => None,
                    None => package.metadata().channels[name].get("schema").cloned(),
                },
                contract: decl.contract.clone(),
            };
            let created = self.create(host, package, params)?;
            let receive = if broadcast {
                let reference = created["source"].as_str().unwrap_or_default();
                self.subscribe(host, reference)?
            } else {
                created["receive"].clone()
            };
            writers.insert(
                name.clone(),
                created["send"]["endpoint"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
            receivers.push(HostReceiver {
                port: name.clone(),
                endpoint: receive["endpoint"].as_str().unwrap_or_default().to_string(),
                start_sequence: receive["startSequence"].as_u64().unwrap_or(1),
            });
        }
        Ok((writers, receivers))
    }

    /// Fail the source of the writer `token` that `holder` holds with
    /// `cause` (a provider's overflowed ingress fails it `LAGGED`); false
    /// when `holder` holds no such writer.
    pub(crate) fn fail_writer(
        &self,
        holder: HolderId,
        token: &str,
        cause: OperationalError,
    ) -> bool {
        let mut st = self.state.lock().unwrap();
        let source = st
            .endpoints
            .get(token)
            .filter(|e| e.holder == holder && e.role == Role::Writer)
            .map(|e| e.source);
        let Some(source) = source else {
            return false;
        };
        if let Some(source) = st.sources.get_mut(&source) {
            source.fail(cause);
        }
        drop(st);
        self.changed.notify_waiters();
        true
    }

    /// Fail the source of every writer `holder` still holds, keeping its
    /// receivers: the host's writers for a root that never received them
    /// (it failed before launch).
    pub(crate) fn fail_held_writers(&self, holder: HolderId) {
        let mut st = self.state.lock().unwrap();
        let held: Vec<u64> = st
            .endpoints
            .values()
            .filter(|e| e.holder == holder && e.role == Role::Writer)
            .map(|e| e.source)
            .collect();
        for id in held {
            if let Some(source) = st.sources.get_mut(&id) {
                source.fail(op(
                    ErrorCode::ExecutionFailed,
                    "the Run ended before it received this channel",
                ));
            }
        }
        drop(st);
        self.changed.notify_waiters();
    }

    /// `channel/next` for a receiver the host itself holds.
    pub async fn read(
        self: &Arc<Self>,
        holder: HolderId,
        endpoint: &str,
    ) -> Result<Value, OperationalError> {
        self.clone().next(holder, endpoint).await
    }
}
