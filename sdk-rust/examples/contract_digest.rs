//! The contract digest program of Capability Contract/1 conformance case 7
//! (`flow-conformance --contract-digest`): reads one descriptor on stdin and
//! prints its digest, `capability` or `channel` as the one argument. Rust
//! components compute it with `flow::contract`, the same code the host uses.

use std::io::Read;
use std::process::ExitCode;

fn main() -> ExitCode {
    let kind = std::env::args().nth(1).unwrap_or_default();
    let mut bytes = Vec::new();
    if std::io::stdin().read_to_end(&mut bytes).is_err() {
        return ExitCode::from(2);
    }
    let value = match flow::json::parse(&bytes) {
        Ok(value) => value,
        Err(error) => {
            eprintln!("not JSON/1: {error}");
            return ExitCode::FAILURE;
        }
    };
    let digest = match kind.as_str() {
        "capability" => flow::contract::digest(&value),
        "channel" => flow::contract::channel_digest(&value),
        _ => {
            eprintln!("usage: contract_digest capability|channel < DESCRIPTOR");
            return ExitCode::from(2);
        }
    };
    println!("{digest}");
    ExitCode::SUCCESS
}
