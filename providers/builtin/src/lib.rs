//! The builtin capabilities of a Jig host (HOST-FACTS §1–§3): their exact
//! contracts, the validation of their inputs and policies, and the wire
//! clients of their effects.
//!
//! This crate owns policy and protocol only. It never starts a process,
//! opens an envelope or touches a project: the host lends it those through
//! narrow interfaces, never the reverse (ARCHITECTURE.md, Providers).

pub mod agent;
pub mod checkpoint;
pub mod command;
