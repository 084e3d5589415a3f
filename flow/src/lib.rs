//! The FLOW standard as a library: JSON/1 values, Schema/1 schemas, Package/1
//! trees and their digests, Capability and Channel Contract/1 descriptors, the
//! Run/1 wire format; and three small text rules every crate above shares:
//! how a SHA-256 digest is spelled (`digest`), how a duration is written
//! (`duration`) and how a size in bytes is (`size`); the grammars only: each
//! option keeps its own bounds.
//!
//! This crate owns the portable rules only. It must never know about
//! projects, admission, sandboxes, providers or any other host policy, and it
//! must never panic on input: every malformed value is an error carrying the
//! specification's code.

pub mod contract;
pub mod digest;
pub mod duration;
pub mod json;
pub mod package;
pub mod schema;
pub mod size;
pub mod wire;
