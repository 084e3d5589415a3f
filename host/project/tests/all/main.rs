//! Integration tests of jig-project: what `jig init` leaves on disk and what
//! `capture` returns or refuses, by stable code, path and pointer.

mod bindings;
mod capture;
mod discovery;
mod evaluation;
mod fixture;
mod init;
mod modules;
