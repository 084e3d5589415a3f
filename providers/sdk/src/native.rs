//! The guest side of the native C ABI (`providers/native/jig_provider.h`).
//!
//! Every buffer crossing the boundary is UTF-8 JSON. The request is
//!
//! ```json
//! {"context": {"contractId": "...", "contractVersion": "...", "contractDigest": "...",
//!              "operationId": "...", "deadlineUnixMs": 0,
//!              "ports": [{"name": "events", "direction": "send"}]},
//!  "method": "get", "input": {}, "settings": {}, "secrets": {"name": "value"}}
//! ```
//!
//! and the response is exactly one of `{"value": v}`,
//! `{"error": {"name": n, "data": d}}` or
//! `{"operational": {"code": c, "message": m, "details": d}}` (`details`
//! optional). The call's channel ports are reached through the host's
//! [`HostTable`]. These functions are what [`crate::export_provider!`]
//! exports; they are public only so the macro can reach them.

use std::panic::{catch_unwind, AssertUnwindSafe};

use serde_json::{json, Map, Value};

use crate::channels::Link;
use crate::port::{Direction, Port};
use crate::{CallError, Channels, Config, Context, Provider};

pub use crate::abi::{
    HostTable, ABI_VERSION, CHANNEL_FAILED, CHANNEL_OK, STATUS_BAD_REQUEST, STATUS_OK,
    STATUS_PANICKED,
};

/// `jig_provider_contracts`: a JSON array of the descriptors, each embedded
/// byte-for-byte as the provider wrote it.
///
/// # Safety
/// `out_ptr` and `out_len` must be valid for writes.
pub unsafe fn contracts<P: Provider>(out_ptr: *mut *mut u8, out_len: *mut usize) -> i32 {
    let answer = catch_unwind(|| {
        let texts = P::contracts();
        let mut out = String::from("[");
        for (i, text) in texts.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(text);
        }
        out.push(']');
        out.into_bytes()
    });
    match answer {
        Ok(bytes) => unsafe { hand_out(bytes, STATUS_OK, out_ptr, out_len) },
        Err(payload) => unsafe { hand_out(panic_text(payload), STATUS_PANICKED, out_ptr, out_len) },
    }
}

/// `jig_provider_call`: decodes the request, calls the provider with panics
/// caught, and encodes its answer.
///
/// # Safety
/// `req_ptr` must point to `req_len` readable bytes (or be null with
/// `req_len == 0`); `host` must be null or a host table live until this
/// returns; `out_ptr` and `out_len` must be valid for writes.
pub unsafe fn call<P: Provider>(
    req_ptr: *const u8,
    req_len: usize,
    host: *const HostTable,
    out_ptr: *mut *mut u8,
    out_len: *mut usize,
) -> i32 {
    let request: &[u8] = if req_ptr.is_null() {
        &[]
    } else {
        unsafe { std::slice::from_raw_parts(req_ptr, req_len) }
    };
    let (ctx, method, input, config, ports) = match decode_request(request) {
        Ok(parts) => parts,
        Err(why) => {
            return unsafe { hand_out(why.into_bytes(), STATUS_BAD_REQUEST, out_ptr, out_len) }
        }
    };
    let link = match unsafe { host.as_ref() } {
        Some(table) => Link::Native(*table),
        None => Link::Detached,
    };
    let channels = Channels::new(ports, link);
    let answer = catch_unwind(AssertUnwindSafe(|| {
        encode_response(P::call(&ctx, &method, input, &config, &channels))
    }));
    match answer {
        Ok(bytes) => unsafe { hand_out(bytes, STATUS_OK, out_ptr, out_len) },
        Err(payload) => unsafe { hand_out(panic_text(payload), STATUS_PANICKED, out_ptr, out_len) },
    }
}

/// `jig_provider_free`: releases a buffer this library handed out.
///
/// # Safety
/// `ptr`/`len` must be exactly a buffer returned by this library, freed once.
pub unsafe fn free(ptr: *mut u8, len: usize) {
    if !ptr.is_null() {
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)) });
    }
}

/// The parts of a request: context, method, input, configuration and the
/// connected channel ports.
pub type Request = (Context, String, Value, Config, Vec<Port>);

/// Decodes a request buffer into its parts.
pub fn decode_request(bytes: &[u8]) -> Result<Request, String> {
    let Value::Object(mut request) =
        serde_json::from_slice(bytes).map_err(|e| format!("request is not JSON: {e}"))?
    else {
        return Err("request is not an object".to_owned());
    };
    let context = request.remove("context").unwrap_or(Value::Null);
    let text = |key: &str| {
        context
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| format!("context.{key} is missing"))
    };
    let ctx = Context {
        contract_id: text("contractId")?,
        contract_version: text("contractVersion")?,
        contract_digest: text("contractDigest")?,
        operation_id: text("operationId")?,
        deadline_unix_ms: context
            .get("deadlineUnixMs")
            .and_then(Value::as_u64)
            .ok_or("context.deadlineUnixMs is missing")?,
    };
    let mut ports = Vec::new();
    if let Some(list) = context.get("ports") {
        for port in list.as_array().ok_or("context.ports must be an array")? {
            let name = port.get("name").and_then(Value::as_str);
            let direction = match port.get("direction").and_then(Value::as_str) {
                Some("send") => Some(Direction::Send),
                Some("receive") => Some(Direction::Receive),
                _ => None,
            };
            let (Some(name), Some(direction)) = (name, direction) else {
                return Err("context.ports holds a malformed port".to_owned());
            };
            ports.push(Port {
                name: name.to_owned(),
                direction,
            });
        }
    }
    let method = match request.remove("method") {
        Some(Value::String(method)) => method,
        _ => return Err("method is missing".to_owned()),
    };
    let input = request.remove("input").ok_or("input is missing")?;
    let settings = request.remove("settings").unwrap_or_else(|| json!({}));
    let mut secrets = std::collections::BTreeMap::new();
    if let Some(Value::Object(map)) = request.remove("secrets") {
        for (name, value) in map {
            let Value::String(value) = value else {
                return Err("secret values must be strings".to_owned());
            };
            secrets.insert(name, value);
        }
    }
    Ok((ctx, method, input, Config { settings, secrets }, ports))
}

/// Encodes a provider's answer as the response envelope.
pub fn encode_response(answer: Result<Value, CallError>) -> Vec<u8> {
    let envelope = match answer {
        Ok(value) => json!({ "value": value }),
        Err(CallError::Application { name, data }) => {
            json!({ "error": { "name": name, "data": data } })
        }
        Err(CallError::Operational {
            code,
            message,
            details,
        }) => {
            let mut error = Map::new();
            error.insert("code".to_owned(), Value::String(code));
            error.insert("message".to_owned(), Value::String(message));
            if let Some(details) = details {
                error.insert("details".to_owned(), details);
            }
            json!({ "operational": error })
        }
    };
    envelope.to_string().into_bytes()
}

fn panic_text(payload: Box<dyn std::any::Any + Send>) -> Vec<u8> {
    let text = if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "provider panicked".to_owned()
    };
    text.into_bytes()
}

unsafe fn hand_out(bytes: Vec<u8>, status: i32, out_ptr: *mut *mut u8, out_len: *mut usize) -> i32 {
    let buffer = Box::into_raw(bytes.into_boxed_slice());
    unsafe {
        *out_len = buffer.len();
        *out_ptr = buffer as *mut u8;
    }
    status
}

#[cfg(test)]
mod tests {
    use std::ffi::c_void;

    use super::*;

    struct Panicky;

    impl Provider for Panicky {
        fn contracts() -> Vec<&'static str> {
            vec![r#"{"a":1}"#, r#"{"b":2}"#]
        }
        fn call(
            _: &Context,
            method: &str,
            input: Value,
            config: &Config,
            channels: &Channels,
        ) -> Result<Value, CallError> {
            match method {
                "relay" => {
                    // Reads every item of `in`, sends each to `out`.
                    let mut seen = Vec::new();
                    while let Some(item) = channels.next("in")? {
                        channels.send("out", &item.value)?;
                        seen.push(item.sequence);
                    }
                    channels.close("out")?;
                    Ok(json!({"sequences": seen, "ports": channels.ports().len()}))
                }
                "echo" => Ok(json!({"input": input, "settings": config.settings.clone(),
                    "secret": config.secrets.get("token")})),
                "fail" => Err(CallError::application("not-found", json!({"key": "k"}))),
                _ => panic!("boom {method}"),
            }
        }
    }

    fn request(method: &str) -> Vec<u8> {
        json!({
            "context": {"contractId": "https://example.org/c", "contractVersion": "1.0.0",
                "contractDigest": "sha256:00", "operationId": "op", "deadlineUnixMs": 5},
            "method": method, "input": {"x": 1}, "settings": {"s": true},
            "secrets": {"token": "t0k"}
        })
        .to_string()
        .into_bytes()
    }

    fn run(req: &[u8]) -> (i32, String) {
        let (mut ptr, mut len) = (std::ptr::null_mut(), 0usize);
        let status = unsafe {
            call::<Panicky>(
                req.as_ptr(),
                req.len(),
                std::ptr::null(),
                &mut ptr,
                &mut len,
            )
        };
        let text =
            unsafe { String::from_utf8(std::slice::from_raw_parts(ptr, len).to_vec()).unwrap() };
        unsafe { free(ptr, len) };
        (status, text)
    }

    #[test]
    fn call_round_trips_through_the_envelope() {
        let (status, text) = run(&request("echo"));
        assert_eq!(status, STATUS_OK);
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            value,
            json!({"value": {"input": {"x": 1}, "settings": {"s": true}, "secret": "t0k"}})
        );
        let (status, text) = run(&request("fail"));
        assert_eq!(status, STATUS_OK);
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            value,
            json!({"error": {"name": "not-found", "data": {"key": "k"}}})
        );
    }

    #[test]
    fn panic_is_caught_and_reported() {
        let (status, text) = run(&request("other"));
        assert_eq!(status, STATUS_PANICKED);
        assert_eq!(text, "boom other");
    }

    #[test]
    fn malformed_request_is_reported() {
        let (status, _) = run(b"[1]");
        assert_eq!(status, STATUS_BAD_REQUEST);
        let (status, _) = run(b"");
        assert_eq!(status, STATUS_BAD_REQUEST);
    }

    #[test]
    fn contracts_are_embedded_verbatim() {
        let (mut ptr, mut len) = (std::ptr::null_mut(), 0usize);
        let status = unsafe { contracts::<Panicky>(&mut ptr, &mut len) };
        assert_eq!(status, STATUS_OK);
        let text = unsafe { std::slice::from_raw_parts(ptr, len).to_vec() };
        unsafe { free(ptr, len) };
        assert_eq!(text, br#"[{"a":1},{"b":2}]"#);
    }

    /// A fake host: `in` yields two items then ends, `out` records sends,
    /// any other port fails PERMISSION_DENIED.
    #[derive(Default)]
    struct FakeHost {
        input: std::sync::Mutex<Vec<Value>>,
        sent: std::sync::Mutex<Vec<Value>>,
        closed: std::sync::Mutex<bool>,
    }

    unsafe fn answer(value: Option<Value>, out_ptr: *mut *mut u8, out_len: *mut usize) {
        match value {
            Some(v) => unsafe {
                hand_out(v.to_string().into_bytes(), 0, out_ptr, out_len);
            },
            None => unsafe {
                *out_ptr = std::ptr::null_mut();
                *out_len = 0;
            },
        }
    }

    fn host<'a>(context: *const c_void) -> &'a FakeHost {
        unsafe { &*(context as *const FakeHost) }
    }

    fn port<'a>(ptr: *const u8, len: usize) -> &'a str {
        std::str::from_utf8(unsafe { std::slice::from_raw_parts(ptr, len) }).unwrap()
    }

    fn denied() -> Value {
        json!({"code": "PERMISSION_DENIED", "message": "not granted"})
    }

    unsafe extern "C" fn fake_send(
        context: *const c_void,
        port_ptr: *const u8,
        port_len: usize,
        value_ptr: *const u8,
        value_len: usize,
        out_ptr: *mut *mut u8,
        out_len: *mut usize,
    ) -> i32 {
        if port(port_ptr, port_len) != "out" {
            unsafe { answer(Some(denied()), out_ptr, out_len) };
            return CHANNEL_FAILED;
        }
        let bytes = unsafe { std::slice::from_raw_parts(value_ptr, value_len) };
        let value = serde_json::from_slice(bytes).unwrap();
        host(context).sent.lock().unwrap().push(value);
        unsafe { answer(None, out_ptr, out_len) };
        CHANNEL_OK
    }

    unsafe extern "C" fn fake_next(
        context: *const c_void,
        port_ptr: *const u8,
        port_len: usize,
        out_ptr: *mut *mut u8,
        out_len: *mut usize,
    ) -> i32 {
        if port(port_ptr, port_len) != "in" {
            unsafe { answer(Some(denied()), out_ptr, out_len) };
            return CHANNEL_FAILED;
        }
        let mut input = host(context).input.lock().unwrap();
        let reply = if input.is_empty() {
            json!({"end": true})
        } else {
            let value = input.remove(0);
            json!({"item": {"sequence": 2 - input.len(), "value": value}})
        };
        unsafe { answer(Some(reply), out_ptr, out_len) };
        CHANNEL_OK
    }

    unsafe extern "C" fn fake_close(
        context: *const c_void,
        _: *const u8,
        _: usize,
        out_ptr: *mut *mut u8,
        out_len: *mut usize,
    ) -> i32 {
        *host(context).closed.lock().unwrap() = true;
        unsafe { answer(None, out_ptr, out_len) };
        CHANNEL_OK
    }

    unsafe extern "C" fn fake_free(_: *const c_void, ptr: *mut u8, len: usize) {
        unsafe { free(ptr, len) }
    }

    #[test]
    fn channels_pass_items_both_ways_through_the_host_table() {
        let fake = FakeHost::default();
        fake.input
            .lock()
            .unwrap()
            .extend([json!("a"), json!({"b": 2})]);
        let table = HostTable {
            context: &fake as *const FakeHost as *const c_void,
            send: fake_send,
            next: fake_next,
            close: fake_close,
            free: fake_free,
        };
        let mut req: Value = serde_json::from_slice(&request("relay")).unwrap();
        req["context"]["ports"] = json!([
            {"name": "in", "direction": "receive"}, {"name": "out", "direction": "send"}
        ]);
        let req = req.to_string().into_bytes();
        let (mut ptr, mut len) = (std::ptr::null_mut(), 0usize);
        let status =
            unsafe { call::<Panicky>(req.as_ptr(), req.len(), &table, &mut ptr, &mut len) };
        let text = unsafe { std::slice::from_raw_parts(ptr, len).to_vec() };
        unsafe { free(ptr, len) };
        assert_eq!(status, STATUS_OK);
        let answer: Value = serde_json::from_slice(&text).unwrap();
        assert_eq!(answer, json!({"value": {"sequences": [1, 2], "ports": 2}}));
        assert_eq!(
            *fake.sent.lock().unwrap(),
            vec![json!("a"), json!({"b": 2})]
        );
        assert!(*fake.closed.lock().unwrap());

        let denied = table.send("in", &json!(1)).unwrap_err();
        assert_eq!(
            denied,
            CallError::operational("PERMISSION_DENIED", "not granted")
        );
    }

    #[test]
    fn without_a_host_table_channel_operations_are_refused() {
        let (status, text) = run(&request("relay"));
        assert_eq!(status, STATUS_OK);
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["operational"]["code"], "PERMISSION_DENIED");
    }

    #[test]
    fn a_malformed_port_list_is_a_bad_request() {
        let mut req: Value = serde_json::from_slice(&request("echo")).unwrap();
        req["context"]["ports"] = json!([{"name": "in", "direction": "both"}]);
        let (status, _) = run(req.to_string().as_bytes());
        assert_eq!(status, STATUS_BAD_REQUEST);
    }
}
