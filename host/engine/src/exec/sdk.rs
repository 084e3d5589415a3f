//! The bundled SDKs as one read-only directory per jig build (and, for
//! Python, per runtime), instead of files written by every Run: the Python
//! SDK with its bytecode compiled once, the JavaScript SDK (`@jigging/flow`
//! for Bun and Node) as it is embedded.
//!
//! A directory is content-addressed: its name is the digest of the SDK's
//! paths and bytes (and of the runtime that compiled it). It is made once
//! (staged privately, for Python compiled with `compileall` into
//! unchecked-hash bytecode so it is reproducible and never rewritten, its
//! files made read-only, sealed with the digest of every file, renamed into
//! place) and checked against that seal and the embedded sources on every
//! use; a directory that differs fails closed and is never repaired behind
//! the caller's back. Within one process, a directory whose every file and
//! directory still has the device, inode, size, times and mode it had when
//! it was last checked in full is not read again: no write can keep all of
//! them (the change time cannot be set back). A Python Run imports the SDK
//! from its bytecode and writes none (`PYTHONDONTWRITEBYTECODE` stays set).
//!
//! Every use stamps the seal's mtime (its last use), so the store's
//! collection ([`collect_support`]) can let go of the trees of other jig builds
//! (each upgrade that changes an SDK leaves one) once no Run can still be
//! using them: [`SUPPORT_GRACE`] after their last use, longer than the
//! longest Run. The trees of this build are never collected.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use serde_json::json;

use crate::state::retention::REMOVING_PREFIX;

/// An embedded SDK's files: (path relative to its root, bytes).
pub type Files<'a> = &'a [(&'a str, &'a [u8])];

/// One bundled SDK kept as a shared tree.
#[derive(Debug, Clone, Copy)]
struct Bundle {
    /// What the seal and the directory name are computed under.
    format: &'static str,
    /// The directory name's prefix (`<prefix>-<hex>`).
    prefix: &'static str,
    /// Where the SDK's files are below the tree.
    root: &'static str,
    /// In messages.
    name: &'static str,
}

const PYTHON_BUNDLE: Bundle = Bundle {
    format: "jig-python-sdk/1",
    prefix: "python",
    root: IMPORT_ROOT,
    name: "Python SDK",
};

const JS_BUNDLE: Bundle = Bundle {
    format: "jig-js-sdk/1",
    prefix: "js",
    root: "flow",
    name: "JavaScript SDK",
};
/// The seal beside each directory: `<name>.seal`.
const SEAL_SUFFIX: &str = ".seal";
/// The fixed timestamp the bytecode is compiled under (it is not written
/// into unchecked-hash bytecode; set so any other choice stays stable).
const SOURCE_DATE_EPOCH: &str = "0";
/// The mode of every directory of the SDK tree: owner-private, and
/// writable by the owner so `.jig` stays removable (every use checks the
/// whole tree against its seal).
const DIR_MODE: u32 = 0o700;
/// Where the SDK's import root is below the tree (`PYTHONPATH`).
pub(crate) const IMPORT_ROOT: &str = "python";
/// How long after its last use a tree of another jig build is kept: an
/// hour past the longest Run ([`MAX_TIMEOUT`]), so a Run of that build
/// (an older daemon still serving, a CLI Run) that stamped it when it
/// started has ended before the tree goes. A tree that went is made again
/// by the next Run of its build that wants it.
///
/// [`MAX_TIMEOUT`]: super::timeout::MAX_TIMEOUT
pub const SUPPORT_GRACE: Duration =
    Duration::from_secs(super::timeout::MAX_TIMEOUT.as_secs() + 3600);
/// A use stamps the seal again only once its stamp is this old, so a busy
/// host does not write the stamp at every Run.
const STAMP_RESOLUTION: Duration = Duration::from_secs(60);
/// The prefix of a tree being made (a private temporary directory).
const STAGING_PREFIX: &str = ".jig-sdk-";

/// The Python SDK `files` (relative path, bytes) compiled by `runtime`, as a
/// read-only tree below `root`; returns its import root (for `PYTHONPATH`).
pub fn python(root: &Path, runtime: &Path, files: Files) -> Result<PathBuf, String> {
    shared(root, PYTHON_BUNDLE, Some(runtime), files)
}

/// The JavaScript SDK `files` as a read-only tree below `root`; returns the
/// directory Bun and Node import as `@jigging/flow` (a Run shows it at its
/// `node_modules/@jigging/flow`).
pub fn javascript(root: &Path, files: Files) -> Result<PathBuf, String> {
    shared(root, JS_BUNDLE, None, files)
}

/// `bundle`'s tree of `files` below `root` (made now if absent, checked
/// if present); returns its import root.
fn shared(
    root: &Path,
    bundle: Bundle,
    runtime: Option<&Path>,
    files: Files,
) -> Result<PathBuf, String> {
    let name = tree_name(bundle, runtime, files);
    let tree = root.join(&name);
    let seal = root.join(format!("{name}{SEAL_SUFFIX}"));
    if std::fs::symlink_metadata(&tree).is_ok() {
        check(bundle, &tree, &seal, files).map_err(|what| changed(bundle, &tree, &what))?;
        stamp_use(&seal);
        return Ok(tree.join(bundle.root));
    }
    make(root, bundle, &tree, &seal, runtime, files)?;
    Ok(tree.join(bundle.root))
}

/// Note a use of the tree sealed by `seal`: its mtime is its last use. A
/// stamp that cannot be written costs nothing but an earlier collection
/// (this build's trees are never collected).
fn stamp_use(seal: &Path) {
    let now = SystemTime::now();
    let recent = std::fs::metadata(seal)
        .and_then(|m| m.modified())
        .is_ok_and(|at| now.duration_since(at).unwrap_or_default() < STAMP_RESOLUTION);
    if !recent {
        let _ = std::fs::File::open(seal).and_then(|f| f.set_modified(now));
    }
}

fn changed(bundle: Bundle, tree: &Path, what: &str) -> String {
    format!(
        "the bundled {} at {} was changed after it was made ({what}); remove it to have it \
         made again",
        bundle.name,
        tree.display()
    )
}

/// The digest of the SDK's paths and bytes (and the runtime's path).
fn tree_name(bundle: Bundle, runtime: Option<&Path>, files: Files) -> String {
    let sources: serde_json::Map<String, serde_json::Value> = files
        .iter()
        .map(|(path, bytes)| (path.to_string(), json!(flow::digest::sha256_digest(bytes))))
        .collect();
    let mut identity = json!({
        "format": bundle.format,
        "files": sources,
    });
    if let Some(runtime) = runtime {
        identity["runtime"] = json!(runtime.to_string_lossy());
    }
    let digest = flow::digest::sha256_digest(&flow::json::canonical(&identity));
    format!("{}-{}", bundle.prefix, digest.trim_start_matches("sha256:"))
}

fn make(
    root: &Path,
    bundle: Bundle,
    tree: &Path,
    seal: &Path,
    runtime: Option<&Path>,
    files: Files,
) -> Result<PathBuf, String> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let io = |e: std::io::Error| format!("cannot stage the bundled {}: {e}", bundle.name);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(root)
        .map_err(io)?;
    let temp = tempfile::Builder::new()
        .prefix(".jig-sdk-")
        .tempdir_in(root)
        .map_err(io)?;
    let staged = temp.path().join("tree");
    for (path, bytes) in files {
        let target = staged.join(bundle.root).join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        std::fs::write(&target, bytes).map_err(io)?;
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o444)).map_err(io)?;
    }
    if let Some(runtime) = runtime {
        compile(runtime, tree, &staged)?;
    }
    let sealed = seal_tree(&staged).map_err(io).and_then(|digests| {
        let compiled = digests.keys().filter(|p| p.ends_with(".pyc")).count();
        if runtime.is_some() && compiled < files.len() {
            return Err(format!(
                "compileall made {compiled} bytecode files for {} sources",
                files.len()
            ));
        }
        let value = json!({ "format": bundle.format, "files": digests });
        crate::state::write_atomic(seal, &flow::json::canonical(&value)).map_err(|e| e.to_string())
    });
    if let Err(e) = sealed {
        let _ = std::fs::remove_dir_all(&staged);
        return Err(e);
    }
    match std::fs::rename(&staged, tree) {
        Ok(()) => crate::state::sync_dir(root).map_err(|e| e.to_string())?,
        // Made meanwhile by another Run of this host: use that one.
        Err(_) if tree.is_dir() => {
            let _ = std::fs::remove_dir_all(&staged);
            check(bundle, tree, seal, files).map_err(|what| changed(bundle, tree, &what))?;
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staged);
            return Err(format!("cannot publish the bundled {}: {e}", bundle.name));
        }
    }
    Ok(tree.to_path_buf())
}

/// Compile the staged Python SDK with `runtime` into unchecked-hash
/// bytecode, naming the paths it will have at `tree`.
fn compile(runtime: &Path, tree: &Path, staged: &Path) -> Result<(), String> {
    let out = Command::new(runtime)
        .args(["-I", "-S", "-m", "compileall", "-q", "-d"])
        .arg(tree.join(IMPORT_ROOT))
        .args(["--invalidation-mode", "unchecked-hash"])
        .arg(staged.join(IMPORT_ROOT))
        .env_clear()
        .env("SOURCE_DATE_EPOCH", SOURCE_DATE_EPOCH)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot compile the bundled Python SDK: {e}"))?;
    if !out.status.success() {
        let _ = std::fs::remove_dir_all(staged);
        return Err(format!(
            "cannot compile the bundled Python SDK with {}: {}",
            runtime.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// Give every directory its mode (deepest first), make every file
/// read-only, sync it, and
/// return the digest of every file by relative path.
fn seal_tree(root: &Path) -> std::io::Result<BTreeMap<String, String>> {
    use std::os::unix::fs::PermissionsExt;
    let mut digests = BTreeMap::new();
    let mut dirs = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let path = entry.path();
            if entry.file_type()?.is_dir() {
                stack.push(path);
                continue;
            }
            let bytes = std::fs::read(&path)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444))?;
            std::fs::File::open(&path)?.sync_all()?;
            let rel = path.strip_prefix(root).expect("below the root");
            digests.insert(
                rel.to_string_lossy().into_owned(),
                flow::digest::sha256_digest(&bytes),
            );
        }
        dirs.push(dir);
    }
    for dir in dirs.iter().rev() {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(DIR_MODE))?;
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(digests)
}

/// Does `tree` hold exactly what its seal lists (bytes by digest, read-only
/// files, owner-private directories, nothing else), with the sources the
/// embedded ones? `Err` names the first difference. A tree this process
/// checked in full is not read again while every entry looks as it did.
fn check(bundle: Bundle, tree: &Path, seal: &Path, files: Files) -> Result<(), String> {
    static CHECKED: std::sync::Mutex<BTreeMap<PathBuf, Vec<Looks>>> =
        std::sync::Mutex::new(BTreeMap::new());
    let looks = looks(tree, seal)?;
    let mut checked = CHECKED.lock().unwrap_or_else(|e| e.into_inner());
    if checked.get(tree) == Some(&looks) {
        return Ok(());
    }
    checked.remove(tree);
    check_fully(bundle, tree, seal, files)?;
    // Kept only when nothing moved while it was read.
    if self::looks(tree, seal)? == looks {
        checked.insert(tree.to_path_buf(), looks);
    }
    Ok(())
}

/// How one entry of a tree (or its seal) looks: its path and the metadata
/// any change to it changes.
type Looks = (PathBuf, jig_verify::Observed);

/// The seal and every entry below `tree`, read through no link, in a fixed
/// order.
fn looks(tree: &Path, seal: &Path) -> Result<Vec<Looks>, String> {
    let of = |path: &Path| -> Result<(Looks, bool), String> {
        let meta =
            std::fs::symlink_metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let looks = (path.to_path_buf(), jig_verify::Observed::of(&meta));
        Ok((looks, meta.is_dir()))
    };
    let mut all = vec![of(seal)?.0, of(tree)?.0];
    let mut stack = vec![tree.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .map(|entry| entry.map(|e| e.path()))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        entries.sort();
        for path in entries {
            let (entry, is_dir) = of(&path)?;
            if is_dir {
                stack.push(path);
            }
            all.push(entry);
        }
    }
    Ok(all)
}

/// [`check`], reading and hashing every file.
fn check_fully(bundle: Bundle, tree: &Path, seal: &Path, files: Files) -> Result<(), String> {
    use std::io::Read;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let bytes = std::fs::read(seal).map_err(|e| format!("its seal: {e}"))?;
    let value = flow::json::parse(&bytes).map_err(|_| "its seal is not JSON/1".to_string())?;
    let sealed = value
        .get("files")
        .and_then(|f| f.as_object())
        .filter(|_| value.get("format").and_then(|f| f.as_str()) == Some(bundle.format))
        .ok_or("its seal has another shape")?;
    for (path, bytes) in files {
        let rel = format!("{}/{path}", bundle.root);
        let digest = flow::digest::sha256_digest(bytes);
        if sealed.get(&rel).and_then(|d| d.as_str()) != Some(digest.as_str()) {
            return Err(format!("{rel} is not this build's source"));
        }
    }
    let mut seen = 0usize;
    let mut stack = vec![tree.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let meta = std::fs::symlink_metadata(&dir).map_err(|e| e.to_string())?;
        if !meta.is_dir() || meta.permissions().mode() & 0o7777 != DIR_MODE {
            return Err(format!(
                "{} is not an owner-private directory",
                dir.display()
            ));
        }
        for entry in std::fs::read_dir(&dir).map_err(|e| e.to_string())? {
            let entry = entry.map_err(|e| e.to_string())?;
            let path = entry.path();
            let kind = entry.file_type().map_err(|e| e.to_string())?;
            if kind.is_dir() {
                stack.push(path);
                continue;
            }
            let rel = path
                .strip_prefix(tree)
                .map_err(|e| e.to_string())?
                .to_string_lossy()
                .into_owned();
            let Some(expected) = sealed.get(&rel).and_then(|d| d.as_str()) else {
                return Err(format!("{rel} is not part of it"));
            };
            let mut file = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(nix::libc::O_NOFOLLOW)
                .open(&path)
                .map_err(|e| format!("{rel}: {e}"))?;
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes)
                .map_err(|e| format!("{rel}: {e}"))?;
            if flow::digest::sha256_digest(&bytes) != expected {
                return Err(format!("{rel} has different bytes"));
            }
            seen += 1;
        }
    }
    if seen != sealed.len() {
        return Err("a file is missing".into());
    }
    Ok(())
}
/// What collecting the bundled SDK trees removed (or, dry, would remove).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Collected {
    /// The names of the trees (`python-…`, `js-…`).
    pub trees: Vec<String>,
    pub freed_bytes: u64,
}

/// Remove below `root` (a store's support directory) the SDK trees that
/// are not of `sdks` (this build's SDK files, by bundle), with their seals, once their
/// last use (the seal's mtime) is more than [`SUPPORT_GRACE`] before
/// `now`; a tree without a seal ages from its own mtime. Also
/// removed: a seal left without its tree and a staging directory a
/// crashed make left, past the same grace (a make in progress is young),
/// and a tree a crashed collection left renamed aside. With `dry_run`
/// nothing changes.
///
/// A tree goes renamed aside first, then its seal, then its files: a
/// crash leaves no tree under its name, and a Run that wants it makes it
/// again (overwriting a seal left behind).
fn collect(
    root: &Path,
    sdks: &[(Bundle, Files)],
    now: SystemTime,
    dry_run: bool,
) -> std::io::Result<Collected> {
    let mut collected = Collected::default();
    // Each bundle's tree prefix with the sources of this build.
    let current: Vec<(Bundle, String, BTreeMap<String, String>)> = sdks
        .iter()
        .map(|(bundle, files)| {
            let sources = files
                .iter()
                .map(|(path, bytes)| {
                    (
                        format!("{}/{path}", bundle.root),
                        flow::digest::sha256_digest(bytes),
                    )
                })
                .collect();
            (*bundle, format!("{}-", bundle.prefix), sources)
        })
        .collect();
    let bundle_of = |name: &str| {
        current
            .iter()
            .find(|(_, prefix, _)| name.starts_with(prefix.as_str()))
    };
    let idle = |path: &Path| {
        std::fs::symlink_metadata(path)
            .and_then(|m| m.modified())
            .is_ok_and(|at| now.duration_since(at).unwrap_or_default() > SUPPORT_GRACE)
    };
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(collected),
        Err(e) => return Err(e),
    };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for name in names {
        let path = root.join(&name);
        let bytes = || crate::state::retention::tree_bytes(&path);
        if name.starts_with(REMOVING_PREFIX) {
            if !dry_run {
                collected.freed_bytes += bytes();
                crate::files::remove_tree(&path)?;
            }
            continue;
        }
        if name.starts_with(STAGING_PREFIX) {
            if idle(&path) {
                collected.freed_bytes += bytes();
                if !dry_run {
                    crate::files::remove_tree(&path)?;
                }
            }
            continue;
        }
        if let Some(tree) = name.strip_suffix(SEAL_SUFFIX) {
            // A seal without its tree (a make between writing the seal and
            // publishing the tree is young).
            if bundle_of(tree).is_some() && !root.join(tree).exists() && idle(&path) {
                collected.freed_bytes += bytes();
                if !dry_run {
                    crate::files::remove_tree(&path)?;
                }
            }
            continue;
        }
        let Some((bundle, _, sources)) = bundle_of(&name) else {
            continue;
        };
        let seal = root.join(format!("{name}{SEAL_SUFFIX}"));
        if sealed_sources(*bundle, &seal).is_some_and(|sealed| sealed == *sources) {
            continue;
        }
        let last_use = if seal.exists() { &seal } else { &path };
        if !idle(last_use) {
            continue;
        }
        collected.freed_bytes += bytes() + crate::state::retention::tree_bytes(&seal);
        collected.trees.push(name.clone());
        if dry_run {
            continue;
        }
        let aside = root.join(format!("{REMOVING_PREFIX}{name}"));
        std::fs::rename(&path, &aside)?;
        crate::state::crash_point("sdk:tree-aside");
        crate::files::remove_tree(&seal)?;
        crate::files::remove_tree(&aside)?;
    }
    Ok(collected)
}

/// Collect (as `collect` does) `store`'s support directory with this build's SDKs, now.
pub fn collect_support(
    store: &crate::state::Store,
    dry_run: bool,
) -> Result<Collected, crate::state::StateError> {
    let sdks = [(PYTHON_BUNDLE, PYTHON_SDK), (JS_BUNDLE, JS_SDK)];
    collect(&store.support_dir(), &sdks, SystemTime::now(), dry_run).map_err(
        crate::state::StateError::io("collecting the bundled SDK trees"),
    )
}

/// The sources (relative path to digest) a seal lists: what identifies
/// the build that made its tree. `None` when it cannot be read as one.
fn sealed_sources(bundle: Bundle, seal: &Path) -> Option<BTreeMap<String, String>> {
    let value = flow::json::parse(&std::fs::read(seal).ok()?).ok()?;
    if value.get("format").and_then(|f| f.as_str()) != Some(bundle.format) {
        return None;
    }
    value
        .get("files")?
        .as_object()?
        .iter()
        .filter(|(path, _)| !path.ends_with(".pyc"))
        .map(|(path, digest)| Some((path.clone(), digest.as_str()?.to_string())))
        .collect()
}

include!(concat!(env!("OUT_DIR"), "/python_sdk.rs"));

/// Write the bundled SDK `kind` loads under `dir` as read-only files:
/// `python/jiggy/` (for `PYTHONPATH`), `node_modules/@jigging/flow/` (found
/// by Bun and Node walking up from a package below `dir`), and with it
/// `import_map.json` for Deno. A runtime gets only its own SDK: a Bun Run
/// writes no Python.
pub fn write_runtime_support(dir: &Path, kind: crate::plan::RecipeKind) -> std::io::Result<()> {
    use crate::plan::RecipeKind;
    use std::os::unix::fs::PermissionsExt;
    let write = |target: PathBuf, bytes: &[u8]| -> std::io::Result<()> {
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&target, bytes)?;
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o444))
    };
    match kind {
        RecipeKind::Python => {
            for (path, bytes) in PYTHON_SDK {
                write(dir.join(crate::exec::PYTHON_SUPPORT).join(path), bytes)?;
            }
        }
        RecipeKind::Bun | RecipeKind::Node | RecipeKind::Deno => {
            for (path, bytes) in JS_SDK {
                write(dir.join(crate::exec::JS_SUPPORT).join(path), bytes)?;
            }
            if kind == RecipeKind::Deno {
                let map = json!({ "imports": { "@jigging/flow": format!("./{}/index.js", crate::exec::JS_SUPPORT) } });
                write(
                    dir.join(crate::exec::DENO_IMPORT_MAP),
                    flow::json::canonical_string(&map).as_bytes(),
                )?;
            }
        }
        RecipeKind::Native | RecipeKind::Wasm => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const FILES: &[(&str, &[u8])] = &[("index.js", b"export {};\n"), ("package.json", b"{}\n")];

    #[test]
    fn a_tree_is_made_once_and_a_change_after_a_kept_check_is_still_seen() {
        let root = tempfile::tempdir().unwrap();
        let support = root.path().join("support");
        let tree = javascript(&support, FILES).unwrap();
        assert!(tree.ends_with("flow"), "{}", tree.display());
        let name = tree
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(name.starts_with("js-"), "{name}");
        assert_eq!(
            std::fs::read(tree.join("index.js")).unwrap(),
            b"export {};\n"
        );
        // Checked in full once, then kept: the same answer.
        assert_eq!(javascript(&support, FILES).unwrap(), tree);
        assert_eq!(javascript(&support, FILES).unwrap(), tree);
        // Same size, new bytes: the change time moved, so it is read again.
        let index = tree.join("index.js");
        std::fs::set_permissions(&index, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::write(&index, b"export {};\r").unwrap();
        std::fs::set_permissions(&index, std::fs::Permissions::from_mode(0o444)).unwrap();
        let refused = javascript(&support, FILES).unwrap_err();
        assert!(
            refused.contains("index.js has different bytes"),
            "{refused}"
        );
        // A file added beside the SDK is refused too.
        std::fs::write(&index, b"export {};\n").unwrap_or_else(|_| {
            std::fs::set_permissions(&index, std::fs::Permissions::from_mode(0o644)).unwrap();
            std::fs::write(&index, b"export {};\n").unwrap();
            std::fs::set_permissions(&index, std::fs::Permissions::from_mode(0o444)).unwrap();
        });
        std::fs::write(tree.join("extra.js"), b"").unwrap();
        let refused = javascript(&support, FILES).unwrap_err();
        assert!(refused.contains("extra.js is not part of it"), "{refused}");
    }

    #[test]
    fn another_build_of_the_sdk_gets_a_tree_of_its_own() {
        let root = tempfile::tempdir().unwrap();
        let a = javascript(root.path(), FILES).unwrap();
        let b = javascript(root.path(), &[("index.js", b"export const x = 1;\n")]).unwrap();
        assert_ne!(a, b);
        assert!(a.exists() && b.exists());
    }

    const OURS: &[(&str, &[u8])] = &[("jiggy/flow.py", b"ours")];
    const THEIRS: &[(&str, &[u8])] = &[("jiggy/flow.py", b"theirs")];

    fn set_mtime(path: &Path, at: SystemTime) {
        std::fs::File::open(path).unwrap().set_modified(at).unwrap();
    }

    /// A sealed tree `name` of `files` below `root` (sources and one
    /// bytecode file, as `make` leaves them), last used `age` before `now`.
    fn sealed(root: &Path, name: &str, files: Files, now: SystemTime, age: Duration) {
        let mut digests = serde_json::Map::new();
        for (path, bytes) in files {
            let file = root.join(name).join(IMPORT_ROOT).join(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, bytes).unwrap();
            digests.insert(
                format!("{IMPORT_ROOT}/{path}"),
                json!(flow::digest::sha256_digest(bytes)),
            );
        }
        digests.insert(
            format!("{IMPORT_ROOT}/jiggy/__pycache__/flow.cpython-312.pyc"),
            json!(flow::digest::sha256_digest(name.as_bytes())),
        );
        let seal = root.join(format!("{name}{SEAL_SUFFIX}"));
        let value = json!({"format": PYTHON_BUNDLE.format, "files": digests});
        std::fs::write(&seal, flow::json::canonical(&value)).unwrap();
        set_mtime(&seal, now - age);
    }

    fn names(root: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn another_builds_tree_goes_one_second_past_its_grace_and_not_before() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let now = SystemTime::now();
        sealed(root, "python-inside", THEIRS, now, SUPPORT_GRACE - SECOND);
        sealed(root, "python-past", THEIRS, now, SUPPORT_GRACE + SECOND);
        let before = names(root);
        let dry = collect(root, &[(PYTHON_BUNDLE, OURS)], now, true).unwrap();
        assert_eq!(dry.trees, ["python-past"]);
        assert!(dry.freed_bytes > 0);
        assert_eq!(names(root), before, "a dry run changes nothing");
        let wet = collect(root, &[(PYTHON_BUNDLE, OURS)], now, false).unwrap();
        assert_eq!(wet, dry);
        assert_eq!(names(root), ["python-inside", "python-inside.seal"]);
        assert_eq!(
            collect(root, &[(PYTHON_BUNDLE, OURS)], now, false).unwrap(),
            Collected::default()
        );
    }

    #[test]
    fn this_builds_trees_stay_however_long_unused() {
        let dir = tempfile::tempdir().unwrap();
        let now = SystemTime::now();
        let long = SUPPORT_GRACE * 10;
        sealed(dir.path(), "python-ours", OURS, now, long);
        sealed(dir.path(), "python-ours-other-runtime", OURS, now, long);
        assert_eq!(
            collect(dir.path(), &[(PYTHON_BUNDLE, OURS)], now, false)
                .unwrap()
                .trees
                .len(),
            0
        );
        assert_eq!(names(dir.path()).len(), 4);
    }

    #[test]
    fn a_tree_without_a_seal_ages_from_its_own_mtime() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let now = SystemTime::now();
        for (name, age) in [
            ("python-young", SUPPORT_GRACE - SECOND),
            ("python-old", SUPPORT_GRACE + SECOND),
        ] {
            sealed(root, name, THEIRS, now, age);
            std::fs::remove_file(root.join(format!("{name}.seal"))).unwrap();
            set_mtime(&root.join(name), now - age);
        }
        let collected = collect(root, &[(PYTHON_BUNDLE, OURS)], now, false).unwrap();
        assert_eq!(collected.trees, ["python-old"]);
        assert_eq!(names(root), ["python-young"]);
    }

    /// What crashes leave: a seal without its tree and a staging
    /// directory go past the grace (younger, a make may be writing them);
    /// a tree renamed aside goes at once.
    #[test]
    fn leftovers_of_a_crash_go_and_a_make_in_progress_stays() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let now = SystemTime::now();
        for (name, age) in [
            ("python-a", SUPPORT_GRACE - SECOND),
            ("python-b", SUPPORT_GRACE + SECOND),
        ] {
            sealed(root, name, OURS, now, age);
            crate::files::remove_tree(&root.join(name)).unwrap();
        }
        for (name, age) in [
            (".jig-sdk-young", SUPPORT_GRACE - SECOND),
            (".jig-sdk-old", SUPPORT_GRACE + SECOND),
        ] {
            std::fs::create_dir_all(root.join(name).join("tree")).unwrap();
            set_mtime(&root.join(name), now - age);
        }
        sealed(root, ".removing-python-c", THEIRS, now, Duration::ZERO);
        std::fs::remove_file(root.join(".removing-python-c.seal")).unwrap();
        let collected = collect(root, &[(PYTHON_BUNDLE, OURS)], now, false).unwrap();
        assert!(collected.trees.is_empty(), "{collected:?}");
        assert_eq!(names(root), [".jig-sdk-young", "python-a.seal"]);
    }

    /// JavaScript trees are collected by the same rule, by their own
    /// sources: another build's goes past the grace, this build's stays.
    #[test]
    fn another_builds_javascript_tree_goes_and_this_builds_stays() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let ours: &[(&str, &[u8])] = &[("index.js", b"export {};\n")];
        let theirs: &[(&str, &[u8])] = &[("index.js", b"export const old = 1;\n")];
        let kept = javascript(root, ours).unwrap();
        let old = javascript(root, theirs).unwrap();
        let now = SystemTime::now() + SUPPORT_GRACE + SECOND;
        let sdks = [(PYTHON_BUNDLE, OURS), (JS_BUNDLE, ours)];
        let collected = collect(root, &sdks, now, false).unwrap();
        let old_name = old.parent().unwrap().file_name().unwrap().to_string_lossy();
        assert_eq!(collected.trees, [old_name.to_string()]);
        assert!(kept.exists() && !old.exists());
    }

    #[test]
    fn a_use_stamps_the_seal_at_most_once_a_minute() {
        let dir = tempfile::tempdir().unwrap();
        let seal = dir.path().join("python-x.seal");
        std::fs::write(&seal, "{}").unwrap();
        let modified = || std::fs::metadata(&seal).unwrap().modified().unwrap();
        let inside = SystemTime::now() - (STAMP_RESOLUTION - SECOND);
        set_mtime(&seal, inside);
        stamp_use(&seal);
        assert_eq!(modified(), inside, "stamped within the minute: kept");
        let past = SystemTime::now() - STAMP_RESOLUTION;
        set_mtime(&seal, past);
        stamp_use(&seal);
        assert!(modified() > past, "stamped again");
    }
}
