//! One running component's share of the host: [`InvocationServices`] (its
//! package, resolved target, deadline, cancellation, channels and the root
//! Run it saves for) and its [`Activity`], with the slots that bound its
//! child Flows and effects. What it serves over Run/1 is `services`'; the
//! builtins borrow it through `builtin::BuiltinCall`.

use std::collections::BTreeMap;
use std::sync::Arc;

use flow::package::Package;
use flow::wire::{ErrorCode, OperationalError};
use jig_provider_api::CallError;
use tokio::sync::watch;

use super::builtin::checkpoint::RootRun;
use super::{channels, Executor, Resolved, MAX_ACTIVE_CHILDREN};

/// What one running component may ask of its host.
pub(super) struct InvocationServices {
    /// This value itself, for the builtin calls that outlive `&self`.
    pub(super) me: std::sync::Weak<InvocationServices>,
    pub(super) executor: Arc<Executor>,
    pub(super) resolved: Arc<Resolved>,
    pub(super) package: Arc<Package>,
    pub(super) deadline_unix_ms: u64,
    pub(super) cancel: watch::Receiver<bool>,
    /// Its active child Flows and effects (seed 002 §8).
    pub(super) activity: Arc<std::sync::Mutex<Activity>>,
    pub(super) broker: Arc<channels::Broker>,
    /// This invocation's identity in the tree's channel broker.
    pub(super) holder: channels::HolderId,
    /// The channel endpoints granted in `flow/run`.
    pub(super) grants: BTreeMap<String, flow::wire::ChannelGrant>,
    /// The root Run Run Checkpoint saves for (none for a child).
    pub(super) run: Option<Arc<RootRun>>,
}

/// What an invocation has in flight (seed 002 §8): the root permits two
/// active sibling Flow calls or one exclusive Agent or command effect; a
/// leaf (which has no slots) one effect. Run Checkpoint is served from its
/// own control capacity and does not count here.
#[derive(Debug, Default)]
pub(super) struct Activity {
    pub(super) children: usize,
    pub(super) effect: bool,
}

/// One active child Flow call, released on drop.
pub(super) struct ChildSlot(pub(super) Arc<std::sync::Mutex<Activity>>);

impl ChildSlot {
    pub(super) fn take(
        activity: &Arc<std::sync::Mutex<Activity>>,
    ) -> Result<ChildSlot, OperationalError> {
        let mut a = activity.lock().unwrap_or_else(|e| e.into_inner());
        if a.effect {
            return Err(OperationalError::new(
                ErrorCode::ResourceExhausted,
                "an exclusive Agent or command effect is active",
            ));
        }
        if a.children >= MAX_ACTIVE_CHILDREN {
            return Err(OperationalError::new(
                ErrorCode::ResourceExhausted,
                "two sibling Flow calls are already active",
            ));
        }
        a.children += 1;
        Ok(ChildSlot(activity.clone()))
    }
}

impl Drop for ChildSlot {
    fn drop(&mut self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).children -= 1;
    }
}

/// The one active exclusive effect (an Agent or command call), released on
/// drop. Refused `RESOURCE_EXHAUSTED` before dispatch while another effect
/// or any child Flow call is active.
pub(crate) struct EffectSlot(pub(super) Arc<std::sync::Mutex<Activity>>);

#[allow(dead_code)]
impl EffectSlot {
    pub(super) fn take(
        activity: &Arc<std::sync::Mutex<Activity>>,
    ) -> Result<EffectSlot, CallError> {
        let mut a = activity.lock().unwrap_or_else(|e| e.into_inner());
        if a.effect || a.children > 0 {
            return Err(CallError::operational(
                "RESOURCE_EXHAUSTED",
                "another effect or a child Flow call is active; an Agent or command effect is exclusive",
            ));
        }
        a.effect = true;
        Ok(EffectSlot(activity.clone()))
    }
}

impl Drop for EffectSlot {
    fn drop(&mut self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).effect = false;
    }
}
