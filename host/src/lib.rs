//! `jig`, a FLOW host, as a command: clap commands, terminal and JSON
//! rendering, and the exit status of every outcome ([`cli`]).
//!
//! This crate is the terminal door onto the engine ([`jig_engine`]) and the
//! launcher of the other doors ([`jig_server`]). It parses and prints; it
//! decides nothing about what or whether a Run runs, and it reads no file
//! before a command's arguments are fully parsed.

pub mod cli;
