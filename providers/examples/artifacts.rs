//! Builds the example providers from source for the loader tests and
//! benchmarks (included with `#[path]` by each of them). Guests go to
//! `target/guests` so the nested cargo never waits on the outer build's lock.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// The example and fixture crates every component build produces (the
/// native build leaves out `grants-probe`, a component-only fixture).
const GUESTS: [&str; 3] = ["kv-provider", "faulty-provider", "grants-probe"];

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Profile {
    Debug,
    Release,
}

impl Profile {
    fn dir(self) -> &'static str {
        match self {
            Profile::Debug => "debug",
            Profile::Release => "release",
        }
    }
}

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn guests_dir() -> PathBuf {
    workspace_root().join("target/guests")
}

/// The component of `package` (e.g. `kv-provider`), built for
/// wasm32-wasip2.
pub fn wasm(package: &str, profile: Profile) -> PathBuf {
    build(Some("wasm32-wasip2"), profile, &GUESTS);
    guests_dir()
        .join("wasm32-wasip2")
        .join(profile.dir())
        .join(format!("{}.wasm", package.replace('-', "_")))
}

/// The shared library of `package`, built for the host.
pub fn native(package: &str, profile: Profile) -> PathBuf {
    build(None, profile, &["kv-provider", "faulty-provider"]);
    guests_dir().join(profile.dir()).join(format!(
        "{}{}{}",
        std::env::consts::DLL_PREFIX,
        package.replace('-', "_"),
        std::env::consts::DLL_SUFFIX
    ))
}

/// A finished build: target triple (`None` for the host) and profile.
type Built = (Option<String>, Profile);

fn build(target: Option<&str>, profile: Profile, packages: &[&str]) {
    static DONE: Mutex<Option<HashSet<Built>>> = Mutex::new(None);
    let mut done = DONE.lock().unwrap_or_else(|e| e.into_inner());
    let key = (target.map(str::to_owned), profile);
    if done.get_or_insert_with(HashSet::new).contains(&key) {
        return;
    }
    debug_assert!(packages.iter().all(|p| GUESTS.contains(p)));
    let mut cargo = Command::new(env!("CARGO"));
    cargo
        .current_dir(workspace_root())
        .arg("build")
        .arg("--quiet")
        .arg("--target-dir")
        .arg(guests_dir());
    for package in packages {
        cargo.arg("-p").arg(package);
    }
    if let Some(target) = target {
        cargo.arg("--target").arg(target);
    }
    if profile == Profile::Release {
        cargo.arg("--release");
    }
    let status = cargo.status().expect("cargo runs");
    assert!(
        status.success(),
        "building guests {packages:?} for {target:?} failed"
    );
    done.get_or_insert_with(HashSet::new).insert(key);
}
