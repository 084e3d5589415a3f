//! Rights that move: an exact child call maps the caller's endpoints into
//! the callee (after every one was checked against its declared ports), and
//! a holder that finishes gives back or fails what it still holds.

use std::collections::BTreeMap;
use std::collections::HashMap;

use flow::json::Value;
use flow::package::Package;
use flow::wire::ChannelGrant;
use flow::wire::Delivery;
use flow::wire::ErrorCode;
use flow::wire::OperationalError;

use super::ports::check_port;
use super::ports::declared_ports;
use super::ports::method_ports;
use super::{nontrivial, op, Broker, Endpoint, HolderId, Port, ReaderState, Role};

impl Broker {
    /// Move the rights `refs` (callee port name → caller token) from
    /// `from` to `to`, after checking every one against the callee's
    /// declared ports. All or nothing: a rejection moves no right.
    pub fn transfer(
        &self,
        from: HolderId,
        to: HolderId,
        refs: &BTreeMap<String, String>,
        callee: &Package,
    ) -> Result<BTreeMap<String, ChannelGrant>, OperationalError> {
        let ports = declared_ports(callee).map_err(|m| op(ErrorCode::InvalidInput, m))?;
        self.move_rights(from, to, refs, ports)
    }

    /// Like [`Broker::transfer`] for a capability call: the ports are the
    /// contract method's `channels` declarations (`declared`, the raw
    /// method member; absent or `null` when it declares none), and a
    /// port's `./` channel contract reference resolves in `caller`, the
    /// package whose slot the contract is bound to (Channel Contract/1 §1).
    pub(crate) fn transfer_to_method(
        &self,
        from: HolderId,
        to: HolderId,
        refs: &BTreeMap<String, String>,
        declared: Option<&Value>,
        caller: &Package,
    ) -> Result<BTreeMap<String, ChannelGrant>, OperationalError> {
        let ports = method_ports(declared, caller).map_err(|m| op(ErrorCode::InvalidInput, m))?;
        self.move_rights(from, to, refs, ports)
    }

    /// Validates every mapped right against `ports`, then moves them all.
    pub(super) fn move_rights(
        &self,
        from: HolderId,
        to: HolderId,
        refs: &BTreeMap<String, String>,
        ports: BTreeMap<String, Port>,
    ) -> Result<BTreeMap<String, ChannelGrant>, OperationalError> {
        let invalid = |m: String| op(ErrorCode::InvalidInput, m);
        for (name, port) in &ports {
            if port.decl.required && !refs.contains_key(name) {
                return Err(invalid(format!(
                    "the callee's required channel port {name:?} is not connected"
                )));
            }
        }
        let mut st = self.state.lock().unwrap();
        let mut seen = std::collections::HashSet::new();
        // Staged writer and reader shapes per source, to catch conflicts
        // between mappings of this same call.
        let mut staged: HashMap<u64, (Vec<&Value>, Vec<&Value>)> = HashMap::new();
        for (name, token) in refs {
            if !seen.insert(token) {
                return Err(invalid(format!("endpoint {token:?} is mapped twice")));
            }
            let port = ports
                .get(name)
                .ok_or_else(|| invalid(format!("the callee declares no channel port {name:?}")))?;
            let e = st.held(from, token)?;
            if e.claimed {
                return Err(op(
                    ErrorCode::PermissionDenied,
                    format!("endpoint for {name:?} was already used and cannot transfer"),
                ));
            }
            let source = &st.sources[&e.source];
            check_port(name, port, &e, source).map_err(invalid)?;
            if let Some(raw) = nontrivial(&port.schema_raw) {
                let (writers, readers) = staged.entry(e.source).or_default();
                let (mine, theirs) = match e.role {
                    Role::Writer => (writers, &*readers),
                    _ => (readers, &*writers),
                };
                if theirs.iter().any(|other| *other != raw) {
                    return Err(invalid(format!(
                        "port {name:?} conflicts with another port mapped in this call"
                    )));
                }
                mine.push(raw);
            }
        }
        let mut grants = BTreeMap::new();
        for (name, token) in refs {
            let mut e = st.endpoints.remove(token).expect("validated");
            let raw = nontrivial(&ports[name].schema_raw).cloned();
            if let Some(source) = st.sources.get_mut(&e.source) {
                match e.role {
                    Role::Writer if raw.is_some() => source.writer_raw = raw,
                    Role::Reader(r) => {
                        if let Some(reader) = source.readers.get_mut(&r) {
                            reader.schema_raw = raw;
                        }
                    }
                    _ => {}
                }
            }
            if let (Role::Reader(r), Some(schema)) = (e.role, &ports[name].decl.schema) {
                let source = st.sources.get_mut(&e.source).expect("live source");
                if source.delivery == Delivery::Direct {
                    let reader = source.readers.get_mut(&r).expect("live reader");
                    if reader
                        .queue
                        .iter()
                        .any(|(_, v)| schema.validate(v).is_err())
                    {
                        // The prefix was checked above; unreachable by
                        // construction, kept as a guard.
                        return Err(invalid(format!(
                            "queued items do not satisfy port {name:?}"
                        )));
                    }
                    reader.schema = Some(schema.clone());
                } else if let Some(reader) = source.readers.get_mut(&r) {
                    reader.schema = Some(schema.clone());
                }
            }
            e.holder = to;
            let fresh = st.token("ch");
            st.endpoints.insert(fresh.clone(), e);
            grants.insert(name.clone(), st.grant(&fresh));
        }
        Ok(grants)
    }

    /// The invocation `holder` reached its terminal (`healthy` when it
    /// succeeded): held writers are sealed (or fail their source), held
    /// receivers are disposed, and the sources it created end with it.
    pub fn finish(&self, holder: HolderId, healthy: bool) {
        self.end_holder(
            holder,
            (!healthy).then(|| {
                op(
                    ErrorCode::ExecutionFailed,
                    "the writer's holder failed before sealing",
                )
            }),
        );
    }

    /// The invocation `holder` was stopped (cancelled with its owner, or
    /// its deadline passed) before it settled: the communication right of
    /// every writer it held ended, so their sources fail `DISCONNECTED`.
    pub(crate) fn finish_stopped(&self, holder: HolderId) {
        self.end_holder(
            holder,
            Some(op(
                ErrorCode::Disconnected,
                "the writer's holder was stopped before sealing",
            )),
        );
    }

    /// End `holder`: seal its writers, or fail their sources with
    /// `writer_failure`; dispose its receivers; drop the sources it owns.
    pub(super) fn end_holder(&self, holder: HolderId, writer_failure: Option<OperationalError>) {
        let mut st = self.state.lock().unwrap();
        let held: Vec<(String, Endpoint)> = st
            .endpoints
            .iter()
            .filter(|(_, e)| e.holder == holder)
            .map(|(t, e)| (t.clone(), e.clone()))
            .collect();
        for (token, e) in held {
            st.endpoints.remove(&token);
            let Some(source) = st.sources.get_mut(&e.source) else {
                continue;
            };
            match e.role {
                Role::Writer => match &writer_failure {
                    None => {
                        if source.failed.is_none() {
                            source.sealed = true;
                        }
                    }
                    Some(cause) => source.fail(cause.clone()),
                },
                Role::Reader(r) => {
                    if let Some(reader) = source.readers.get_mut(&r) {
                        if matches!(reader.state, ReaderState::Open) {
                            reader.discard();
                            reader.state = ReaderState::Disposed;
                        }
                    }
                }
                Role::SourceRef => {}
            }
        }
        let owned: Vec<u64> = st
            .sources
            .iter()
            .filter(|(_, s)| s.owner == holder)
            .map(|(id, _)| *id)
            .collect();
        for id in owned {
            st.sources.remove(&id);
            st.endpoints.retain(|_, e| e.source != id);
        }
        st.allocations.remove(&holder);
        drop(st);
        self.changed.notify_waiters();
    }
}
