//! The channel endpoints a capability call carries (Run/1 §5.1,
//! Channel Contract/1 §1): the caller maps held endpoints to ports the
//! contract method declares, and the host hands the provider a
//! [`ChannelPorts`] that reaches exactly those endpoints by port name.
//!
//! The provider never sees an endpoint token. The host owns the channel:
//! item schemas, queues, back-pressure and sealing stay host-side, and a
//! healthy writer is sealed when the call ends.

use serde_json::Value;

use crate::CallError;

/// Which way items flow through a port, from the provider's side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PortDirection {
    /// The provider writes items (`send`, `close`).
    Send,
    /// The provider reads items (`next`).
    Receive,
}

impl PortDirection {
    /// The declaration's word for this direction.
    pub fn as_str(self) -> &'static str {
        match self {
            PortDirection::Send => "send",
            PortDirection::Receive => "receive",
        }
    }

    pub fn parse(text: &str) -> Option<PortDirection> {
        match text {
            "send" => Some(PortDirection::Send),
            "receive" => Some(PortDirection::Receive),
            _ => None,
        }
    }
}

/// One port of the called method that the caller connected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantedPort {
    /// The `LocalName` of the method's `channels` declaration.
    pub name: String,
    pub direction: PortDirection,
}

/// One item read from a receive port.
#[derive(Clone, Debug, PartialEq)]
pub struct ChannelItem {
    /// The source sequence, from 1.
    pub sequence: u64,
    pub value: Value,
}

/// The channel endpoints granted to one provider call.
///
/// Every operation blocks the calling thread until it settles, and must
/// return by the call's deadline (`DEADLINE_EXCEEDED`) or promptly after
/// the call is cancelled (`CANCELLED`): a provider blocked here must never
/// outlive its call. Failures are [`CallError::Operational`] with Run/1
/// codes: `PERMISSION_DENIED` for a port that was not granted or has the
/// other direction, `INVALID_INPUT` for an item the channel refuses,
/// `DISCONNECTED` when the peer is gone, `LAGGED` for a broadcast reader
/// that fell behind, and the source's own failure code when it failed.
pub trait ChannelPorts: Send + Sync {
    /// The connected ports, sorted by name.
    fn ports(&self) -> &[GrantedPort];
    /// Sends `item` on send port `port`, waiting while the queue is full.
    fn send(&self, port: &str, item: Value) -> Result<(), CallError>;
    /// The next item of receive port `port`; `None` is the clean end.
    fn next(&self, port: &str) -> Result<Option<ChannelItem>, CallError>;
    /// Seals send port `port`: its readers see a clean end after the
    /// items already sent.
    fn close(&self, port: &str) -> Result<(), CallError>;
    /// Fails send port `port` with Run/1 `code` (such as `LAGGED` for an
    /// overflowed ingress): its readers see that failure instead of an
    /// end. Ports that cannot be failed refuse `PERMISSION_DENIED`.
    fn fail(&self, port: &str, code: &str, message: &str) -> Result<(), CallError> {
        let _ = (code, message);
        Err(not_granted(port))
    }
}

/// The ports of a call the caller connected none to.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoPorts;

impl ChannelPorts for NoPorts {
    fn ports(&self) -> &[GrantedPort] {
        &[]
    }

    fn send(&self, port: &str, _: Value) -> Result<(), CallError> {
        Err(not_granted(port))
    }

    fn next(&self, port: &str) -> Result<Option<ChannelItem>, CallError> {
        Err(not_granted(port))
    }

    fn close(&self, port: &str) -> Result<(), CallError> {
        Err(not_granted(port))
    }
}

/// The error for an operation on a port this call was not granted, or
/// not granted in that direction.
pub fn not_granted(port: &str) -> CallError {
    CallError::operational(
        "PERMISSION_DENIED",
        format!("this call holds no {port:?} channel port in that direction"),
    )
}

/// Checks that `port` was granted with `direction`, as every
/// implementation must before touching a channel.
pub fn check_granted(
    ports: &[GrantedPort],
    port: &str,
    direction: PortDirection,
) -> Result<(), CallError> {
    if ports
        .iter()
        .any(|p| p.name == port && p.direction == direction)
    {
        Ok(())
    } else {
        Err(not_granted(port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_ports_refuses_every_operation_permission_denied() {
        assert!(NoPorts.ports().is_empty());
        let send = NoPorts.send("events", Value::Null).unwrap_err();
        assert_eq!(send.code(), Some("PERMISSION_DENIED"));
        assert_eq!(
            NoPorts.next("events").unwrap_err().code(),
            Some("PERMISSION_DENIED")
        );
        assert_eq!(
            NoPorts.close("events").unwrap_err().code(),
            Some("PERMISSION_DENIED")
        );
    }

    #[test]
    fn a_port_is_granted_only_in_its_direction() {
        let ports = [GrantedPort {
            name: "events".into(),
            direction: PortDirection::Send,
        }];
        assert!(check_granted(&ports, "events", PortDirection::Send).is_ok());
        let wrong = check_granted(&ports, "events", PortDirection::Receive).unwrap_err();
        assert_eq!(wrong.code(), Some("PERMISSION_DENIED"));
        let other = check_granted(&ports, "other", PortDirection::Send).unwrap_err();
        assert_eq!(other.code(), Some("PERMISSION_DENIED"));
        assert_eq!(PortDirection::parse("send"), Some(PortDirection::Send));
        assert_eq!(PortDirection::parse("both"), None);
    }
}
