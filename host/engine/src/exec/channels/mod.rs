//! Run/1 §5.1 channels, served by the host: one broker per root Run tree.
//!
//! The broker owns every source, queue and endpoint of the tree. An endpoint
//! is an opaque token bound to the invocation (holder) that received it; a
//! token copied anywhere else grants nothing. Rights move only through an
//! exact child call, which mints fresh tokens for the callee after every
//! mapped right was validated against the callee's declared ports.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use flow::contract::ChannelDeclaration;
use flow::json::Value;
use flow::package::Package;
use flow::schema::Schema;
use flow::wire::{
    self, ChannelContractIdentity, ChannelCreateParams, ChannelDirection, ChannelEndpointParams,
    ChannelGrant, ChannelSendParams, ChannelSubscribeParams, Delivery, ErrorCode, Method,
    OperationalError, RpcError,
};
use serde_json::json;
use tokio::sync::Notify;

use super::peer::BoxFuture;

mod host;
mod io;
mod ports;
#[cfg(test)]
mod tests;
mod transfer;

pub use host::HostReceiver;
use io::{ready, started};
use ports::{inline_schema, resolve_contract};

/// Accepted but unread items a direct receiver holds before sends wait.
pub const DIRECT_QUEUE_CAPACITY: usize = 16;
/// Unread items one broadcast reader holds before it fails `LAGGED`.
pub const BROADCAST_QUEUE_CAPACITY: usize = 16;
/// Largest canonical item, in bytes; a larger value fails its source.
pub const MAX_ITEM_BYTES: usize = 1024 * 1024;
/// Sends of one writer waiting for queue space at once.
pub const MAX_PENDING_SENDS: usize = 16;
/// Channels plus subscriptions one invocation may allocate in its lifetime.
pub const MAX_ALLOCATIONS: usize = 256;
/// Canonical item bytes one receiver holds (queued plus the committed item
/// whose credit the next read releases). Run/1 gives no figure; four
/// largest items keep a slow reader cheap. A direct send past it waits; a
/// broadcast reader past it fails `LAGGED`.
pub const MAX_READER_BYTES: usize = 4 * MAX_ITEM_BYTES;
/// Canonical item bytes of the sends one writer has waiting for queue
/// space; a send past it is refused `RESOURCE_EXHAUSTED` at once.
pub const MAX_PENDING_SEND_BYTES: usize = 4 * MAX_ITEM_BYTES;
/// Canonical item bytes one root Run tree holds in all its channels, queued
/// and waiting: 64 MiB, 5% of the 1,280 MiB root payload budget (seed 002
/// §8). A send that cannot even wait within it is refused
/// `RESOURCE_EXHAUSTED`; a broadcast reader it cannot hold fails `LAGGED`.
pub const MAX_TREE_BYTES: usize = 64 * MAX_ITEM_BYTES;
/// Canonical item bytes one source accepts in its lifetime (Run/1 §5.1:
/// accepted values advance the source byte budget even when no reader
/// retains them): 256 MiB keeps a channel finite. A value past it fails the
/// source `RESOURCE_EXHAUSTED` before acceptance, like an oversized one.
pub(crate) const MAX_SOURCE_BYTES: u64 = 256 * MAX_ITEM_BYTES as u64;

// A lone largest item always fits an empty receiver and a writer's waiting
// allowance, so back-pressure can always make progress.
const _: () = assert!(MAX_READER_BYTES >= MAX_ITEM_BYTES);
const _: () = assert!(MAX_PENDING_SEND_BYTES >= MAX_ITEM_BYTES);
const _: () = assert!(MAX_TREE_BYTES >= MAX_READER_BYTES + MAX_PENDING_SEND_BYTES);

/// Which invocation holds a right.
pub(crate) type HolderId = u64;

fn op(code: ErrorCode, message: impl Into<String>) -> OperationalError {
    OperationalError::new(code, message)
}

fn not_held() -> OperationalError {
    op(
        ErrorCode::PermissionDenied,
        "this invocation holds no such channel endpoint",
    )
}

#[derive(Debug)]
enum ReaderState {
    Open,
    Ended,
    Disposed,
    Failed(OperationalError),
}

#[derive(Debug)]
struct Reader {
    start: u64,
    queue: VecDeque<(u64, Value)>,
    /// Last sequence delivered (`start - 1` before the first).
    delivered: u64,
    state: ReaderState,
    reading: bool,
    /// The last delivered item still holds its credit until the next read.
    unacked: bool,
    /// A constraint a late-bound receive port added, and as written.
    schema: Option<Schema>,
    schema_raw: Option<Value>,
    /// Canonical bytes of each queued item, in queue order.
    sizes: VecDeque<usize>,
    /// Canonical bytes this reader holds: queued plus the unacked item.
    bytes: usize,
    unacked_bytes: usize,
}

impl Reader {
    fn new(start: u64) -> Reader {
        Reader {
            start,
            queue: VecDeque::new(),
            delivered: start - 1,
            state: ReaderState::Open,
            reading: false,
            unacked: false,
            schema: None,
            schema_raw: None,
            sizes: VecDeque::new(),
            bytes: 0,
            unacked_bytes: 0,
        }
    }

    fn push(&mut self, sequence: u64, value: Value, size: usize) {
        self.queue.push_back((sequence, value));
        self.sizes.push_back(size);
        self.bytes += size;
    }

    /// Commit the next queued item; it keeps its credit until the next read.
    fn pop(&mut self) -> Option<(u64, Value)> {
        let item = self.queue.pop_front()?;
        self.unacked_bytes = self.sizes.pop_front().unwrap_or(0);
        self.unacked = true;
        Some(item)
    }

    /// A new read releases the credit of the item committed before it.
    fn release_credit(&mut self) -> bool {
        self.bytes -= std::mem::take(&mut self.unacked_bytes);
        std::mem::take(&mut self.unacked)
    }

    /// Whether one more item of `size` bytes fits this reader's capacity.
    fn fits(&self, capacity: usize, size: usize) -> bool {
        self.used() < capacity && self.bytes + size <= MAX_READER_BYTES
    }

    /// Drop every uncommitted item and every byte this reader holds.
    fn discard(&mut self) {
        self.queue.clear();
        self.sizes.clear();
        self.bytes = 0;
        self.unacked_bytes = 0;
    }

    /// Queued items plus a committed item whose credit the next read releases.
    fn used(&self) -> usize {
        self.queue.len() + usize::from(self.unacked)
    }

    fn fail(&mut self, e: OperationalError) {
        if matches!(self.state, ReaderState::Open) {
            self.discard();
            self.state = ReaderState::Failed(e);
        }
    }
}

#[derive(Debug)]
struct Source {
    owner: HolderId,
    delivery: Delivery,
    schema: Option<Schema>,
    /// The item schema as written (for shape-compatibility checks).
    schema_raw: Option<Value>,
    contract: Option<ChannelContractIdentity>,
    last: u64,
    sealed: bool,
    failed: Option<OperationalError>,
    readers: HashMap<u64, Reader>,
    /// The tickets of the sends waiting for queue space, first come first:
    /// only the front one may land, and a new send waits behind them.
    waiting: VecDeque<u64>,
    /// The last ticket handed to a waiting send.
    tickets: u64,
    /// Canonical bytes of the sends waiting for queue space.
    pending_bytes: usize,
    /// Canonical bytes accepted over the source's lifetime.
    accepted_bytes: u64,
    /// The item schema a transferred writer's port declared, as written.
    writer_raw: Option<Value>,
}

impl Source {
    fn fail(&mut self, e: OperationalError) {
        if self.sealed || self.failed.is_some() {
            return;
        }
        for reader in self.readers.values_mut() {
            reader.fail(e.clone());
        }
        self.failed = Some(e);
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Role {
    Writer,
    Reader(u64),
    /// A broadcast subscription source reference (not an endpoint).
    SourceRef,
}

#[derive(Debug, Clone)]
struct Endpoint {
    source: u64,
    role: Role,
    holder: HolderId,
    claimed: bool,
}

#[derive(Default)]
struct State {
    next: u64,
    sources: HashMap<u64, Source>,
    endpoints: HashMap<String, Endpoint>,
    allocations: HashMap<HolderId, usize>,
}

impl State {
    fn id(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    fn token(&mut self, prefix: &str) -> String {
        let n = self.id();
        format!("{prefix}-{n}")
    }

    fn held(&self, holder: HolderId, token: &str) -> Result<Endpoint, OperationalError> {
        match self.endpoints.get(token) {
            Some(e) if e.holder == holder => Ok(e.clone()),
            _ => Err(not_held()),
        }
    }

    fn allocate(&mut self, holder: HolderId) -> Result<(), OperationalError> {
        let count = self.allocations.entry(holder).or_default();
        if *count >= MAX_ALLOCATIONS {
            return Err(op(
                ErrorCode::ResourceExhausted,
                format!(
                    "an invocation allocates at most {MAX_ALLOCATIONS} channels and subscriptions"
                ),
            ));
        }
        *count += 1;
        Ok(())
    }

    /// Canonical item bytes the tree holds: queued in every reader and
    /// waiting in every writer.
    fn payload_bytes(&self) -> usize {
        self.sources
            .values()
            .map(|s| s.pending_bytes + s.readers.values().map(|r| r.bytes).sum::<usize>())
            .sum()
    }

    fn grant(&self, token: &str) -> ChannelGrant {
        let e = &self.endpoints[token];
        let source = &self.sources[&e.source];
        let (direction, start_sequence) = match e.role {
            Role::Reader(r) => (ChannelDirection::Receive, Some(source.readers[&r].start)),
            _ => (ChannelDirection::Send, None),
        };
        ChannelGrant {
            endpoint: token.to_string(),
            direction,
            delivery: source.delivery,
            contract: source.contract.clone(),
            start_sequence,
        }
    }
}

/// The channel broker of one root Run tree.
#[derive(Default)]
pub struct Broker {
    state: Mutex<State>,
    changed: Notify,
}

/// What a callee's declared port requires, with the schema as written.
struct Port {
    decl: ChannelDeclaration,
    schema_raw: Option<Value>,
    contract: Option<ChannelContractIdentity>,
}

fn nontrivial(schema: &Option<Value>) -> Option<&Value> {
    schema.as_ref().filter(|s| **s != Value::Bool(true))
}

impl Broker {
    pub fn new() -> Arc<Broker> {
        Arc::new(Broker::default())
    }

    /// A fresh holder identity for one invocation of this tree.
    pub(crate) fn new_holder(&self) -> HolderId {
        self.state.lock().unwrap().id()
    }

    /// Admit one `channel/*` request from `holder`: invalid params are a
    /// JSON-RPC error now; everything else settles in the returned future.
    pub fn request(
        self: &Arc<Self>,
        holder: HolderId,
        package: &Package,
        method: Method,
        params: &Value,
    ) -> Result<BoxFuture<Result<Value, OperationalError>>, RpcError> {
        match method {
            Method::ChannelCreate => {
                let p = ChannelCreateParams::from_value(params).map_err(|e| e.to_rpc())?;
                Ok(ready(self.create(holder, package, p)))
            }
            Method::ChannelSubscribe => {
                let p = ChannelSubscribeParams::from_value(params).map_err(|e| e.to_rpc())?;
                Ok(ready(self.subscribe(holder, &p.source)))
            }
            Method::ChannelSend => {
                let p = ChannelSendParams::from_value(params).map_err(|e| e.to_rpc())?;
                let this = self.clone();
                Ok(started(Box::pin(async move {
                    this.send(holder, &p.endpoint, p.value).await
                })))
            }
            Method::ChannelNext => {
                let p = ChannelEndpointParams::from_value(params).map_err(|e| e.to_rpc())?;
                let this = self.clone();
                Ok(started(Box::pin(async move {
                    this.next(holder, &p.endpoint).await
                })))
            }
            Method::ChannelClose => {
                let p = ChannelEndpointParams::from_value(params).map_err(|e| e.to_rpc())?;
                Ok(ready(self.close(holder, &p.endpoint)))
            }
            Method::ChannelRelease => {
                let p = ChannelEndpointParams::from_value(params).map_err(|e| e.to_rpc())?;
                Ok(ready(self.release(holder, &p.endpoint)))
            }
            _ => Err(RpcError::standard(
                wire::METHOD_NOT_FOUND,
                "method not found",
            )),
        }
    }

    fn create(
        &self,
        holder: HolderId,
        package: &Package,
        p: ChannelCreateParams,
    ) -> Result<Value, OperationalError> {
        let invalid = |m: String| op(ErrorCode::InvalidInput, m);
        let (schema, schema_raw, contract) = match (&p.schema, &p.contract) {
            (Some(raw), _) => {
                let schema = inline_schema(raw).map_err(invalid)?;
                (Some(schema), Some(raw.clone()), None)
            }
            (None, Some(reference)) => {
                let c = resolve_contract(package, reference).map_err(invalid)?;
                let identity = ChannelContractIdentity {
                    id: c.id.clone(),
                    version: c.version.clone(),
                    digest: c.digest.clone(),
                };
                (
                    Some(c.item.clone()),
                    c.descriptor.get("item").cloned(),
                    Some(identity),
                )
            }
            (None, None) => (None, None, None),
        };
        let delivery = p.delivery.unwrap_or(Delivery::Direct);
        let mut st = self.state.lock().unwrap();
        st.allocate(holder)?;
        let id = st.id();
        let mut source = Source {
            owner: holder,
            delivery,
            schema,
            schema_raw,
            contract,
            last: 0,
            sealed: false,
            failed: None,
            readers: HashMap::new(),
            waiting: VecDeque::new(),
            tickets: 0,
            pending_bytes: 0,
            accepted_bytes: 0,
            writer_raw: None,
        };
        let send = st.token("ch");
        let endpoint = |role| Endpoint {
            source: id,
            role,
            holder,
            claimed: false,
        };
        st.endpoints.insert(send.clone(), endpoint(Role::Writer));
        match delivery {
            Delivery::Direct => {
                let reader = st.id();
                source.readers.insert(reader, Reader::new(1));
                let receive = st.token("ch");
                st.endpoints
                    .insert(receive.clone(), endpoint(Role::Reader(reader)));
                st.sources.insert(id, source);
                Ok(json!({
                    "send": st.grant(&send).to_value(),
                    "receive": st.grant(&receive).to_value(),
                }))
            }
            Delivery::Broadcast => {
                let reference = st.token("src");
                st.endpoints
                    .insert(reference.clone(), endpoint(Role::SourceRef));
                st.sources.insert(id, source);
                Ok(json!({ "send": st.grant(&send).to_value(), "source": reference }))
            }
        }
    }

    fn subscribe(&self, holder: HolderId, reference: &str) -> Result<Value, OperationalError> {
        let mut st = self.state.lock().unwrap();
        let e = st.held(holder, reference)?;
        if e.role != Role::SourceRef {
            return Err(not_held());
        }
        let source = &st.sources[&e.source];
        if let Some(failed) = &source.failed {
            return Err(failed.clone());
        }
        if source.sealed {
            return Err(op(
                ErrorCode::Disconnected,
                "the source is sealed and takes no new subscriptions",
            ));
        }
        st.allocate(holder)?;
        let reader = st.id();
        let token = st.token("ch");
        let source = st.sources.get_mut(&e.source).expect("live source");
        source.readers.insert(reader, Reader::new(source.last + 1));
        st.endpoints.insert(
            token.clone(),
            Endpoint {
                source: e.source,
                role: Role::Reader(reader),
                holder,
                claimed: false,
            },
        );
        Ok(st.grant(&token).to_value())
    }

    /// Held writer `token` of `holder`, claimed; its source id.
    fn writer(
        &self,
        st: &mut State,
        holder: HolderId,
        token: &str,
    ) -> Result<u64, OperationalError> {
        let e = st.held(holder, token)?;
        if e.role != Role::Writer {
            return Err(not_held());
        }
        st.endpoints.get_mut(token).expect("held").claimed = true;
        Ok(e.source)
    }

    fn close(&self, holder: HolderId, token: &str) -> Result<Value, OperationalError> {
        let mut st = self.state.lock().unwrap();
        let id = self.writer(&mut st, holder, token)?;
        let source = st.sources.get_mut(&id).expect("live source");
        if let Some(failed) = &source.failed {
            return Err(failed.clone());
        }
        if !source.waiting.is_empty() {
            return Err(op(
                ErrorCode::InvalidInput,
                "the writer still has unaccepted sends",
            ));
        }
        source.sealed = true;
        self.changed.notify_waiters();
        if source.delivery == Delivery::Direct
            && source
                .readers
                .values()
                .all(|r| matches!(r.state, ReaderState::Disposed))
        {
            return Err(op(ErrorCode::Disconnected, "the receiver was disposed"));
        }
        Ok(Value::Null)
    }

    fn release(&self, holder: HolderId, token: &str) -> Result<Value, OperationalError> {
        let mut st = self.state.lock().unwrap();
        let e = st.held(holder, token)?;
        let Role::Reader(r) = e.role else {
            return Err(op(
                ErrorCode::PermissionDenied,
                "channel/release disposes receivers only",
            ));
        };
        st.endpoints.get_mut(token).expect("held").claimed = true;
        let reader = st
            .sources
            .get_mut(&e.source)
            .and_then(|s| s.readers.get_mut(&r))
            .expect("live reader");
        let status = release_status(reader);
        self.changed.notify_waiters();
        Ok(status)
    }
}

fn release_status(reader: &mut Reader) -> Value {
    match &reader.state {
        ReaderState::Ended => json!({ "status": "ended", "lastSequence": reader.delivered }),
        ReaderState::Failed(cause) => {
            let mut status = json!({ "status": "failed", "code": cause.code.as_str() });
            if let Some(details) = &cause.details {
                status["details"] = details.clone();
            }
            status
        }
        ReaderState::Disposed => json!({ "status": "released" }),
        ReaderState::Open => {
            reader.discard();
            reader.state = ReaderState::Disposed;
            json!({ "status": "released" })
        }
    }
}
