//! The doors of `jig` that are not a terminal: `jig serve` ([`serve`]: the
//! HTTP API over a Unix socket or TCP, holding projects open) and the
//! PostgreSQL queue with its `jig worker` ([`queue`]: submissions recorded by
//! the server, claimed by workers on any machine under a fencing epoch).
//!
//! This crate owns transport and distribution only: every decision about
//! whether and what a Run runs is the engine's ([`jig_engine::exec::submit`]),
//! so a served or queued Run cannot drift from `jig run`. It never reviews
//! or admits (a server runs admitted generations only), never executes a
//! Run twice (an expired lease after dispatch is `COORDINATOR_LOST`), and
//! never reaches into the command line above it.

mod lifecycle;
pub mod queue;
pub mod serve;

mod error;
pub use error::Error;
