//! `channel/send` and `channel/next`, the two requests that may wait (for
//! room in a queue, for an item), and the futures that hold their place:
//! dropping one retracts what it waited with.

use std::sync::Arc;

use flow::json::Value;
use flow::wire;
use flow::wire::Delivery;
use flow::wire::ErrorCode;
use flow::wire::OperationalError;
use serde_json::json;

use super::super::peer::BoxFuture;
use super::{
    not_held, op, Broker, HolderId, ReaderState, Role, BROADCAST_QUEUE_CAPACITY,
    DIRECT_QUEUE_CAPACITY, MAX_ITEM_BYTES, MAX_PENDING_SENDS, MAX_PENDING_SEND_BYTES,
    MAX_READER_BYTES, MAX_SOURCE_BYTES, MAX_TREE_BYTES,
};

impl Broker {
    pub(super) async fn send(
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

    pub(super) async fn next(
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
pub(super) fn ready(
    result: Result<Value, OperationalError>,
) -> BoxFuture<Result<Value, OperationalError>> {
    Box::pin(async { result })
}

/// `future` polled once now, while the requests are admitted one by one:
/// its synchronous part (a read's claim of its receiver, a send's acceptance
/// or place in line) happens in the order the requests arrived, whatever
/// order the tasks awaiting them run in later. A result that is ready at
/// once needs no task at all.
pub(super) fn started(
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
