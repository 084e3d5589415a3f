//! `jig`, a FLOW host: projects become reviewed, admitted generations, and
//! admitted targets run as sandboxed Run/1 components whose capability and
//! child slots resolve only to what the review pinned.
//!
//! This crate owns host policy: configuration, planning and admission,
//! protected project state, execution and its envelope, and the command line.
//! It must never run package code outside the execution envelope, never let
//! live project source decide what runs, and never invent a success.

pub mod cli;
pub mod queue;
pub mod serve;
