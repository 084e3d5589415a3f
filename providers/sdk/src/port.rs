//! What a call's channel ports are, as plain data: a port's name and
//! direction, and an item read from one.

use serde_json::Value;

/// Which way a port carries items, from the provider's side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Send,
    Receive,
}

/// One connected port of the called method.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Port {
    pub name: String,
    pub direction: Direction,
}

/// One item read from a receive port.
#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    /// The source sequence, from 1.
    pub sequence: u64,
    pub value: Value,
}
