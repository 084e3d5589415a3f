//! Run SDK/1 for Rust: write a FLOW component that serves one root Run/1
//! invocation over stdio.
//!
//! The SDK owns protocol stdin and stdout, correlates calls, keeps at most 64
//! requests on the wire and 65,536 per channel, propagates cancellation and
//! refuses success when owned work was abandoned. It never exposes JSON-RPC
//! envelopes, transport IDs or pending tables, and it never invents an
//! `operationId`. It has no threads and no timers, so the same code runs on
//! native targets and on `wasm32-wasip1`.
//!
//! # Calls and ownership
//!
//! `run_child_flow`, `call_capability` and the channel operations return a
//! [`Call`] that is admitted immediately (like a started promise): await it
//! for the result. To stop waiting on purpose, call [`Call::cancel`]; the
//! SDK sends `request/cancel` and settles the wire request internally before
//! the root answers. Dropping an unsettled call *without* cancelling it, or
//! returning while an activated channel receiver is unfinished, abandons
//! owned work and the root fails `EXECUTION_FAILED`.
//!
//! Handler errors: an [`OperationError`] (or a [`CallError::Operation`])
//! with a wire-visible code keeps its code; any other error, a panic, or a
//! local-only code becomes `EXECUTION_FAILED`; an invalid result becomes
//! `INVALID_RESULT`; root cancellation always answers `CANCELLED`.
//!
//! # wasm32-wasip1
//!
//! The same code builds for `wasm32-wasip1`. There fd 1 cannot be moved, so
//! write diagnostics with `eprintln!` only, and panics abort the instance
//! (no unwinding), which the host sees as a failed process.
//!
//! ```no_run
//! use flow_sdk::{handle, HandlerError, RunContext, RunResult};
//!
//! async fn run(ctx: RunContext) -> Result<RunResult, HandlerError> {
//!     Ok(RunResult::done(ctx.input().clone()))
//! }
//!
//! fn main() {
//!     handle(run)
//! }
//! ```

mod channel;
mod checkpoint;
mod context;
mod error;
mod peer;
mod run;
mod stdio;
pub mod testing;

pub use channel::{
    Channel, ChannelBroadcast, ChannelOptions, ChannelPair, ChannelReceiver, ChannelSender,
};
pub use checkpoint::{CheckpointReceipt, CheckpointSave};
pub use context::{
    Call, Cancelled, CapabilityCall, CapabilityCallFuture, ChildFlowCall, ChildFlowRequest,
    RunContext,
};
pub use error::{CallError, CapabilityError, HandlerError, OperationError};
pub use flow::json::Value;
pub use flow::wire::{
    Access, Attachment, ChannelContractIdentity, ChannelGrant, Delivery, ErrorCode, ReleaseStatus,
    RunResult,
};
pub use run::{EXIT_ANSWERED, EXIT_UNANSWERED, handle, serve};
