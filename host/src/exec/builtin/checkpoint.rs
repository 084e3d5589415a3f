//! Run Checkpoint (HOST-FACTS §3), served for a Run.

use flow::json::Value;
use jig_provider_api::CallError;

use super::BuiltinCall;
use crate::exec::peer::BoxFuture;

pub(super) fn call(_call: BuiltinCall) -> BoxFuture<Result<Value, CallError>> {
    Box::pin(async move {
        Err(CallError::operational(
            "UNAVAILABLE",
            "this builtin capability is not served by this build yet",
        ))
    })
}
