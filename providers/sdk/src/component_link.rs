//! A call's channel operations through the component world's
//! `jig:provider/channels` imports: what [`crate::Channels`] does for a
//! provider built as a component. Only a provider that uses its ports links
//! these imports.

use serde_json::Value;

use crate::port::Item;
use crate::wit::jig::provider::channels as host;

fn failure(f: host::ChannelFailure) -> crate::CallError {
    crate::CallError::operational(&f.code, f.message)
}

pub(crate) fn send(port: &str, item: &Value) -> Result<(), crate::CallError> {
    host::send(port, &item.to_string()).map_err(failure)
}

pub(crate) fn next(port: &str) -> Result<Option<Item>, crate::CallError> {
    match host::next(port).map_err(failure)? {
        None => Ok(None),
        Some(item) => {
            let value = serde_json::from_str(&item.value).map_err(|e| {
                crate::CallError::operational(
                    "EXECUTION_FAILED",
                    format!("the host sent an item that is not JSON: {e}"),
                )
            })?;
            Ok(Some(Item {
                sequence: item.sequence,
                value,
            }))
        }
    }
}

pub(crate) fn close(port: &str) -> Result<(), crate::CallError> {
    host::close(port).map_err(failure)
}
