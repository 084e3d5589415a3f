//! Run/1 on the wire: LF-terminated frames, JSON-RPC 2.0 envelopes, request
//! IDs, the per-direction method table, error codes and the typed params and
//! results of every Run/1 method.
//!
//! Everything here is sans-IO: bytes in, values out. The same code serves the
//! synchronous SDK and the asynchronous host peer. Protocol *state* (which IDs
//! are pending, whether the root has answered) belongs to the peers, not here.

/// Most bytes in one frame before its LF (inclusive).
pub const MAX_FRAME_BYTES: usize = 16_777_216;
/// Most bytes in one request ID, operation ID or endpoint reference.
pub const MAX_ID_BYTES: usize = 128;
/// Most bytes in one `LocalName` (slot, method, outcome, error name).
pub const MAX_LOCAL_NAME_BYTES: usize = 64;
/// Most Unicode scalar values in a child-Flow `intent`.
pub const MAX_INTENT_CHARS: usize = 16_384;
/// Most Unicode scalar values in a JSON-RPC error `message`.
pub const MAX_ERROR_MESSAGE_CHARS: usize = 1_024;
/// Most named attachments in one Run.
pub const MAX_ATTACHMENTS: usize = 256;
/// Most entries in one channel grant or reference map.
pub const MAX_CHANNELS: usize = 256;
/// Most component-originated requests awaiting responses at once.
pub const MAX_PENDING_REQUESTS: usize = 64;
/// Most request-form messages one sender may originate on one channel.
pub const MAX_LIFETIME_REQUESTS: u64 = 65_536;
/// Most bytes in a package-local channel contract reference.
pub const MAX_CONTRACT_REF_BYTES: usize = 4_096;
/// Largest JSON/1 safe integer (`deadlineUnixMs`, sequences).
pub const MAX_SAFE_INTEGER: u64 = 9_007_199_254_740_991;

/// The literal `protocol` value of `flow/run`.
pub const PROTOCOL: &str = "run/1";
/// The JSON-RPC version literal.
pub const JSONRPC: &str = "2.0";

/// JSON-RPC parse error.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC invalid request (envelope).
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC method not found (including wrong direction).
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC invalid params.
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC internal error.
pub const INTERNAL_ERROR: i64 = -32603;
/// JSON-RPC code carrying every Run/1 operational error.
pub const OPERATIONAL_ERROR: i64 = -32000;

mod errors;
mod frame;
mod message;
mod method;
mod params;
#[cfg(test)]
mod tests;

pub use errors::*;
pub use frame::*;
pub use message::*;
pub use method::*;
pub use params::*;

// ---------------------------------------------------------------------------
// Names and IDs

/// Whether `s` is a request ID / operation ID / endpoint token:
/// `[A-Za-z0-9][A-Za-z0-9._:/-]*`, 1–128 bytes.
pub fn is_wire_id(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_ID_BYTES
        && b[0].is_ascii_alphanumeric()
        && b[1..]
            .iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b':' | b'/' | b'-'))
}

/// Whether `s` is a `LocalName`: `[a-z0-9]+(?:-[a-z0-9]+)*`, 1–64 bytes.
pub fn is_local_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_LOCAL_NAME_BYTES
        && b.split(|&c| c == b'-').all(|part| {
            !part.is_empty()
                && part
                    .iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        })
}
