//! Provider API.
