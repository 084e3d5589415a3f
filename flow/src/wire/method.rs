//! Methods: the per-direction method table.

/// Which peer sent a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    HostToComponent,
    ComponentToHost,
}

/// Every Run/1 method name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    FlowRun,
    RunChild,
    CapabilityCall,
    RequestCancel,
    ChannelCreate,
    ChannelSubscribe,
    ChannelSend,
    ChannelNext,
    ChannelClose,
    ChannelRelease,
}

impl Method {
    /// Every method.
    pub const ALL: [Method; 10] = [
        Method::FlowRun,
        Method::RunChild,
        Method::CapabilityCall,
        Method::RequestCancel,
        Method::ChannelCreate,
        Method::ChannelSubscribe,
        Method::ChannelSend,
        Method::ChannelNext,
        Method::ChannelClose,
        Method::ChannelRelease,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::FlowRun => "flow/run",
            Method::RunChild => "flow/run-child",
            Method::CapabilityCall => "capability/call",
            Method::RequestCancel => "request/cancel",
            Method::ChannelCreate => "channel/create",
            Method::ChannelSubscribe => "channel/subscribe",
            Method::ChannelSend => "channel/send",
            Method::ChannelNext => "channel/next",
            Method::ChannelClose => "channel/close",
            Method::ChannelRelease => "channel/release",
        }
    }

    /// Looks up a wire name.
    pub fn parse(name: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.as_str() == name)
    }

    /// Whether this method is a notification (never request-form).
    pub fn is_notification(self) -> bool {
        self == Method::RequestCancel
    }

    /// Whether `direction` may send this method in its proper form.
    pub fn allowed(self, direction: Direction) -> bool {
        match self {
            Method::FlowRun => direction == Direction::HostToComponent,
            Method::RequestCancel => true,
            _ => direction == Direction::ComponentToHost,
        }
    }
}

/// The request-form method a receiver should dispatch, or `None` when it must
/// answer `-32601` (unknown, wrong direction, or notification-only).
pub fn request_method(direction: Direction, name: &str) -> Option<Method> {
    Method::parse(name).filter(|m| !m.is_notification() && m.allowed(direction))
}
