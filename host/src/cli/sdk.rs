//! The SDK sources a scaffold builds against (`jig init --lang rust`,
//! `jig provider new --lang rust`): neither SDK is published, so a
//! scaffold names a local crate by path. Each command keeps its own codes
//! and words; what they share is how a crate is recognised, where an
//! installed copy lives, and which paths Cargo.toml can hold.

use std::path::{Path, PathBuf};

/// Is `dir` the crate `name` (its Cargo.toml names it)?
pub(super) fn is_crate(dir: &Path, name: &str) -> bool {
    std::fs::read_to_string(dir.join("Cargo.toml"))
        .is_ok_and(|manifest| manifest.contains(&format!("name = \"{name}\"")))
}

/// `relative` to this jig's executable, where an installed jig keeps the
/// sources it ships (`../share/jig/...`).
pub(super) fn beside_executable(relative: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.join(relative))
}

/// Why a directory cannot be written into a scaffold's Cargo.toml.
pub(super) enum Unwritable {
    /// It cannot be made absolute (it does not exist, or cannot be read).
    Unresolved(std::io::Error),
    /// Its absolute path holds a character a TOML basic string would
    /// need escaped; returned as that path.
    Unquotable(String),
}

/// `dir` as the absolute path a scaffold's Cargo.toml names.
pub(super) fn toml_path(dir: &Path) -> Result<String, Unwritable> {
    let absolute = dir
        .canonicalize()
        .map_err(Unwritable::Unresolved)?
        .to_string_lossy()
        .into_owned();
    if absolute.contains(['"', '\\', '\n']) {
        return Err(Unwritable::Unquotable(absolute));
    }
    Ok(absolute)
}
