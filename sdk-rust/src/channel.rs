//! Channels (Run/1 §5.1): finite single-writer JSON/1 sequences between
//! participants of one root Run.
//!
//! The SDK tracks only what it must: receiver sequences (contiguous from
//! `startSequence`, one outstanding read, no prefetch), sticky terminal
//! state, and which activated receivers remain unfinished when the handler
//! settles (abandonment). Endpoint transfer and implicit writer sealing are
//! host knowledge; the SDK never infers moved rights.

use std::cell::RefCell;
use std::rc::Rc;

use flow::json::Value;
use flow::wire::{
    ChannelContractIdentity, ChannelCreateParams, ChannelDirection, ChannelGrant, ChannelResult,
    Delivery, ErrorCode, Method, ReleaseStatus,
};

use crate::context::{Call, RunContext};
use crate::error::OperationError;
use crate::peer::Peer;

/// How to create a channel. Defaults: direct delivery, generic JSON/1.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChannelOptions {
    /// `None` means direct.
    pub delivery: Option<Delivery>,
    /// A Schema/1 object or boolean for the items.
    pub schema: Option<Value>,
    /// A package-local `./` Channel Contract/1 reference (exclusive with `schema`).
    pub contract: Option<String>,
}

/// A created channel.
pub enum Channel {
    Direct(ChannelPair),
    Broadcast(ChannelBroadcast),
}

impl Channel {
    /// The direct pair, if this is one.
    pub fn into_pair(self) -> Option<ChannelPair> {
        match self {
            Channel::Direct(p) => Some(p),
            Channel::Broadcast(_) => None,
        }
    }

    /// The broadcast source, if this is one.
    pub fn into_broadcast(self) -> Option<ChannelBroadcast> {
        match self {
            Channel::Broadcast(b) => Some(b),
            Channel::Direct(_) => None,
        }
    }
}

/// A direct channel: one writer, one reader.
pub struct ChannelPair {
    pub sender: ChannelSender,
    pub receiver: ChannelReceiver,
}

/// A broadcast channel: one writer, any number of subscriptions by the
/// creating invocation.
pub struct ChannelBroadcast {
    pub sender: ChannelSender,
    source: String,
    peer: Rc<RefCell<Peer>>,
}

impl ChannelBroadcast {
    /// Allocates a reader starting at the next accepted sequence. A new
    /// reader is owned work: read it to its end or release it.
    pub fn subscribe(&self) -> Call<Result<ChannelReceiver, OperationError>> {
        let params = serde_json::json!({ "source": self.source });
        Call::start(
            &self.peer,
            Ok((Method::ChannelSubscribe, params)),
            |r, peer| match ChannelResult::from_value(&r?) {
                Ok(ChannelResult::Subscription(grant)) => Ok(ChannelReceiver {
                    grant,
                    peer: peer.clone(),
                }),
                _ => Err(unexpected()),
            },
        )
    }
}

fn unexpected() -> OperationError {
    OperationError::new(ErrorCode::InvalidResult, "unexpected channel result")
}

fn invalid(message: impl Into<String>) -> OperationError {
    OperationError::new(ErrorCode::InvalidInput, message)
}

/// A send right.
pub struct ChannelSender {
    grant: ChannelGrant,
    peer: Rc<RefCell<Peer>>,
}

impl ChannelSender {
    /// The opaque endpoint reference, for a call's `channels` mapping.
    pub fn endpoint(&self) -> &str {
        &self.grant.endpoint
    }

    /// Direct or broadcast.
    pub fn delivery(&self) -> Delivery {
        self.grant.delivery
    }

    /// The exact contract identity, when the channel has one.
    pub fn contract(&self) -> Option<&ChannelContractIdentity> {
        self.grant.contract.as_ref()
    }

    /// Sends one value; resolves on host acceptance (not processing).
    pub fn send(&self, value: Value) -> Call<Result<(), OperationError>> {
        let request = flow::json::check(&value)
            .map_err(|e| invalid(format!("channel value is not JSON/1: {e}")))
            .map(|()| {
                let params = serde_json::json!({ "endpoint": self.grant.endpoint, "value": value });
                (Method::ChannelSend, params)
            });
        Call::start(&self.peer, request, |r, _| r.map(|_| ()))
    }

    /// Seals the writer.
    pub fn close(&self) -> Call<Result<(), OperationError>> {
        let params = serde_json::json!({ "endpoint": self.grant.endpoint });
        Call::start(&self.peer, Ok((Method::ChannelClose, params)), |r, _| {
            r.map(|_| ())
        })
    }
}

/// A receive right.
pub struct ChannelReceiver {
    grant: ChannelGrant,
    peer: Rc<RefCell<Peer>>,
}

impl ChannelReceiver {
    /// The opaque endpoint reference, for a call's `channels` mapping.
    pub fn endpoint(&self) -> &str {
        &self.grant.endpoint
    }

    /// The first sequence this reader sees.
    pub fn start_sequence(&self) -> u64 {
        self.grant.start_sequence.unwrap_or(1)
    }

    /// Direct or broadcast.
    pub fn delivery(&self) -> Delivery {
        self.grant.delivery
    }

    /// The next value, or `None` at the clean end. A failure (for example
    /// `LAGGED`) is sticky: later reads report it again. Only one read may be
    /// outstanding. Cancelling a read disposes the receiver.
    pub fn next(&self) -> Call<Result<Option<Value>, OperationError>> {
        let endpoint = self.grant.endpoint.clone();
        let admitted = {
            let mut peer = self.peer.borrow_mut();
            match peer.receiver(&endpoint) {
                Some(s) if s.ended => return Call::ready(&self.peer, Ok(None)),
                Some(s) if s.failure.is_some() => {
                    let failure = s.failure.clone();
                    return Call::ready(&self.peer, Err(failure.unwrap_or_else(unexpected)));
                }
                Some(s) if s.disposed => {
                    let e =
                        OperationError::new(ErrorCode::Disconnected, "the receiver was released");
                    return Call::ready(&self.peer, Err(e));
                }
                Some(s) if s.reading => {
                    let e = invalid("a read is already outstanding on this receiver");
                    return Call::ready(&self.peer, Err(e));
                }
                _ => {}
            }
            let params = serde_json::json!({ "endpoint": endpoint });
            let admitted = peer.admit(Method::ChannelNext, params);
            if admitted.is_ok() {
                if let Some(s) = peer.receiver(&endpoint) {
                    s.activated = true;
                    s.reading = true;
                }
            }
            admitted
        };
        Call::from_admission(
            &self.peer,
            admitted,
            |r, _| match ChannelResult::from_value(&r?) {
                Ok(ChannelResult::Item { value, .. }) => Ok(Some(value)),
                Ok(ChannelResult::End { .. }) => Ok(None),
                _ => Err(unexpected()),
            },
        )
    }

    /// Disposes the receiver and reports how it finished.
    pub fn release(&self) -> Call<Result<ReleaseStatus, OperationError>> {
        let params = serde_json::json!({ "endpoint": self.grant.endpoint });
        if let Some(s) = self.peer.borrow_mut().receiver(&self.grant.endpoint) {
            s.disposed = true;
        }
        Call::start(&self.peer, Ok((Method::ChannelRelease, params)), |r, _| {
            match ChannelResult::from_value(&r?) {
                Ok(ChannelResult::Release(status)) => Ok(status),
                _ => Err(unexpected()),
            }
        })
    }
}

impl RunContext {
    /// Creates a channel owned by this Run.
    pub fn channel(&self, options: ChannelOptions) -> Call<Result<Channel, OperationError>> {
        let params = ChannelCreateParams {
            delivery: options.delivery,
            schema: options.schema,
            contract: options.contract,
        }
        .to_value();
        let request = ChannelCreateParams::from_value(&params)
            .map_err(|e| invalid(e.0))
            .map(|_| (Method::ChannelCreate, params));
        Call::start(
            &self.peer,
            request,
            |r, peer| match ChannelResult::from_value(&r?) {
                Ok(ChannelResult::Pair { send, receive }) => Ok(Channel::Direct(ChannelPair {
                    sender: ChannelSender {
                        grant: send,
                        peer: peer.clone(),
                    },
                    receiver: ChannelReceiver {
                        grant: receive,
                        peer: peer.clone(),
                    },
                })),
                Ok(ChannelResult::Broadcast { send, source }) => {
                    Ok(Channel::Broadcast(ChannelBroadcast {
                        sender: ChannelSender {
                            grant: send,
                            peer: peer.clone(),
                        },
                        source,
                        peer: peer.clone(),
                    }))
                }
                _ => Err(unexpected()),
            },
        )
    }

    /// The send endpoint the host granted under `name`, if any.
    pub fn granted_sender(&self, name: &str) -> Option<ChannelSender> {
        let grant = self.channels().get(name)?;
        (grant.direction == ChannelDirection::Send).then(|| ChannelSender {
            grant: grant.clone(),
            peer: self.peer.clone(),
        })
    }

    /// The receive endpoint the host granted under `name`, if any.
    pub fn granted_receiver(&self, name: &str) -> Option<ChannelReceiver> {
        let grant = self.channels().get(name)?;
        (grant.direction == ChannelDirection::Receive).then(|| ChannelReceiver {
            grant: grant.clone(),
            peer: self.peer.clone(),
        })
    }
}
