//! The channel ports of one call, as a provider uses them: by port name,
//! with JSON values, whichever form (component or native library) the
//! provider was built as.

use serde_json::Value;

use crate::abi::HostTable;
use crate::port::{Item, Port};
use crate::CallError;

/// How this call reaches its host.
#[derive(Clone, Copy)]
pub(crate) enum Link {
    /// No host behind the ports (a call with none connected, or a test).
    Detached,
    Native(HostTable),
    #[cfg(target_arch = "wasm32")]
    Component,
}

/// The channel ports the caller connected to this call.
///
/// Every operation blocks until it settles; the host wakes it with
/// `DEADLINE_EXCEEDED` or `CANCELLED` when the call ends, so give up (return
/// the error) rather than retry when one fails.
pub struct Channels {
    ports: Vec<Port>,
    link: Link,
}

impl std::fmt::Debug for Channels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channels")
            .field("ports", &self.ports)
            .finish()
    }
}

impl Channels {
    /// No ports: what a call without channels gets, and what unit tests of
    /// a provider can pass.
    pub fn none() -> Channels {
        Channels {
            ports: Vec::new(),
            link: Link::Detached,
        }
    }

    pub(crate) fn new(ports: Vec<Port>, link: Link) -> Channels {
        Channels { ports, link }
    }

    /// The connected ports, sorted by name.
    pub fn ports(&self) -> &[Port] {
        &self.ports
    }

    /// Is `port` connected (with either direction)?
    pub fn has(&self, port: &str) -> bool {
        self.ports.iter().any(|p| p.name == port)
    }

    /// Sends `item` on send port `port`, waiting while the queue is full.
    pub fn send(&self, port: &str, item: &Value) -> Result<(), CallError> {
        match self.link {
            Link::Detached => Err(detached(port)),
            Link::Native(table) => table.send(port, item),
            #[cfg(target_arch = "wasm32")]
            Link::Component => crate::component_link::send(port, item),
        }
    }

    /// The next item of receive port `port`; `None` is the clean end.
    pub fn next(&self, port: &str) -> Result<Option<Item>, CallError> {
        match self.link {
            Link::Detached => Err(detached(port)),
            Link::Native(table) => table.next(port),
            #[cfg(target_arch = "wasm32")]
            Link::Component => crate::component_link::next(port),
        }
    }

    /// Seals send port `port`; its readers see a clean end.
    pub fn close(&self, port: &str) -> Result<(), CallError> {
        match self.link {
            Link::Detached => Err(detached(port)),
            Link::Native(table) => table.close(port),
            #[cfg(target_arch = "wasm32")]
            Link::Component => crate::component_link::close(port),
        }
    }
}

fn detached(port: &str) -> CallError {
    CallError::operational(
        "PERMISSION_DENIED",
        format!("this call holds no {port:?} channel port"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_channels_refuse_every_operation() {
        let channels = Channels::none();
        assert!(channels.ports().is_empty());
        assert!(!channels.has("events"));
        for err in [
            channels.send("events", &Value::Null).unwrap_err(),
            channels.next("events").unwrap_err(),
            channels.close("events").unwrap_err(),
        ] {
            let CallError::Operational { code, .. } = err else {
                panic!("operational expected")
            };
            assert_eq!(code, "PERMISSION_DENIED");
        }
    }
}
