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
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let pair = json!({"send": {"endpoint": "c:w", "direction": "send", "delivery": "direct"},
    ///     "receive": {"endpoint": "c:r", "direction": "receive", "delivery": "direct", "startSequence": 1}});
    /// let t = run_scripted(&[root(json!(null)), reply("component:1", pair)], |ctx| async move {
    ///     let pair = ctx.channel(ChannelOptions::default()).await?.into_pair();
    ///     Ok::<_, HandlerError>(RunResult::done(json!(pair.is_some())))
    /// });
    /// assert_eq!(t.root_result().unwrap()["output"], true);
    /// ```
    pub fn into_pair(self) -> Option<ChannelPair> {
        match self {
            Channel::Direct(p) => Some(p),
            Channel::Broadcast(_) => None,
        }
    }

    /// The broadcast source, if this is one.
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let created = json!({"send": {"endpoint": "b:w", "direction": "send", "delivery": "broadcast"},
    ///     "source": "b:src"});
    /// let t = run_scripted(&[root(json!(null)), reply("component:1", created)], |ctx| async move {
    ///     let options = ChannelOptions { delivery: Some(Delivery::Broadcast), ..Default::default() };
    ///     let broadcast = ctx.channel(options).await?.into_broadcast().ok_or("not broadcast")?;
    ///     Ok::<_, HandlerError>(RunResult::done(json!(broadcast.sender.endpoint())))
    /// });
    /// assert_eq!(t.root_result().unwrap()["output"], "b:w");
    /// ```
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
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let created = json!({"send": {"endpoint": "b:w", "direction": "send", "delivery": "broadcast"},
    ///     "source": "b:src"});
    /// let reader = json!({"endpoint": "b:r", "direction": "receive", "delivery": "broadcast",
    ///     "startSequence": 1});
    /// let script = [
    ///     root(json!(null)),
    ///     reply("component:1", created),
    ///     reply("component:2", reader),
    ///     reply("component:3", json!({"status": "released"})),
    /// ];
    /// let t = run_scripted(&script, |ctx| async move {
    ///     let options = ChannelOptions { delivery: Some(Delivery::Broadcast), ..Default::default() };
    ///     let broadcast = ctx.channel(options).await?.into_broadcast().ok_or("not broadcast")?;
    ///     let reader = broadcast.subscribe().await?;
    ///     let start = reader.start_sequence();
    ///     // A subscription is owned work: release it when not reading it.
    ///     reader.release().await?;
    ///     Ok::<_, HandlerError>(RunResult::done(json!(start)))
    /// });
    /// assert_eq!(t.requests()[1]["params"], json!({"source": "b:src"}));
    /// assert_eq!(t.root_result().unwrap()["output"], 1);
    /// ```
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
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let events = json!({"endpoint": "e:w", "direction": "send", "delivery": "direct"});
    /// let run = root_with_channels(json!(null), json!({"events": events}));
    /// let t = run_scripted(&[run], |ctx| async move {
    ///     let sender = ctx.granted_sender("events").ok_or("no events port")?;
    ///     Ok::<_, HandlerError>(RunResult::done(json!(sender.endpoint())))
    /// });
    /// assert_eq!(t.root_result().unwrap()["output"], "e:w");
    /// ```
    pub fn endpoint(&self) -> &str {
        &self.grant.endpoint
    }

    /// Direct or broadcast.
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let events = json!({"endpoint": "e:w", "direction": "send", "delivery": "direct"});
    /// let run = root_with_channels(json!(null), json!({"events": events}));
    /// let t = run_scripted(&[run], |ctx| async move {
    ///     let sender = ctx.granted_sender("events").ok_or("no events port")?;
    ///     assert_eq!(sender.delivery(), Delivery::Direct);
    ///     Ok::<_, HandlerError>(RunResult::done(json!(null)))
    /// });
    /// assert_eq!(t.status, EXIT_ANSWERED);
    /// ```
    pub fn delivery(&self) -> Delivery {
        self.grant.delivery
    }

    /// The exact contract identity, when the channel has one.
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let digest = format!("sha256:{}", "0".repeat(64));
    /// let events = json!({"endpoint": "e:w", "direction": "send", "delivery": "direct",
    ///     "contract": {"id": "https://example.org/updates", "version": "1.0.0", "digest": digest}});
    /// let run = root_with_channels(json!(null), json!({"events": events}));
    /// let t = run_scripted(&[run], |ctx| async move {
    ///     let sender = ctx.granted_sender("events").ok_or("no events port")?;
    ///     let contract = sender.contract().ok_or("untyped")?;
    ///     Ok::<_, HandlerError>(RunResult::done(json!(contract.version)))
    /// });
    /// assert_eq!(t.root_result().unwrap()["output"], "1.0.0");
    /// ```
    pub fn contract(&self) -> Option<&ChannelContractIdentity> {
        self.grant.contract.as_ref()
    }

    /// Sends one value; resolves on host acceptance (not processing).
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let events = json!({"endpoint": "e:w", "direction": "send", "delivery": "direct"});
    /// let run = root_with_channels(json!(null), json!({"events": events}));
    /// let script = [run, reply("component:1", json!(null))];
    /// let t = run_scripted(&script, |ctx| async move {
    ///     let sender = ctx.granted_sender("events").ok_or("no events port")?;
    ///     sender.send(json!({"text": "hello"})).await?;
    ///     Ok::<_, HandlerError>(RunResult::done(json!(null)))
    /// });
    /// assert_eq!(t.requests()[0]["params"], json!({"endpoint": "e:w", "value": {"text": "hello"}}));
    /// ```
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
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let events = json!({"endpoint": "e:w", "direction": "send", "delivery": "direct"});
    /// let run = root_with_channels(json!(null), json!({"events": events}));
    /// let script = [run, reply("component:1", json!(null))];
    /// let t = run_scripted(&script, |ctx| async move {
    ///     ctx.granted_sender("events").ok_or("no events port")?.close().await?;
    ///     Ok::<_, HandlerError>(RunResult::done(json!(null)))
    /// });
    /// assert_eq!(t.requests()[0]["method"], "channel/close");
    /// ```
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
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let events = json!({"endpoint": "e:r", "direction": "receive", "delivery": "direct",
    ///     "startSequence": 1});
    /// let run = root_with_channels(json!(null), json!({"events": events}));
    /// let t = run_scripted(&[run], |ctx| async move {
    ///     let receiver = ctx.granted_receiver("events").ok_or("no events port")?;
    ///     Ok::<_, HandlerError>(RunResult::done(json!(receiver.endpoint())))
    /// });
    /// assert_eq!(t.root_result().unwrap()["output"], "e:r");
    /// ```
    pub fn endpoint(&self) -> &str {
        &self.grant.endpoint
    }

    /// The first sequence this reader sees.
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let events = json!({"endpoint": "e:r", "direction": "receive", "delivery": "direct",
    ///     "startSequence": 1});
    /// let run = root_with_channels(json!(null), json!({"events": events}));
    /// let t = run_scripted(&[run], |ctx| async move {
    ///     let receiver = ctx.granted_receiver("events").ok_or("no events port")?;
    ///     Ok::<_, HandlerError>(RunResult::done(json!(receiver.start_sequence())))
    /// });
    /// assert_eq!(t.root_result().unwrap()["output"], 1);
    /// ```
    pub fn start_sequence(&self) -> u64 {
        self.grant.start_sequence.unwrap_or(1)
    }

    /// Direct or broadcast.
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let events = json!({"endpoint": "e:r", "direction": "receive", "delivery": "direct",
    ///     "startSequence": 1});
    /// let run = root_with_channels(json!(null), json!({"events": events}));
    /// let t = run_scripted(&[run], |ctx| async move {
    ///     let receiver = ctx.granted_receiver("events").ok_or("no events port")?;
    ///     assert_eq!(receiver.delivery(), Delivery::Direct);
    ///     Ok::<_, HandlerError>(RunResult::done(json!(null)))
    /// });
    /// assert_eq!(t.status, EXIT_ANSWERED);
    /// ```
    pub fn delivery(&self) -> Delivery {
        self.grant.delivery
    }

    /// The next value, or `None` at the clean end. A failure (for example
    /// `LAGGED`) is sticky and settles the receiver: later reads report it
    /// again locally, nothing is sent for it unless the receiver is then
    /// released (the host already holds the cause), and it no longer counts
    /// as unfinished work. Only one read may be outstanding. Cancelling a
    /// read disposes the receiver.
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let events = json!({"endpoint": "e:r", "direction": "receive", "delivery": "direct",
    ///     "startSequence": 1});
    /// let run = root_with_channels(json!(null), json!({"events": events}));
    /// let script = [
    ///     run,
    ///     reply("component:1", json!({"item": {"sequence": 1, "value": "a"}})),
    ///     reply("component:2", json!({"end": {"lastSequence": 1}})),
    /// ];
    /// let t = run_scripted(&script, |ctx| async move {
    ///     let receiver = ctx.granted_receiver("events").ok_or("no events port")?;
    ///     let mut values = Vec::new();
    ///     while let Some(v) = receiver.next().await? {
    ///         values.push(v);
    ///     }
    ///     Ok::<_, HandlerError>(RunResult::done(json!(values)))
    /// });
    /// assert_eq!(t.root_result().unwrap()["output"], json!(["a"]));
    /// ```
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
            if admitted.is_ok()
                && let Some(s) = peer.receiver(&endpoint)
            {
                s.activated = true;
                s.reading = true;
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

    /// Disposes the receiver and reports how it finished. After a failed
    /// read this still sends one `channel/release` (closing the receiver is
    /// what the host peer expects to see) and accepts the host's answer,
    /// `Failed` with the cause it recorded, as the disposition, not as a
    /// new error: the read already reported that cause. A second release
    /// sends nothing and reports the same `Failed` status.
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let events = json!({"endpoint": "e:r", "direction": "receive", "delivery": "direct",
    ///     "startSequence": 1});
    /// let run = root_with_channels(json!(null), json!({"events": events}));
    /// let script = [run, reply("component:1", json!({"status": "ended", "lastSequence": 3}))];
    /// let t = run_scripted(&script, |ctx| async move {
    ///     let receiver = ctx.granted_receiver("events").ok_or("no events port")?;
    ///     let status = receiver.release().await?;
    ///     assert_eq!(status, ReleaseStatus::Ended { last_sequence: 3 });
    ///     Ok::<_, HandlerError>(RunResult::done(json!(null)))
    /// });
    /// assert_eq!(t.requests()[0]["params"], json!({"endpoint": "e:r"}));
    /// ```
    pub fn release(&self) -> Call<Result<ReleaseStatus, OperationError>> {
        let params = serde_json::json!({ "endpoint": self.grant.endpoint });
        if let Some(s) = self.peer.borrow_mut().receiver(&self.grant.endpoint) {
            // Released once already after its failed read: the disposition
            // is known, and a second release on the wire would be a
            // request for nothing.
            if let (Some(failure), true) = (&s.failure, s.disposed) {
                let status = ReleaseStatus::Failed {
                    code: failure.code,
                    details: failure.details.clone(),
                };
                return Call::ready(&self.peer, Ok(status));
            }
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
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let pair = json!({"send": {"endpoint": "c:w", "direction": "send", "delivery": "direct"},
    ///     "receive": {"endpoint": "c:r", "direction": "receive", "delivery": "direct", "startSequence": 1}});
    /// let t = run_scripted(&[root(json!(null)), reply("component:1", pair)], |ctx| async move {
    ///     let channel = ctx.channel(ChannelOptions::default()).await?;
    ///     let pair = channel.into_pair().ok_or("not direct")?;
    ///     Ok::<_, HandlerError>(RunResult::done(json!(pair.sender.endpoint())))
    /// });
    /// assert_eq!(t.requests()[0]["method"], "channel/create");
    /// assert_eq!(t.root_result().unwrap()["output"], "c:w");
    /// ```
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
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let events = json!({"endpoint": "e:w", "direction": "send", "delivery": "direct"});
    /// let run = root_with_channels(json!(null), json!({"events": events}));
    /// let t = run_scripted(&[run], |ctx| async move {
    ///     assert!(ctx.granted_receiver("events").is_none());
    ///     let sender = ctx.granted_sender("events").ok_or("no events port")?;
    ///     Ok::<_, HandlerError>(RunResult::done(json!(sender.endpoint())))
    /// });
    /// assert_eq!(t.root_result().unwrap()["output"], "e:w");
    /// ```
    pub fn granted_sender(&self, name: &str) -> Option<ChannelSender> {
        let grant = self.channels().get(name)?;
        (grant.direction == ChannelDirection::Send).then(|| ChannelSender {
            grant: grant.clone(),
            peer: self.peer.clone(),
        })
    }

    /// The receive endpoint the host granted under `name`, if any.
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let events = json!({"endpoint": "e:r", "direction": "receive", "delivery": "direct",
    ///     "startSequence": 1});
    /// let run = root_with_channels(json!(null), json!({"events": events}));
    /// let t = run_scripted(&[run], |ctx| async move {
    ///     let receiver = ctx.granted_receiver("events").ok_or("no events port")?;
    ///     Ok::<_, HandlerError>(RunResult::done(json!(receiver.endpoint())))
    /// });
    /// assert_eq!(t.root_result().unwrap()["output"], "e:r");
    /// ```
    pub fn granted_receiver(&self, name: &str) -> Option<ChannelReceiver> {
        let grant = self.channels().get(name)?;
        (grant.direction == ChannelDirection::Receive).then(|| ChannelReceiver {
            grant: grant.clone(),
            peer: self.peer.clone(),
        })
    }
}
