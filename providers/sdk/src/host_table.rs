//! A call's channel operations over the native ABI's host table: what
//! [`crate::Channels`] does for a provider built as a native library.

use serde_json::Value;

use crate::abi::{HostTable, CHANNEL_FAILED, CHANNEL_OK};
use crate::port::Item;
use crate::CallError;

impl HostTable {
    /// Calls one host function and takes its answer, releasing the host's
    /// buffer.
    fn invoke(
        &self,
        call: impl FnOnce(*mut *mut u8, *mut usize) -> i32,
    ) -> Result<Option<Value>, CallError> {
        let mut ptr: *mut u8 = std::ptr::null_mut();
        let mut len = 0usize;
        let status = call(&mut ptr, &mut len);
        let answer = if ptr.is_null() {
            None
        } else {
            // SAFETY: the host hands out ptr/len until we free it, once.
            let bytes = unsafe { std::slice::from_raw_parts(ptr, len) }.to_vec();
            unsafe { (self.free)(self.context, ptr, len) };
            Some(serde_json::from_slice::<Value>(&bytes).map_err(|_| broken_host())?)
        };
        match (status, answer) {
            (CHANNEL_OK, answer) => Ok(answer),
            (CHANNEL_FAILED, Some(Value::Object(mut failure))) => {
                match (failure.remove("code"), failure.remove("message")) {
                    (Some(Value::String(code)), Some(Value::String(message))) => {
                        Err(CallError::operational(&code, message))
                    }
                    _ => Err(broken_host()),
                }
            }
            _ => Err(broken_host()),
        }
    }

    pub(crate) fn send(&self, port: &str, item: &Value) -> Result<(), CallError> {
        let text = item.to_string();
        // SAFETY: the host table is live for the call; the buffers outlive it.
        self.invoke(|ptr, len| unsafe {
            (self.send)(
                self.context,
                port.as_ptr(),
                port.len(),
                text.as_ptr(),
                text.len(),
                ptr,
                len,
            )
        })
        .map(drop)
    }

    pub(crate) fn next(&self, port: &str) -> Result<Option<Item>, CallError> {
        // SAFETY: as in send.
        let answer = self.invoke(|ptr, len| unsafe {
            (self.next)(self.context, port.as_ptr(), port.len(), ptr, len)
        })?;
        let Some(Value::Object(mut answer)) = answer else {
            return Err(broken_host());
        };
        if answer.remove("end").is_some() {
            return Ok(None);
        }
        let Some(Value::Object(mut item)) = answer.remove("item") else {
            return Err(broken_host());
        };
        match (
            item.remove("sequence").and_then(|s| s.as_u64()),
            item.remove("value"),
        ) {
            (Some(sequence), Some(value)) => Ok(Some(Item { sequence, value })),
            _ => Err(broken_host()),
        }
    }

    pub(crate) fn close(&self, port: &str) -> Result<(), CallError> {
        // SAFETY: as in send.
        self.invoke(|ptr, len| unsafe {
            (self.close)(self.context, port.as_ptr(), port.len(), ptr, len)
        })
        .map(drop)
    }
}

fn broken_host() -> CallError {
    CallError::operational(
        "EXECUTION_FAILED",
        "the host answered a channel operation outside the ABI",
    )
}
