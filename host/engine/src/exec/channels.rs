//! Run/1 §5.1 channels, served by the host: one broker per root Run tree.
//!
//! The broker owns every source, queue and endpoint of the tree. An endpoint
//! is an opaque token bound to the invocation (holder) that received it; a
//! token copied anywhere else grants nothing. Rights move only through an
//! exact child call, which mints fresh tokens for the callee after every
//! mapped right was validated against the callee's declared ports.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use flow::contract::{self, ChannelDeclaration, Start};
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
pub const MAX_SOURCE_BYTES: u64 = 256 * MAX_ITEM_BYTES as u64;

// A lone largest item always fits an empty receiver and a writer's waiting
// allowance, so back-pressure can always make progress.
const _: () = assert!(MAX_READER_BYTES >= MAX_ITEM_BYTES);
const _: () = assert!(MAX_PENDING_SEND_BYTES >= MAX_ITEM_BYTES);
const _: () = assert!(MAX_TREE_BYTES >= MAX_READER_BYTES + MAX_PENDING_SEND_BYTES);

/// Which invocation holds a right.
pub type HolderId = u64;

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
    pub fn new_holder(&self) -> HolderId {
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

    async fn send(
        self: Arc<Self>,
        holder: HolderId,
        token: &str,
        value: Value,
    ) -> Result<Value, OperationalError> {
        // Budgets count canonical item bytes, the size the value has
        // anywhere it is forwarded.
        let size = flow::json::canonical(&value).len();
        let mut waiting: Option<PendingSend> = None;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut st = self.state.lock().unwrap();
                let id = self.writer(&mut st, holder, token)?;
                let mut tree = st.payload_bytes();
                let source = st.sources.get_mut(&id).expect("live source");
                if let Some(failed) = &source.failed {
                    return Err(failed.clone());
                }
                if source.sealed {
                    return Err(op(ErrorCode::Disconnected, "the writer is sealed"));
                }
                if waiting.is_none() {
                    if size > MAX_ITEM_BYTES {
                        let e = op(
                            ErrorCode::ResourceExhausted,
                            format!("a channel item is at most {MAX_ITEM_BYTES} bytes"),
                        );
                        source.fail(e.clone());
                        self.changed.notify_waiters();
                        return Err(e);
                    }
                    if let Some(schema) = &source.schema {
                        if let Err(invalid) = schema.validate(&value) {
                            let e = op(
                                ErrorCode::InvalidInput,
                                format!("the value does not satisfy the channel's item schema: {invalid}"),
                            );
                            source.fail(e.clone());
                            self.changed.notify_waiters();
                            return Err(e);
                        }
                    }
                }
                if source.last >= wire::MAX_SAFE_INTEGER {
                    return Err(op(
                        ErrorCode::ResourceExhausted,
                        "the sequence space is used up",
                    ));
                }
                if source.accepted_bytes + size as u64 > MAX_SOURCE_BYTES {
                    let e = op(
                        ErrorCode::ResourceExhausted,
                        format!(
                            "a channel accepts at most {MAX_SOURCE_BYTES} bytes in its lifetime"
                        ),
                    );
                    source.fail(e.clone());
                    self.changed.notify_waiters();
                    return Err(e);
                }
                match source.delivery {
                    Delivery::Direct => {
                        let reader = source.readers.values_mut().next().expect("direct reader");
                        match &reader.state {
                            ReaderState::Open => {}
                            _ => {
                                return Err(op(
                                    ErrorCode::Disconnected,
                                    "the receiver was disposed",
                                ))
                            }
                        }
                        if let Some(schema) = &reader.schema {
                            if let Err(invalid) = schema.validate(&value) {
                                let e = op(
                                    ErrorCode::InvalidInput,
                                    format!("the value does not satisfy the receiver's item schema: {invalid}"),
                                );
                                source.fail(e.clone());
                                self.changed.notify_waiters();
                                return Err(e);
                            }
                        }
                        // A waiting send's bytes are already in the tree.
                        let held = if waiting.is_some() { size } else { 0 };
                        let next_in_line = match &waiting {
                            Some(w) => source.waiting.front() == Some(&w.ticket),
                            None => source.waiting.is_empty(),
                        };
                        if next_in_line
                            && reader.fits(DIRECT_QUEUE_CAPACITY, size)
                            && tree - held + size <= MAX_TREE_BYTES
                        {
                            source.last += 1;
                            source.accepted_bytes += size as u64;
                            reader.push(source.last, value, size);
                            // Settle the wait here: its guard must not
                            // retake the lock we hold.
                            if let Some(w) = waiting.as_mut() {
                                w.active = false;
                                source.waiting.pop_front();
                                source.pending_bytes -= size;
                            }
                            self.changed.notify_waiters();
                            return Ok(Value::Null);
                        }
                        if waiting.is_none() {
                            if source.waiting.len() >= MAX_PENDING_SENDS {
                                return Err(op(
                                    ErrorCode::ResourceExhausted,
                                    format!("at most {MAX_PENDING_SENDS} sends wait at once"),
                                ));
                            }
                            if source.pending_bytes + size > MAX_PENDING_SEND_BYTES {
                                return Err(op(
                                    ErrorCode::ResourceExhausted,
                                    format!("the sends of one writer wait with at most {MAX_PENDING_SEND_BYTES} bytes at once"),
                                ));
                            }
                            if tree + size > MAX_TREE_BYTES {
                                return Err(op(
                                    ErrorCode::ResourceExhausted,
                                    format!(
                                        "the Run's channels hold at most {MAX_TREE_BYTES} bytes"
                                    ),
                                ));
                            }
                            source.tickets += 1;
                            source.waiting.push_back(source.tickets);
                            source.pending_bytes += size;
                            waiting = Some(PendingSend {
                                broker: self.clone(),
                                source: id,
                                ticket: source.tickets,
                                bytes: size,
                                active: true,
                            });
                        }
                    }
                    Delivery::Broadcast => {
                        source.last += 1;
                        source.accepted_bytes += size as u64;
                        let seq = source.last;
                        for reader in source.readers.values_mut() {
                            if !matches!(reader.state, ReaderState::Open) {
                                continue;
                            }
                            if !reader.fits(BROADCAST_QUEUE_CAPACITY, size)
                                || tree + size > MAX_TREE_BYTES
                            {
                                tree -= reader.bytes;
                                reader.fail(op(
                                    ErrorCode::Lagged,
                                    format!("the reader fell more than {BROADCAST_QUEUE_CAPACITY} items or {MAX_READER_BYTES} bytes behind, or the Run's channels hold {MAX_TREE_BYTES} bytes"),
                                ));
                                continue;
                            }
                            if let Some(schema) = &reader.schema {
                                if schema.validate(&value).is_err() {
                                    tree -= reader.bytes;
                                    reader.fail(op(
                                        ErrorCode::InvalidInput,
                                        "an item does not satisfy this subscription's schema",
                                    ));
                                    continue;
                                }
                            }
                            reader.push(seq, value.clone(), size);
                            tree += size;
                        }
                        self.changed.notify_waiters();
                        return Ok(Value::Null);
                    }
                }
            }
            notified.await;
        }
    }

    async fn next(
        self: Arc<Self>,
        holder: HolderId,
        token: &str,
    ) -> Result<Value, OperationalError> {
        let mut read: Option<PendingRead> = None;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut st = self.state.lock().unwrap();
                let e = st.held(holder, token)?;
                let Role::Reader(r) = e.role else {
                    return Err(not_held());
                };
                st.endpoints.get_mut(token).expect("held").claimed = true;
                let source = st.sources.get_mut(&e.source).expect("live source");
                let sealed = source.sealed;
                let source_failed = source.failed.clone();
                let reader = source.readers.get_mut(&r).expect("live reader");
                if read.is_none() {
                    if reader.reading {
                        return Err(op(
                            ErrorCode::ResourceExhausted,
                            "a receiver has one outstanding read",
                        ));
                    }
                    reader.reading = true;
                    if reader.release_credit() {
                        self.changed.notify_waiters();
                    }
                    read = Some(PendingRead {
                        broker: self.clone(),
                        source: e.source,
                        reader: r,
                        done: false,
                    });
                }
                let outcome = match &reader.state {
                    ReaderState::Failed(cause) => Some(Err(cause.clone())),
                    ReaderState::Disposed => Some(Err(op(
                        ErrorCode::Disconnected,
                        "the receiver was disposed",
                    ))),
                    ReaderState::Ended => {
                        Some(Ok(json!({ "end": { "lastSequence": reader.delivered } })))
                    }
                    ReaderState::Open => {
                        if let Some((sequence, value)) = reader.pop() {
                            reader.delivered = sequence;
                            Some(Ok(
                                json!({ "item": { "sequence": sequence, "value": value } }),
                            ))
                        } else if let Some(cause) = source_failed {
                            reader.fail(cause.clone());
                            Some(Err(cause))
                        } else if sealed {
                            reader.state = ReaderState::Ended;
                            Some(Ok(json!({ "end": { "lastSequence": reader.delivered } })))
                        } else {
                            None
                        }
                    }
                };
                if let Some(outcome) = outcome {
                    reader.reading = false;
                    if let Some(r) = read.as_mut() {
                        r.done = true;
                    }
                    self.changed.notify_waiters();
                    return outcome;
                }
            }
            notified.await;
        }
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
    pub fn transfer_to_method(
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
    fn move_rights(
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
    pub fn finish_stopped(&self, holder: HolderId) {
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
    fn end_holder(&self, holder: HolderId, writer_failure: Option<OperationalError>) {
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
    pub fn host_receivers(
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
    pub fn fail_writer(&self, holder: HolderId, token: &str, cause: OperationalError) -> bool {
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
    pub fn fail_held_writers(&self, holder: HolderId) {
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

/// A send waiting for queue space; dropping it retracts the value.
struct PendingSend {
    broker: Arc<Broker>,
    source: u64,
    /// Its place in the source's line of waiting sends.
    ticket: u64,
    bytes: usize,
    active: bool,
}

impl Drop for PendingSend {
    fn drop(&mut self) {
        if !self.active {
            return;
        }
        let mut st = self.broker.state.lock().unwrap();
        if let Some(source) = st.sources.get_mut(&self.source) {
            source.waiting.retain(|t| *t != self.ticket);
            source.pending_bytes -= self.bytes;
        }
        drop(st);
        // The retracted bytes may let another writer's send wait or land.
        self.broker.changed.notify_waiters();
    }
}

/// A request's result that is known at once.
fn ready(result: Result<Value, OperationalError>) -> BoxFuture<Result<Value, OperationalError>> {
    Box::pin(async { result })
}

/// `future` polled once now, while the requests are admitted one by one:
/// its synchronous part (a read's claim of its receiver, a send's acceptance
/// or place in line) happens in the order the requests arrived, whatever
/// order the tasks awaiting them run in later. A result that is ready at
/// once needs no task at all.
fn started(
    mut future: BoxFuture<Result<Value, OperationalError>>,
) -> BoxFuture<Result<Value, OperationalError>> {
    let mut now = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut now) {
        std::task::Poll::Ready(result) => ready(result),
        std::task::Poll::Pending => future,
    }
}

/// An outstanding read; cancelling it (dropping the future) disposes the
/// receiver.
struct PendingRead {
    broker: Arc<Broker>,
    source: u64,
    reader: u64,
    done: bool,
}

impl Drop for PendingRead {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut st = self.broker.state.lock().unwrap();
        if let Some(reader) = st
            .sources
            .get_mut(&self.source)
            .and_then(|s| s.readers.get_mut(&self.reader))
        {
            reader.reading = false;
            if matches!(reader.state, ReaderState::Open) {
                reader.discard();
                reader.state = ReaderState::Disposed;
            }
        }
        drop(st);
        self.broker.changed.notify_waiters();
    }
}

/// Compile an inline item schema exactly as a `channels` declaration's
/// `schema` is compiled (no file-root `$schema` required).
fn inline_schema(raw: &Value) -> Result<Schema, String> {
    let decl = json!({ "item": { "direction": "send", "schema": raw } });
    contract::parse_channel_declarations(&decl)
        .map_err(|e| format!("the item schema is not Schema/1: {}", e.message))?
        .remove("item")
        .and_then(|d| d.schema)
        .ok_or_else(|| "the item schema is not Schema/1".to_string())
}

/// A package-local `./` Channel Contract/1 reference, resolved in `package`.
fn resolve_contract(
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

fn declared_ports(package: &Package) -> Result<BTreeMap<String, Port>, String> {
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
fn method_ports(
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
fn check_port(name: &str, port: &Port, e: &Endpoint, source: &Source) -> Result<(), String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn package(flow_md: &str) -> Package {
        let files = BTreeMap::from([
            ("FLOW.md".to_string(), flow_md.as_bytes().to_vec()),
            ("flow.py".to_string(), b"pass\n".to_vec()),
        ]);
        Package::from_files(files).unwrap()
    }

    fn plain() -> Package {
        package("---\nname: plain\ndescription: No ports.\n---\n")
    }

    async fn call(
        broker: &Arc<Broker>,
        holder: HolderId,
        method: Method,
        params: Value,
    ) -> Result<Value, OperationalError> {
        broker
            .request(holder, &plain(), method, &params)
            .unwrap()
            .await
    }

    /// `channel.send` of `value` through the send end of `created` (a
    /// `channel.create` answer).
    async fn send(
        broker: &Arc<Broker>,
        holder: HolderId,
        created: &Value,
        value: Value,
    ) -> Result<Value, OperationalError> {
        call(
            broker,
            holder,
            Method::ChannelSend,
            send_params(created, value),
        )
        .await
    }

    /// `channel.subscribe` to the source of `created`.
    async fn subscribe(
        broker: &Arc<Broker>,
        holder: HolderId,
        created: &Value,
    ) -> Result<Value, OperationalError> {
        call(
            broker,
            holder,
            Method::ChannelSubscribe,
            json!({"source": created["source"]}),
        )
        .await
    }

    /// `channel.next` on `reader`'s endpoint (a subscription, or the
    /// `receive` end of a create answer).
    async fn next(
        broker: &Arc<Broker>,
        holder: HolderId,
        reader: &Value,
    ) -> Result<Value, OperationalError> {
        call(
            broker,
            holder,
            Method::ChannelNext,
            json!({"endpoint": reader["endpoint"]}),
        )
        .await
    }

    #[tokio::test]
    async fn broadcast_without_readers_advances_the_sequence_without_retaining() {
        let broker = Broker::new();
        let me = broker.new_holder();
        let created = pair(&broker, me, "broadcast").await;
        for v in 0..2 {
            send(&broker, me, &created, json!(v)).await.unwrap();
        }
        let sub = subscribe(&broker, me, &created).await.unwrap();
        assert_eq!(sub["startSequence"], 3);
        send(&broker, me, &created, json!("x")).await.unwrap();
        call(
            &broker,
            me,
            Method::ChannelClose,
            json!({"endpoint": created["send"]["endpoint"]}),
        )
        .await
        .unwrap();
        assert_eq!(
            next(&broker, me, &sub).await.unwrap(),
            json!({"item": {"sequence": 3, "value": "x"}})
        );
        assert_eq!(
            next(&broker, me, &sub).await.unwrap(),
            json!({"end": {"lastSequence": 3}})
        );
    }

    #[tokio::test]
    async fn another_invocation_cannot_use_or_move_a_right_it_does_not_hold() {
        let broker = Broker::new();
        let owner = broker.new_holder();
        let other = broker.new_holder();
        let pair = call(&broker, owner, Method::ChannelCreate, json!({}))
            .await
            .unwrap();
        let send = pair["send"]["endpoint"].as_str().unwrap().to_string();
        let e = call(
            &broker,
            other,
            Method::ChannelSend,
            json!({"endpoint": send, "value": 1}),
        )
        .await
        .unwrap_err();
        assert_eq!(e.code, ErrorCode::PermissionDenied);
        let sender = package(
            "---\nname: sender\ndescription: One port.\nchannels:\n  events:\n    direction: send\n---\n",
        );
        let refs = BTreeMap::from([("events".to_string(), send.clone())]);
        let e = broker.transfer(other, owner, &refs, &sender).unwrap_err();
        assert_eq!(e.code, ErrorCode::PermissionDenied);
        // The holder moves it: the old token is dead, the new one works.
        let grants = broker.transfer(owner, other, &refs, &sender).unwrap();
        let moved = grants["events"].endpoint.clone();
        assert_ne!(moved, send);
        let e = call(
            &broker,
            owner,
            Method::ChannelSend,
            json!({"endpoint": send, "value": 1}),
        )
        .await
        .unwrap_err();
        assert_eq!(e.code, ErrorCode::PermissionDenied);
        call(
            &broker,
            other,
            Method::ChannelSend,
            json!({"endpoint": moved, "value": 1}),
        )
        .await
        .unwrap();
    }

    #[tokio::test]
    async fn a_beginning_port_refuses_a_late_subscription_a_suffix_port_takes_it() {
        let broker = Broker::new();
        let owner = broker.new_holder();
        let child = broker.new_holder();
        let created = pair(&broker, owner, "broadcast").await;
        send(&broker, owner, &created, json!(0)).await.unwrap();
        let sub = subscribe(&broker, owner, &created).await.unwrap();
        let refs = BTreeMap::from([(
            "events".to_string(),
            sub["endpoint"].as_str().unwrap().to_string(),
        )]);
        let beginning = package(
            "---\nname: b\ndescription: Reads all.\nchannels:\n  events:\n    direction: receive\n---\n",
        );
        let e = broker
            .transfer(owner, child, &refs, &beginning)
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput);
        let suffix = package(
            "---\nname: s\ndescription: Reads a suffix.\nchannels:\n  events:\n    direction: receive\n    start: suffix\n---\n",
        );
        let grants = broker.transfer(owner, child, &refs, &suffix).unwrap();
        assert_eq!(grants["events"].start_sequence, Some(2));
    }

    /// A string whose canonical JSON is exactly `bytes` long.
    fn item(bytes: usize) -> Value {
        json!("a".repeat(bytes - 2))
    }

    async fn pair(broker: &Arc<Broker>, holder: HolderId, delivery: &str) -> Value {
        call(
            broker,
            holder,
            Method::ChannelCreate,
            json!({ "delivery": delivery }),
        )
        .await
        .unwrap()
    }

    fn send_params(created: &Value, value: Value) -> Value {
        json!({ "endpoint": created["send"]["endpoint"], "value": value })
    }

    fn send_future(
        broker: &Arc<Broker>,
        holder: HolderId,
        params: Value,
    ) -> BoxFuture<Result<Value, OperationalError>> {
        broker
            .request(holder, &plain(), Method::ChannelSend, &params)
            .unwrap()
    }

    /// Whether `fut` is still waiting after the broker had time to act.
    async fn still_waiting(fut: &mut BoxFuture<Result<Value, OperationalError>>) -> bool {
        tokio::time::timeout(std::time::Duration::from_millis(50), fut)
            .await
            .is_err()
    }

    #[tokio::test]
    async fn a_direct_receiver_holds_its_byte_budget_then_the_sender_waits() {
        let broker = Broker::new();
        let me = broker.new_holder();
        let created = pair(&broker, me, "direct").await;
        let full = MAX_READER_BYTES / MAX_ITEM_BYTES;
        assert_eq!(full * MAX_ITEM_BYTES, MAX_READER_BYTES);
        for _ in 0..full {
            send(&broker, me, &created, item(MAX_ITEM_BYTES))
                .await
                .unwrap();
        }
        // One byte past the budget waits, though the queue has item room.
        let mut past = send_future(&broker, me, send_params(&created, json!(0)));
        assert!(still_waiting(&mut past).await);
        next(&broker, me, &created["receive"]).await.unwrap();
        // The committed item keeps its bytes until the next read.
        assert!(still_waiting(&mut past).await);
        next(&broker, me, &created["receive"]).await.unwrap();
        assert_eq!(past.await.unwrap(), Value::Null);
        let state = broker.state.lock().unwrap();
        assert_eq!(
            state.payload_bytes(),
            (full - 1) * MAX_ITEM_BYTES + 1,
            "two reads released one item's credit; the small item was queued"
        );
    }

    #[tokio::test]
    async fn the_read_admitted_first_holds_the_receiver_whichever_is_awaited_first() {
        let broker = Broker::new();
        let me = broker.new_holder();
        let created = pair(&broker, me, "direct").await;
        let read = json!({"endpoint": created["receive"]["endpoint"]});
        let mut first = broker
            .request(me, &plain(), Method::ChannelNext, &read)
            .unwrap();
        let second = broker
            .request(me, &plain(), Method::ChannelNext, &read)
            .unwrap();
        let second = tokio::time::timeout(std::time::Duration::from_secs(5), second)
            .await
            .expect("the second read is answered at once");
        assert_eq!(second.unwrap_err().code, ErrorCode::ResourceExhausted);
        assert!(still_waiting(&mut first).await);
        send(&broker, me, &created, json!("a")).await.unwrap();
        assert_eq!(
            first.await.unwrap(),
            json!({"item": {"sequence": 1, "value": "a"}})
        );
    }

    #[tokio::test]
    async fn waiting_sends_land_in_the_order_they_were_admitted() {
        let broker = Broker::new();
        let me = broker.new_holder();
        let created = pair(&broker, me, "direct").await;
        let receiver = &created["receive"];
        let mut got = Vec::new();
        for v in 0..DIRECT_QUEUE_CAPACITY {
            send(&broker, me, &created, json!(v)).await.unwrap();
        }
        let [mut w0, mut w1, mut w2] =
            ["w0", "w1", "w2"].map(|v| send_future(&broker, me, send_params(&created, json!(v))));
        // Room for one (a read releases the credit of the one before): the
        // first in line takes it, though the others are awaited first.
        for _ in 0..2 {
            got.push(next(&broker, me, receiver).await.unwrap());
        }
        assert!(still_waiting(&mut w2).await);
        assert!(still_waiting(&mut w1).await);
        assert_eq!(w0.as_mut().await.unwrap(), Value::Null);
        // Room for two, and a send admitted now waits behind the line.
        for _ in 0..2 {
            got.push(next(&broker, me, receiver).await.unwrap());
        }
        let mut late = send_future(&broker, me, send_params(&created, json!("late")));
        assert!(still_waiting(&mut late).await);
        assert!(still_waiting(&mut w2).await);
        assert_eq!(w1.as_mut().await.unwrap(), Value::Null);
        assert_eq!(w2.as_mut().await.unwrap(), Value::Null);
        got.push(next(&broker, me, receiver).await.unwrap());
        assert_eq!(late.as_mut().await.unwrap(), Value::Null);
        while got.len() < DIRECT_QUEUE_CAPACITY + 4 {
            got.push(next(&broker, me, receiver).await.unwrap());
        }
        let values: Vec<Value> = got.iter().map(|r| r["item"]["value"].clone()).collect();
        let mut sent: Vec<Value> = (0..DIRECT_QUEUE_CAPACITY).map(|v| json!(v)).collect();
        sent.extend(["w0", "w1", "w2", "late"].map(|v| json!(v)));
        assert_eq!(values, sent);
    }

    #[tokio::test]
    async fn waiting_sends_hold_at_most_their_byte_budget() {
        let broker = Broker::new();
        let me = broker.new_holder();
        let created = pair(&broker, me, "direct").await;
        for _ in 0..MAX_READER_BYTES / MAX_ITEM_BYTES {
            send(&broker, me, &created, item(MAX_ITEM_BYTES))
                .await
                .unwrap();
        }
        let mut waiting = Vec::new();
        for _ in 0..MAX_PENDING_SEND_BYTES / MAX_ITEM_BYTES {
            let mut fut = send_future(&broker, me, send_params(&created, item(MAX_ITEM_BYTES)));
            assert!(still_waiting(&mut fut).await);
            waiting.push(fut);
        }
        assert!(waiting.len() < MAX_PENDING_SENDS);
        let e = send(&broker, me, &created, json!(0)).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::ResourceExhausted);
        // Retracting one waiting send (cancelling it) makes room again.
        drop(waiting.pop());
        let mut again = send_future(&broker, me, send_params(&created, item(MAX_ITEM_BYTES)));
        assert!(still_waiting(&mut again).await);
        assert_eq!(
            broker.state.lock().unwrap().payload_bytes(),
            MAX_READER_BYTES + MAX_PENDING_SEND_BYTES
        );
    }

    #[tokio::test]
    async fn a_root_tree_holds_its_byte_budget_then_refuses_what_cannot_wait() {
        let broker = Broker::new();
        let me = broker.new_holder();
        let child = broker.new_holder();
        let per_reader = MAX_READER_BYTES / MAX_ITEM_BYTES;
        let channels = MAX_TREE_BYTES / MAX_READER_BYTES;
        assert_eq!(channels * MAX_READER_BYTES, MAX_TREE_BYTES);
        let mut created = Vec::new();
        // Two holders share the tree's budget.
        for i in 0..channels {
            let holder = if i % 2 == 0 { me } else { child };
            let c = pair(&broker, holder, "direct").await;
            for _ in 0..per_reader {
                send(&broker, holder, &c, item(MAX_ITEM_BYTES))
                    .await
                    .unwrap();
            }
            created.push(c);
        }
        assert_eq!(broker.state.lock().unwrap().payload_bytes(), MAX_TREE_BYTES);
        // One byte more cannot queue and cannot wait within the budget.
        let spare = pair(&broker, me, "direct").await;
        let e = send(&broker, me, &spare, json!(0)).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::ResourceExhausted);
        // A broadcast reader the tree cannot hold fails LAGGED alone; the
        // writer's send is accepted.
        let source = pair(&broker, me, "broadcast").await;
        let sub = subscribe(&broker, me, &source).await.unwrap();
        send(&broker, me, &source, json!(0)).await.unwrap();
        let e = next(&broker, me, &sub).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::Lagged);
        // Two reads anywhere in the tree release one item: the spare fits.
        for _ in 0..2 {
            next(&broker, me, &created[0]["receive"]).await.unwrap();
        }
        send(&broker, me, &spare, json!(0)).await.unwrap();
        // A holder's end releases the bytes of the sources it created.
        broker.finish(child, true);
        assert_eq!(
            broker.state.lock().unwrap().payload_bytes(),
            (channels / 2) * MAX_READER_BYTES - MAX_ITEM_BYTES + 1
        );
    }

    #[tokio::test]
    async fn a_broadcast_reader_past_its_byte_budget_fails_lagged_alone() {
        let broker = Broker::new();
        let me = broker.new_holder();
        let source = pair(&broker, me, "broadcast").await;
        let behind = subscribe(&broker, me, &source).await.unwrap();
        let reading = subscribe(&broker, me, &source).await.unwrap();
        let full = MAX_READER_BYTES / MAX_ITEM_BYTES;
        for _ in 0..full {
            send(&broker, me, &source, item(MAX_ITEM_BYTES))
                .await
                .unwrap();
        }
        // Two reads release one item's bytes for `reading` only.
        next(&broker, me, &reading).await.unwrap();
        next(&broker, me, &reading).await.unwrap();
        send(&broker, me, &source, json!(0)).await.unwrap();
        assert_eq!(
            next(&broker, me, &behind).await.unwrap_err().code,
            ErrorCode::Lagged
        );
        for sequence in 3..=full as u64 {
            assert_eq!(
                next(&broker, me, &reading).await.unwrap()["item"]["sequence"],
                sequence
            );
        }
        assert_eq!(
            next(&broker, me, &reading).await.unwrap(),
            json!({"item": {"sequence": full + 1, "value": 0}})
        );
    }

    #[tokio::test]
    async fn a_source_accepts_its_lifetime_bytes_and_fails_one_byte_past() {
        let broker = Broker::new();
        let me = broker.new_holder();
        // No reader retains anything: only the lifetime budget advances.
        let source = pair(&broker, me, "broadcast").await;
        let full = item(MAX_ITEM_BYTES);
        let items = MAX_SOURCE_BYTES / MAX_ITEM_BYTES as u64;
        assert_eq!(items * MAX_ITEM_BYTES as u64, MAX_SOURCE_BYTES);
        for _ in 0..items {
            send(&broker, me, &source, full.clone()).await.unwrap();
        }
        let late = subscribe(&broker, me, &source).await.unwrap();
        let e = send(&broker, me, &source, json!(0)).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::ResourceExhausted);
        // The value was not accepted: the source failed before it.
        let read = next(&broker, me, &late).await.unwrap_err();
        assert_eq!(read.code, ErrorCode::ResourceExhausted);
        assert_eq!(late["startSequence"], items + 1);
    }
}
