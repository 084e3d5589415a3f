//! `flow-conformance [--matrix PROGRAM] [--case SUBSTRING] -- PROGRAM [ARGS...]`
//!
//! Plays the host side of the Run/1 corpus against the standard component
//! given after `--` (and the matrix component given with `--matrix`),
//! printing `PASS name` / `FAIL name: reason`. Exit status: 0 when every
//! case passed, 1 when any failed, 2 on usage errors.

use std::process::ExitCode;

use flow_conformance::{run, Component};

const USAGE: &str =
    "usage: flow-conformance [--matrix PROGRAM] [--case SUBSTRING] [-- PROGRAM [ARGS...]]";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut matrix = None;
    let mut filter = None;
    let mut standard = Vec::new();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--matrix" => matrix = args.next(),
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
    let standard = (!standard.is_empty()).then_some(Component { argv: standard });
    let matrix = matrix.map(|m| Component { argv: vec![m] });
    if standard.is_none() && matrix.is_none() {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    }
    let verdicts = run(standard.as_ref(), matrix.as_ref(), filter.as_deref(), |v| {
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
