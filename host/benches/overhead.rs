//! The host's overhead per Run: `jig exec` of the smallest native component
//! (the Rust SDK's `greet` example as `flow.bin`, with `[containment] mode =
//! "none"` so the envelope, measured by the `envelope` bench, is left out)
//! against spawning the same executable with a bare pipe peer in this
//! process: write the `flow/run` frame, read the one response frame, close
//! stdin, wait for exit. Both are measured in the same run, so the ratio of
//! the two medians is the host's cost (process start of `jig`, package
//! reading and validation, config, peer, classification, output) relative
//! to the component's own.
//!
//! Measured 2026-11-30 (release, 2-core shared machine, load ~4.6, medians
//! of 40): bare pipe peer 0.91 ms, `jig exec` 21.75 ms, so ~20.8 ms of host
//! overhead per Run (~24x). Most of it precedes the launch: `jig exec`
//! builds a throwaway store in `/tmp/jig-exec-*` (blob writes with fsync,
//! a copy of the package into `runs/0/package`) before it starts the
//! component.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

#[path = "support/greet.rs"]
mod greet;

fn main() {
    // Build and lay out the component before timing anything.
    fixture();
    divan::main();
}

struct Fixture {
    dir: tempfile::TempDir,
    greet: PathBuf,
}

/// Builds `greet` ([`greet::build`]) and lays out the package.
fn fixture() -> &'static Fixture {
    static CELL: OnceLock<Fixture> = OnceLock::new();
    CELL.get_or_init(|| {
        let built = greet::build();
        let dir = tempfile::tempdir().unwrap();
        let package = dir.path().join("greet");
        std::fs::create_dir_all(&package).unwrap();
        std::fs::write(
            package.join("FLOW.md"),
            "---\nname: greet\ndescription: Greets the name given as input.\n---\n",
        )
        .unwrap();
        let greet = package.join("flow.bin");
        std::fs::copy(&built, &greet).unwrap();
        std::fs::write(
            dir.path().join("host.toml"),
            "[containment]\nmode = \"none\"\n",
        )
        .unwrap();
        std::fs::create_dir_all(dir.path().join("scratch")).unwrap();
        Fixture { dir, greet }
    })
}

const EXPECTED: &str = "\"Hello, bench!\"";

/// One Run through the host, as a user starts it.
#[divan::bench(sample_count = 40)]
fn jig_exec() {
    let fixture = fixture();
    let out = Command::new(env!("CARGO_BIN_EXE_jig"))
        .current_dir(fixture.dir.path())
        .env_remove("JIG_CONFIG")
        .env("XDG_CONFIG_HOME", fixture.dir.path().join(".config"))
        .args(["exec", "greet", "--json", "--config", "host.toml"])
        .args(["--input", "\"bench\""])
        .stderr(Stdio::null())
        .output()
        .expect("jig runs");
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains(EXPECTED));
}

/// The same component with nothing but a Run/1 pipe peer around it.
#[divan::bench(sample_count = 40)]
fn bare_pipe_peer() {
    let fixture = fixture();
    let child = Command::new(&fixture.greet)
        .current_dir(fixture.dir.path().join("scratch"))
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("greet starts");
    greet::exchange(child, &fixture.dir.path().join("scratch"), EXPECTED);
}
