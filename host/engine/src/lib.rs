//! The Run engine of `jig`: projects become reviewed, admitted generations,
//! and admitted targets run as sandboxed Run/1 components whose capability
//! and child slots resolve only to what the review pinned.
//!
//! This crate owns host policy below the doors: the host configuration
//! ([`config`]), the protected project state ([`state`]), planning, review and
//! admission ([`plan`]), root file Runs ([`files`]), provider routing
//! ([`providers`]), the one Run path every door shares ([`exec`]: check,
//! resolve, record, execute, settle, with the request, attachment,
//! channel-receive and terminal types), and its conductor ([`run`]), which
//! takes a recorded root Run from its sealed attachments to its delivered
//! terminal the same way whichever door carried it in. `jig run`, `jig serve` and
//! `jig worker` are doors onto it; it never reaches into one: it parses no
//! command line, speaks no HTTP and prints nothing. It must never run package
//! code outside the execution envelope, never let live project source decide
//! what runs, and never invent a success.

pub mod code;
pub mod config;
pub mod envelope;
pub mod error;
pub mod exec;
pub mod files;
pub mod plan;
pub mod providers;
pub mod review;
pub mod run;
pub mod state;
pub mod terminal;

pub use error::Error;
