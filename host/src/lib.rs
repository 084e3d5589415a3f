//! jig host.
