//! The Rust mirror of `jig_provider.h`: the ABI version, the status codes
//! and the host table of one call.
//!
//! One definition serves both sides of the boundary: this crate (the host
//! loader) declares it as a module, and `jig-provider-sdk` (the guest side)
//! includes this same file by path, so the two cannot drift apart. It must
//! therefore stay plain `std` Rust with no crate-specific imports.

use std::ffi::c_void;

/// The C ABI version (`JIG_PROVIDER_ABI_VERSION`); either side refuses any
/// other.
pub const ABI_VERSION: u32 = 2;

/// `JIG_PROVIDER_OK`: the out-buffer holds the JSON answer.
pub const STATUS_OK: i32 = 0;
/// `JIG_PROVIDER_PANICKED`: the provider failed; the out-buffer holds a
/// UTF-8 message or is empty.
pub const STATUS_PANICKED: i32 = 1;
/// `JIG_PROVIDER_BAD_REQUEST`: the request bytes were not a request; the
/// out-buffer holds a UTF-8 message or is empty.
pub const STATUS_BAD_REQUEST: i32 = 2;

/// `JIG_CHANNEL_OK`: a host channel function settled; `out` holds its
/// answer (or is null).
pub const CHANNEL_OK: i32 = 0;
/// `JIG_CHANNEL_FAILED`: a host channel function failed; `out` holds
/// `{"code", "message"}`.
pub const CHANNEL_FAILED: i32 = 1;

/// `send(context, port, len, value, len, out, out_len)`.
type SendFn = unsafe extern "C" fn(
    *const c_void,
    *const u8,
    usize,
    *const u8,
    usize,
    *mut *mut u8,
    *mut usize,
) -> i32;
/// `next` and `close`: `(context, port, len, out, out_len)`.
type PortFn =
    unsafe extern "C" fn(*const c_void, *const u8, usize, *mut *mut u8, *mut usize) -> i32;
/// `free(context, ptr, len)`: releases a buffer the host handed out.
type HostFreeFn = unsafe extern "C" fn(*const c_void, *mut u8, usize);

/// `jig_provider_host`: the host's channel functions for one call, valid
/// until `jig_provider_call` returns. `context` is passed back unchanged.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct HostTable {
    pub(crate) context: *const c_void,
    pub(crate) send: SendFn,
    pub(crate) next: PortFn,
    pub(crate) close: PortFn,
    pub(crate) free: HostFreeFn,
}
