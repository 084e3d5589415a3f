//! Loads capability providers built as native shared libraries exporting
//! the C ABI of `providers/native/jig_provider.h`, and calls them.
//!
//! A library is loaded once and never unloaded (its code may be running on
//! another thread, and unloading Rust or C++ libraries is rarely sound).
//! Native providers are trusted code chosen by the operator: they run in the
//! host process and cannot be interrupted. This crate must still never
//! trust what they return: every buffer is validated as JSON/1 and judged
//! against the contract before it reaches the caller.
//!
//! Since ABI version 2 a call also receives a table of host functions
//! (`HostTable`, defined with the rest of the ABI in `src/abi.rs`, which the
//! guest SDK includes too) that reach the call's [`ChannelPorts`]; the table
//! and its context are valid only until `jig_provider_call` returns.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::Arc;

use jig_provider_api::dispatch::{self, Admitted, ContractSet};
use jig_provider_api::{
    CallContext, CallError, ChannelPorts, LoadError, Provider, ProviderDecl, ProviderKind,
    ServedContract,
};
use serde_json::{json, Value};

mod abi;

use abi::{HostTable, STATUS_BAD_REQUEST, STATUS_OK, STATUS_PANICKED};
pub use abi::{ABI_VERSION, CHANNEL_FAILED, CHANNEL_OK};

type AbiVersionFn = unsafe extern "C" fn() -> u32;
type ContractsFn = unsafe extern "C" fn(*mut *mut u8, *mut usize) -> i32;
type CallFn =
    unsafe extern "C" fn(*const u8, usize, *const HostTable, *mut *mut u8, *mut usize) -> i32;
type FreeFn = unsafe extern "C" fn(*mut u8, usize);

/// The entry points of a loaded library. The library itself is leaked, so
/// these pointers stay valid for the life of the process.
#[derive(Clone, Copy)]
struct Entry {
    contracts: ContractsFn,
    call: CallFn,
    free: FreeFn,
}

impl Entry {
    /// Resolves the entry points after checking the ABI version.
    fn open(
        path: &Path,
        fail: &dyn Fn(String) -> LoadError,
        mismatch: &dyn Fn(u32) -> LoadError,
    ) -> Result<Entry, LoadError> {
        // SAFETY: loading runs the library's initialisers. The operator
        // chose this library as trusted code; that is the contract of a
        // native provider.
        let library = unsafe { libloading::Library::new(path) }.map_err(|e| fail(e.to_string()))?;
        let library: &'static libloading::Library = Box::leak(Box::new(library));
        // SAFETY (all lookups): the types are those of jig_provider.h; a
        // library exporting these names with other types breaks the ABI it
        // claims by its version.
        let version: AbiVersionFn =
            unsafe { symbol(library, b"jig_provider_abi_version\0") }.map_err(fail)?;
        let found = unsafe { version() };
        if found != ABI_VERSION {
            return Err(mismatch(found));
        }
        Ok(Entry {
            contracts: unsafe { symbol(library, b"jig_provider_contracts\0") }.map_err(fail)?,
            call: unsafe { symbol(library, b"jig_provider_call\0") }.map_err(fail)?,
            free: unsafe { symbol(library, b"jig_provider_free\0") }.map_err(fail)?,
        })
    }

    /// Runs one out-buffer function and copies its answer out, releasing
    /// the library's buffer.
    fn answer(&self, call: impl FnOnce(*mut *mut u8, *mut usize) -> i32) -> (i32, Vec<u8>) {
        let mut ptr: *mut u8 = std::ptr::null_mut();
        let mut len: usize = 0;
        let status = call(&mut ptr, &mut len);
        if ptr.is_null() {
            return (status, Vec::new());
        }
        // SAFETY: the ABI says ptr/len describe a buffer the library owns
        // until we free it, exactly once, below.
        let bytes = unsafe { std::slice::from_raw_parts(ptr, len) }.to_vec();
        unsafe { (self.free)(ptr, len) };
        (status, bytes)
    }
}

/// # Safety
/// `T` must be the function-pointer type the symbol really has.
unsafe fn symbol<T: Copy>(library: &'static libloading::Library, name: &[u8]) -> Result<T, String> {
    let printable = String::from_utf8_lossy(&name[..name.len() - 1]).into_owned();
    unsafe { library.get::<T>(name) }
        .map(|s| *s)
        .map_err(|e| format!("missing symbol {printable}: {e}"))
}

/// A loaded native provider.
pub struct NativeProvider {
    name: String,
    contracts: ContractSet,
    entry: Entry,
    /// `,"settings":{...},"secrets":{...}}`: the request's configuration
    /// members, rendered once at load time.
    request_tail: Vec<u8>,
    artifact_digest: String,
}

impl NativeProvider {
    /// Loads the library named by `decl` (once; it is never unloaded),
    /// checks its ABI version, reads its secrets, and asks it which
    /// contracts it serves.
    pub fn load(decl: &ProviderDecl) -> Result<Arc<dyn Provider>, LoadError> {
        let path = decl.artifact(ProviderKind::Native)?;
        let config = decl.config()?;
        let fail = |reason: String| LoadError::LoadFailed {
            provider: decl.name.clone(),
            path: path.to_owned(),
            reason,
        };
        let mismatch = |found: u32| LoadError::AbiMismatch {
            provider: decl.name.clone(),
            path: path.to_owned(),
            found,
            expected: ABI_VERSION,
        };
        // The digest is of the file as read just before loading; the
        // operator owns the path, so it is not expected to change between.
        let bytes = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
        let artifact_digest = jig_provider_api::artifact_digest(&bytes);
        drop(bytes);
        let entry = Entry::open(path, &fail, &mismatch)?;

        // SAFETY: the signature is jig_provider.h's; the out-pointers are live.
        let (status, bytes) = entry.answer(|ptr, len| unsafe { (entry.contracts)(ptr, len) });
        if status != STATUS_OK {
            return Err(fail(format!(
                "jig_provider_contracts failed with status {status}"
            )));
        }
        let descriptors = match dispatch::json(&bytes) {
            Ok(Value::Array(descriptors)) => descriptors,
            _ => {
                return Err(fail(
                    "jig_provider_contracts did not return a JSON/1 array".to_owned(),
                ))
            }
        };
        let contracts = ContractSet::from_descriptor_values(&decl.name, &descriptors)?;

        let secrets: serde_json::Map<String, Value> = config
            .secrets
            .iter()
            .map(|(name, value)| (name.to_owned(), Value::String(value.to_owned())))
            .collect();
        let mut request_tail = b",\"settings\":".to_vec();
        request_tail.extend(config.settings_text().into_bytes());
        request_tail.extend(b",\"secrets\":");
        request_tail.extend(Value::Object(secrets).to_string().into_bytes());
        request_tail.push(b'}');

        Ok(Arc::new(NativeProvider {
            name: decl.name.clone(),
            contracts,
            entry,
            request_tail,
            artifact_digest,
        }))
    }

    fn request(
        &self,
        ctx: &CallContext,
        method: &str,
        input: &Value,
        ports: &dyn ChannelPorts,
    ) -> Vec<u8> {
        let ports: Vec<Value> = ports
            .ports()
            .iter()
            .map(|p| json!({ "name": p.name, "direction": p.direction.as_str() }))
            .collect();
        let context = json!({
            "contractId": ctx.contract.id,
            "contractVersion": ctx.contract.version,
            "contractDigest": ctx.contract.digest,
            "operationId": ctx.operation_id,
            "deadlineUnixMs": ctx.deadline_unix_ms,
            "ports": ports,
        });
        let mut request = b"{\"context\":".to_vec();
        request.extend(context.to_string().into_bytes());
        request.extend(b",\"method\":");
        request.extend(Value::String(method.to_owned()).to_string().into_bytes());
        request.extend(b",\"input\":");
        request.extend(input.to_string().into_bytes());
        request.extend(&self.request_tail);
        request
    }
}

impl Provider for NativeProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn contracts(&self) -> &[ServedContract] {
        self.contracts.served()
    }

    fn call(
        &self,
        ctx: &CallContext,
        method: &str,
        input: &Value,
        ports: Arc<dyn ChannelPorts>,
    ) -> Result<Value, CallError> {
        let admitted = self.contracts.admit(ctx, method, input)?;
        let request = self.request(ctx, method, input, ports.as_ref());
        let host = HostTable::new(&ports);
        // SAFETY: the signature is jig_provider.h's; the request buffer,
        // the host table (and the ports it points to) and the out-pointers
        // outlive the call.
        let (status, bytes) = self.entry.answer(|ptr, len| unsafe {
            (self.entry.call)(request.as_ptr(), request.len(), &host, ptr, len)
        });
        match status {
            STATUS_OK => decode_response(&admitted, &bytes),
            STATUS_PANICKED => Err(CallError::operational(
                "EXECUTION_FAILED",
                "native provider failed (panicked)",
            )),
            STATUS_BAD_REQUEST => Err(CallError::operational(
                "EXECUTION_FAILED",
                "native provider could not decode the request",
            )),
            other => Err(CallError::operational(
                "EXECUTION_FAILED",
                format!("native provider returned unknown status {other}"),
            )),
        }
    }

    fn artifact_digest(&self) -> Option<&str> {
        Some(&self.artifact_digest)
    }
}

/// Decodes the response envelope: exactly one of `value`, `error`,
/// `operational`.
fn decode_response(admitted: &Admitted<'_>, bytes: &[u8]) -> Result<Value, CallError> {
    let invalid = |what: &str| dispatch::invalid_result(what.to_owned());
    let Value::Object(mut envelope) = dispatch::json(bytes)? else {
        return Err(invalid("response is not an object"));
    };
    if envelope.len() != 1 {
        return Err(invalid("response must have exactly one member"));
    }
    if let Some(value) = envelope.remove("value") {
        return admitted.output(value);
    }
    if let Some(Value::Object(mut error)) = envelope.remove("error") {
        let (Some(Value::String(name)), Some(data), true) =
            (error.remove("name"), error.remove("data"), error.is_empty())
        else {
            return Err(invalid("error must be exactly {name, data}"));
        };
        return Err(admitted.application(&name, data));
    }
    if let Some(Value::Object(mut error)) = envelope.remove("operational") {
        let details = error.remove("details");
        let (Some(Value::String(code)), Some(Value::String(message)), true) = (
            error.remove("code"),
            error.remove("message"),
            error.is_empty(),
        ) else {
            return Err(invalid(
                "operational must be exactly {code, message, details?}",
            ));
        };
        return Err(admitted.operational(&code, message, details));
    }
    Err(invalid(
        "response member must be value, error or operational",
    ))
}

impl HostTable {
    /// The host table of one call: `context` points at the call's
    /// `Arc<dyn ChannelPorts>`.
    fn new(ports: &Arc<dyn ChannelPorts>) -> HostTable {
        HostTable {
            context: ports as *const Arc<dyn ChannelPorts> as *const c_void,
            send: host_send,
            next: host_next,
            close: host_close,
            free: host_free,
        }
    }
}

/// Runs one host channel operation for the library: decodes the port name,
/// catches a panic of the ports implementation, and hands the answer out.
///
/// # Safety
/// `context` is a live `HostTable::context`; `port_ptr`/`port_len` are
/// readable; `out_ptr`/`out_len` are writable.
unsafe fn host_op(
    context: *const c_void,
    port_ptr: *const u8,
    port_len: usize,
    out_ptr: *mut *mut u8,
    out_len: *mut usize,
    op: impl FnOnce(&dyn ChannelPorts, &str) -> Result<Option<Value>, CallError>,
) -> i32 {
    let ports = unsafe { &*(context as *const Arc<dyn ChannelPorts>) };
    let port = if port_ptr.is_null() {
        Ok("")
    } else {
        std::str::from_utf8(unsafe { std::slice::from_raw_parts(port_ptr, port_len) })
    };
    let outcome = match port {
        Err(_) => Err(CallError::operational(
            "INVALID_INPUT",
            "the port name is not UTF-8",
        )),
        Ok(port) => {
            catch_unwind(AssertUnwindSafe(|| op(ports.as_ref(), port))).unwrap_or_else(|_| {
                Err(CallError::operational(
                    "EXECUTION_FAILED",
                    "the host's channel operation failed",
                ))
            })
        }
    };
    let (status, answer) = match outcome {
        Ok(answer) => (CHANNEL_OK, answer),
        Err(error) => {
            let (code, message) = match error {
                CallError::Operational { code, message, .. } => (code, message),
                CallError::Application { name, .. } => (
                    "EXECUTION_FAILED".to_owned(),
                    format!("channel failed: {name}"),
                ),
            };
            (
                CHANNEL_FAILED,
                Some(json!({ "code": code, "message": message })),
            )
        }
    };
    let bytes = answer.map(|v| v.to_string().into_bytes().into_boxed_slice());
    unsafe {
        match bytes {
            Some(bytes) => {
                *out_len = bytes.len();
                *out_ptr = Box::into_raw(bytes) as *mut u8;
            }
            None => {
                *out_len = 0;
                *out_ptr = std::ptr::null_mut();
            }
        }
    }
    status
}

/// The item a library sends, as JSON/1 text.
fn item(value_ptr: *const u8, value_len: usize) -> Result<Value, CallError> {
    let bytes = if value_ptr.is_null() {
        &[][..]
    } else {
        // SAFETY: the ABI says value_ptr/value_len are readable for the call.
        unsafe { std::slice::from_raw_parts(value_ptr, value_len) }
    };
    dispatch::json(bytes).map_err(|e| {
        CallError::operational("INVALID_INPUT", format!("the item is not JSON/1: {e}"))
    })
}

unsafe extern "C" fn host_send(
    context: *const c_void,
    port_ptr: *const u8,
    port_len: usize,
    value_ptr: *const u8,
    value_len: usize,
    out_ptr: *mut *mut u8,
    out_len: *mut usize,
) -> i32 {
    unsafe {
        host_op(
            context,
            port_ptr,
            port_len,
            out_ptr,
            out_len,
            |ports, port| ports.send(port, item(value_ptr, value_len)?).map(|()| None),
        )
    }
}

unsafe extern "C" fn host_next(
    context: *const c_void,
    port_ptr: *const u8,
    port_len: usize,
    out_ptr: *mut *mut u8,
    out_len: *mut usize,
) -> i32 {
    unsafe {
        host_op(
            context,
            port_ptr,
            port_len,
            out_ptr,
            out_len,
            |ports, port| {
                Ok(Some(match ports.next(port)? {
                    Some(item) => {
                        json!({ "item": { "sequence": item.sequence, "value": item.value } })
                    }
                    None => json!({ "end": true }),
                }))
            },
        )
    }
}

unsafe extern "C" fn host_close(
    context: *const c_void,
    port_ptr: *const u8,
    port_len: usize,
    out_ptr: *mut *mut u8,
    out_len: *mut usize,
) -> i32 {
    unsafe {
        host_op(
            context,
            port_ptr,
            port_len,
            out_ptr,
            out_len,
            |ports, port| ports.close(port).map(|()| None),
        )
    }
}

unsafe extern "C" fn host_free(_: *const c_void, ptr: *mut u8, len: usize) {
    if !ptr.is_null() {
        // SAFETY: ptr/len came from Box::into_raw of a boxed slice in host_op.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)) });
    }
}
