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
mod context;
mod error;
mod peer;
mod run;
mod stdio;

pub use channel::{
    Channel, ChannelBroadcast, ChannelOptions, ChannelPair, ChannelReceiver, ChannelSender,
};
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
pub use run::{handle, serve, EXIT_ANSWERED, EXIT_UNANSWERED};
