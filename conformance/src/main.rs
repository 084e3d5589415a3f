//! `flow-conformance component [OPTIONS] -- PROGRAM [ARGS...]`
//! (or the older flag form without `component`)
//!
//! Plays the host side of the Run/1 corpus against the standard component
//! given after `--` (and the matrix, channels, broadcast and channel-wiring
//! components given by flag, and the contract digest program of
//! Capability Contract/1 case 7; cases for a component not given are skipped),
//! printing `PASS name` / `FAIL name: reason`. Exit status: 0 when every
//! case passed, 1 when any failed, 2 on usage errors.

use std::process::ExitCode;

use flow_conformance::{run, Component, Components};

const USAGE: &str = "usage: flow-conformance component [--matrix PROGRAM] [--channels PROGRAM] \
[--broadcast PROGRAM] [--channel-wiring PROGRAM] [--contract-digest PROGRAM] \
[--case SUBSTRING] [-- PROGRAM [ARGS...]]";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1).peekable();
    // `component` is the documented subcommand; the bare flag form predates it.
    if args.peek().map(String::as_str) == Some("component") {
        args.next();
    }
    let mut components = Components::default();
    let mut filter = None;
    let one = |p: Option<String>| p.map(|p| Component { argv: vec![p] });
    let mut standard = Vec::new();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--matrix" => components.matrix = one(args.next()),
            "--channels" => components.channels = one(args.next()),
            "--broadcast" => components.broadcast = one(args.next()),
            "--channel-wiring" => components.channel_wiring = one(args.next()),
            "--contract-digest" => components.contract_digest = one(args.next()),
            "--case" => filter = args.next(),
            "--" => {
                standard.extend(args.by_ref());
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("unknown argument {other:?}\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    components.standard = (!standard.is_empty()).then_some(Component { argv: standard });
    if components.standard.is_none()
        && components.matrix.is_none()
        && components.channels.is_none()
        && components.broadcast.is_none()
        && components.channel_wiring.is_none()
        && components.contract_digest.is_none()
    {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    }
    let verdicts = run(&components, filter.as_deref(), |v| {
        println!("{}", v.line());
    });
    let failed = verdicts.iter().filter(|v| v.result.is_err()).count();
    println!("{} passed, {failed} failed", verdicts.len() - failed);
    if verdicts.is_empty() || failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
