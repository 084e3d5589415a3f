//! Installation verification (seed 002 §9): how the SHA-256 of an installed
//! runtime or support file is obtained at each verification boundary.
//!
//! - `cached` (default) reuses a digest while the file's canonical path,
//!   device, inode, owner, mode, link count, size, modification and change
//!   times (nanoseconds) all match what was recorded; otherwise it hashes
//!   and checks the metadata again before keeping the digest.
//! - `strict` hashes every time and never reads or writes the cache.
//! - `fast` trusts a stored digest for the canonical path without looking
//!   at freshness; a miss still hashes.
//!
//! Whatever the policy, one command hashes a file at most once. The cache
//! is disposable, owner-private storage outside project source; an unsafe
//! location, a symlinked route, an invalid entry or any cache failure falls
//! back to fresh hashing. It grants nothing: it only saves work. The
//! policy is host performance policy, never project or capability input.
//!
//! This crate owns that identity of trusted installed files (runtimes,
//! containment tools, support libraries) and the eligibility of an
//! installed executable. It knows nothing of projects, packages or Runs,
//! and must never decide what runs: it only says which bytes are installed.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use flow::json::Value;
use serde_json::json;

/// The host environment variable a `--verification` flag overrides.
pub const VARIABLE: &str = "JIG_VERIFICATION";
/// Where the cache lives below `$XDG_CACHE_HOME` (or `$HOME/.cache`).
pub const CACHE_DIR: &str = "jig/installation-verification";
/// The cache file in that directory.
pub const CACHE_FILE: &str = "entries.json";
/// The cache is bounded: at most this many paths are kept (the most
/// recently verified win).
pub const MAX_ENTRIES: usize = 4096;
/// A cache file larger than this is not read (it is invalid).
pub const MAX_CACHE_BYTES: u64 = 4 * 1024 * 1024;
/// A remembered probe answer (such as `bwrap --version`) is at most this long.
pub const MAX_PROBE_CHARS: usize = 1024;
/// The cache file's format.
const FORMAT: &str = "jig-installation-verification/1";

/// An installed executable is eligible only at an absolute path naming a
/// regular file with an execute bit (seed 002 §9: executable and path
/// eligibility holds under every verification policy).
pub fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.is_absolute()
        && std::fs::metadata(path)
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Cached,
    Strict,
    Fast,
}

impl Policy {
    pub const NAMES: [&'static str; 3] = ["cached", "strict", "fast"];

    pub fn parse(text: &str) -> Option<Policy> {
        match text {
            "cached" => Some(Policy::Cached),
            "strict" => Some(Policy::Strict),
            "fast" => Some(Policy::Fast),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Cached => "cached",
            Policy::Strict => "strict",
            Policy::Fast => "fast",
        }
    }

    /// The effective policy: the flag, else `JIG_VERIFICATION`, else
    /// `cached`. An invalid variable is a configuration error unless a
    /// valid flag overrides it.
    pub fn effective(flag: Option<Policy>, variable: Option<&OsStr>) -> Result<Policy, Error> {
        if let Some(policy) = flag {
            return Ok(policy);
        }
        match variable {
            None => Ok(Policy::Cached),
            Some(value) => value.to_str().and_then(Policy::parse).ok_or_else(|| {
                Error::PolicyInvalid(format!(
                    "{VARIABLE} must be {} (it is {:?})",
                    Policy::NAMES.join(", "),
                    value.to_string_lossy()
                ))
            }),
        }
    }
}

/// The metadata a `cached` digest is valid for: no write to a file keeps
/// all of it (its change time cannot be set back). Also how other kept
/// checks (the bundled SDK trees) tell that a file is as it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    dev: u64,
    ino: u64,
    uid: u32,
    gid: u32,
    mode: u32,
    nlink: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Observed {
    pub fn of(meta: &std::fs::Metadata) -> Observed {
        Observed {
            dev: meta.dev(),
            ino: meta.ino(),
            uid: meta.uid(),
            gid: meta.gid(),
            mode: meta.mode(),
            nlink: meta.nlink(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    fn to_value(&self, digest: &str) -> Value {
        json!({
            "dev": self.dev, "ino": self.ino, "uid": self.uid, "gid": self.gid,
            "mode": self.mode, "nlink": self.nlink, "size": self.size,
            "mtime": [self.mtime.0, self.mtime.1], "ctime": [self.ctime.0, self.ctime.1],
            "digest": digest,
        })
    }

    fn from_value(value: &Value) -> Option<(Observed, String)> {
        let u = |k: &str| value.get(k).and_then(Value::as_u64);
        let pair = |k: &str| {
            let a = value.get(k)?.as_array()?;
            match a.as_slice() {
                [s, n] => Some((s.as_i64()?, n.as_i64()?)),
                _ => None,
            }
        };
        let digest = value.get("digest")?.as_str()?;
        let valid = digest.len() == 71
            && digest.starts_with("sha256:")
            && digest[7..]
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase());
        if !valid || value.as_object()?.len() != 10 {
            return None;
        }
        Some((
            Observed {
                dev: u("dev")?,
                ino: u("ino")?,
                uid: u32::try_from(u("uid")?).ok()?,
                gid: u32::try_from(u("gid")?).ok()?,
                mode: u32::try_from(u("mode")?).ok()?,
                nlink: u("nlink")?,
                size: u("size")?,
                mtime: pair("mtime")?,
                ctime: pair("ctime")?,
            },
            digest.to_string(),
        ))
    }
}

/// One command's verifier: its policy, the cache (when usable), and the
/// digests this command already computed.
pub struct Verifier {
    policy: Policy,
    /// The cache directory, when its route is safe.
    cache: Option<PathBuf>,
    /// May this command update the cache? (`jig doctor` may not.)
    writes: bool,
    /// Keep what this command computed for the rest of it (a command
    /// hashes a file once); off for a daemon, where every Run is its own
    /// verification boundary, and for library use outside one command.
    remember: bool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Canonical path → digest, computed or accepted by this command.
    memo: BTreeMap<PathBuf, String>,
    /// The cache as read (canonical path → observed, digest).
    entries: Option<BTreeMap<String, (Observed, String)>>,
    /// Entries this command verified, to write back.
    fresh: BTreeMap<String, (Observed, String)>,
    /// Probe answers by `<tool digest> <question>`, as read and as added.
    probes: Option<BTreeMap<String, String>>,
    fresh_probes: BTreeMap<String, String>,
    /// How many files this command hashed (for tests of the policy).
    hashed: usize,
    /// Did this command learn anything the cache does not hold (a digest
    /// it hashed, a probe it asked)? Only then is the cache rewritten, so
    /// an unchanged installation costs a Run no write and no fsync.
    learned: bool,
}

impl Verifier {
    /// A verifier for `policy` with the cache at `cache` (already checked
    /// safe, or `None`), writing it back only when `writes`.
    pub fn new(policy: Policy, cache: Option<PathBuf>, writes: bool) -> Verifier {
        Verifier {
            policy,
            cache: if policy == Policy::Strict {
                None
            } else {
                cache
            },
            writes,
            remember: true,
            state: Mutex::new(State::default()),
        }
    }

    /// The verifier of this command under the process environment.
    pub fn for_command(policy: Policy, writes: bool) -> Verifier {
        Verifier::new(policy, cache_dir(writes), writes)
    }

    /// The verifier of a daemon (`jig serve`, `jig worker`): every call is
    /// its own verification boundary, so nothing is taken on trust from an
    /// earlier Run except what the policy allows of the cache (under
    /// `cached`, a digest while the file's metadata is unchanged: a stat,
    /// not a hash of a 100 MB runtime on every Run). What it learns is
    /// kept in memory and written back by [`Verifier::persist`].
    pub fn for_daemon(policy: Policy) -> Verifier {
        Verifier {
            remember: false,
            ..Verifier::new(policy, cache_dir(true), true)
        }
    }

    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Does this command write the cache (`doctor` reads it, never writes)?
    pub fn writes(&self) -> bool {
        self.writes
    }

    /// How many files this command hashed so far.
    pub fn hashed(&self) -> usize {
        self.lock().hashed
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `sha256:<hex>` of the installed file at `path` under this policy.
    pub fn digest(&self, path: &Path) -> std::io::Result<String> {
        let real = std::fs::canonicalize(path)?;
        let mut state = self.lock();
        if !self.remember {
            // A new boundary: nothing this verifier saw counts unchecked.
            state.memo.clear();
            if self.policy == Policy::Strict {
                state.fresh_probes.clear();
            }
        }
        if let Some(digest) = state.memo.get(&real) {
            return Ok(digest.clone());
        }
        let key = real.to_string_lossy().to_string();
        let before = std::fs::metadata(&real)?;
        let observed = Observed::of(&before);
        let usable = |seen: &Observed| match self.policy {
            Policy::Fast => true,
            Policy::Cached => *seen == observed,
            Policy::Strict => false,
        };
        // What this verifier hashed at an earlier boundary, then the cache.
        if let Some((seen, digest)) = state.fresh.get(&key).cloned() {
            if usable(&seen) {
                state.memo.insert(real, digest.clone());
                return Ok(digest);
            }
        }
        if self.cache.is_some() {
            self.load(&mut state);
            let stored = state.entries.as_ref().and_then(|e| e.get(&key)).cloned();
            if let Some((seen, digest)) = stored {
                if usable(&seen) {
                    state.memo.insert(real, digest.clone());
                    state.fresh.insert(key, (seen, digest.clone()));
                    return Ok(digest);
                }
            }
        }
        let digest = hash_file(&real)?;
        state.hashed += 1;
        state.memo.insert(real.clone(), digest.clone());
        // Kept only when nothing changed while it was read.
        let after = Observed::of(&std::fs::metadata(&real)?);
        if after == observed && self.policy != Policy::Strict {
            state.fresh.insert(key, (observed, digest.clone()));
            if self.cache.is_some() {
                state.learned = true;
            }
        }
        Ok(digest)
    }

    /// Write what this command verified back to the cache (best effort:
    /// a failure only means the next command hashes again).
    pub fn persist(&self) {
        let (Some(dir), true) = (&self.cache, self.writes) else {
            return;
        };
        let mut state = self.lock();
        if !state.learned {
            return;
        }
        self.load(&mut state);
        let mut entries = state.entries.take().unwrap_or_default();
        // Answers are kept only for tools this command verified (or that
        // the cache still holds), so a replaced tool's answers go with it.
        let mut probes = state.probes.take().unwrap_or_default();
        probes.extend(state.fresh_probes.clone());
        let fresh = state.fresh.clone();
        // The entries just verified go last, so a full cache drops entries
        // this command did not verify first.
        for key in fresh.keys() {
            entries.remove(key);
        }
        let mut ordered: Vec<(String, (Observed, String))> = entries.into_iter().collect();
        ordered.extend(fresh);
        let keep = ordered.len().saturating_sub(MAX_ENTRIES);
        let entries: serde_json::Map<String, Value> = ordered
            .into_iter()
            .skip(keep)
            .map(|(k, (o, d))| (k, o.to_value(&d)))
            .collect();
        let digests: std::collections::BTreeSet<&str> = entries
            .values()
            .filter_map(|e| e.get("digest").and_then(Value::as_str))
            .collect();
        let probes: serde_json::Map<String, Value> = probes
            .into_iter()
            .filter(|(k, _)| k.split(' ').next().is_some_and(|d| digests.contains(d)))
            .map(|(k, v)| (k, Value::String(v)))
            .collect();
        let value = json!({
            "format": FORMAT,
            "entries": Value::Object(entries),
            "probes": Value::Object(probes),
        });
        let _ = write_cache(dir, &flow::json::canonical(&value));
        // Written: a daemon calling this after every Run writes again only
        // when it learns something new.
        state.learned = false;
        state.entries = None;
        state.probes = None;
    }

    /// Read the cache file once per command, for its entries and its
    /// probes alike.
    fn load(&self, state: &mut State) {
        if state.entries.is_some() && state.probes.is_some() {
            return;
        }
        let (entries, probes) = match &self.cache {
            Some(dir) => read_cache(dir).unwrap_or_default(),
            None => Default::default(),
        };
        state.entries.get_or_insert(entries);
        state.probes.get_or_insert(probes);
    }

    /// The answer of an installed tool to `question` (its `--version`, say):
    /// remembered by the tool's verified digest, so a changed tool is asked
    /// again; asked every time under `strict`. `ask` runs the tool.
    pub fn probe(
        &self,
        tool: &Path,
        question: &str,
        ask: impl FnOnce() -> Result<String, String>,
    ) -> Result<String, String> {
        let digest = self
            .digest(tool)
            .map_err(|e| format!("{} cannot be read: {e}", tool.display()))?;
        let key = format!("{digest} {question}");
        {
            let mut state = self.lock();
            if let Some(answer) = state.fresh_probes.get(&key) {
                return Ok(answer.clone());
            }
            if self.cache.is_some() {
                self.load(&mut state);
                if let Some(answer) = state.probes.as_ref().and_then(|p| p.get(&key)).cloned() {
                    state.fresh_probes.insert(key, answer.clone());
                    return Ok(answer);
                }
            }
        }
        let answer = ask()?;
        if answer.chars().count() <= MAX_PROBE_CHARS {
            let mut state = self.lock();
            state.fresh_probes.insert(key, answer.clone());
            state.learned = true;
        }
        Ok(answer)
    }
}

fn hash_file(path: &Path) -> std::io::Result<String> {
    use sha2::Digest;
    let mut file = std::fs::File::open(path)?;
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(flow::digest::finish(hasher))
}

/// The cache directory under this environment, if its route is safe:
/// `$XDG_CACHE_HOME` (absolute) or `$HOME/.cache`, then `jig/` and
/// `installation-verification/`, each a real directory (no symlink) owned
/// by this user and writable by nobody else. With `create`, a missing
/// cache home and missing directories below it are made (mode 0700).
pub fn cache_dir(create: bool) -> Option<PathBuf> {
    let home = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(|h| h.join(".cache"))
        })?;
    safe_route(&home, create)
}

/// `base/jig/installation-verification` when `base` is writable by this
/// user (or root) alone and every directory below it is a real directory
/// of this user's that nobody else can write (see [`cache_dir`]).
pub fn safe_route(base: &Path, create: bool) -> Option<PathBuf> {
    let uid = nix::unistd::geteuid().as_raw();
    // A cache home that does not exist yet is made (mode 0700), as the XDG
    // base directory rules ask of a program writing there: a fresh account
    // has no `~/.cache`, and without one nothing would ever be kept.
    if create && std::fs::symlink_metadata(base).is_err() {
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(base);
    }
    // The cache home itself: a directory of this user's (or root's) that
    // nobody else can write, so nobody else can swap what lies below it.
    let meta = std::fs::metadata(base).ok()?;
    if !meta.is_dir() || (meta.uid() != uid && meta.uid() != 0) || meta.mode() & 0o022 != 0 {
        return None;
    }
    let mut dir = base.to_path_buf();
    for part in CACHE_DIR.split('/') {
        dir.push(part);
        let meta = match std::fs::symlink_metadata(&dir) {
            Ok(meta) => meta,
            Err(_) if create => {
                std::fs::DirBuilder::new().mode(0o700).create(&dir).ok()?;
                std::fs::symlink_metadata(&dir).ok()?
            }
            Err(_) => return None,
        };
        let private = meta.is_dir() && meta.uid() == uid && meta.mode() & 0o022 == 0;
        if !private {
            return None;
        }
    }
    Some(dir)
}

type Cache = (
    BTreeMap<String, (Observed, String)>,
    BTreeMap<String, String>,
);

/// The bytes of a file of this user's, read through no link: `None` when
/// it is missing, not a regular file, someone else's, larger than
/// `max_bytes`, or, when it must be `private`, open to anyone else.
pub fn read_own(path: &Path, max_bytes: u64, private: bool) -> Option<Vec<u8>> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file()
        || meta.uid() != nix::unistd::geteuid().as_raw()
        || meta.len() > max_bytes
        || (private && meta.mode() & 0o077 != 0)
    {
        return None;
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

fn read_cache(dir: &Path) -> Option<Cache> {
    let bytes = read_own(&dir.join(CACHE_FILE), MAX_CACHE_BYTES, false)?;
    let value = flow::json::parse(&bytes).ok()?;
    if value.get("format").and_then(Value::as_str) != Some(FORMAT) {
        return None;
    }
    let mut out = BTreeMap::new();
    for (path, entry) in value.get("entries")?.as_object()? {
        // An invalid entry is ignored: that path is hashed afresh.
        if let Some(parsed) = Observed::from_value(entry) {
            out.insert(path.clone(), parsed);
        }
    }
    let mut probes = BTreeMap::new();
    if let Some(map) = value.get("probes").and_then(Value::as_object) {
        for (key, answer) in map {
            if let Some(text) = answer
                .as_str()
                .filter(|t| t.chars().count() <= MAX_PROBE_CHARS)
            {
                probes.insert(key.clone(), text.to_string());
            }
        }
    }
    Some((out, probes))
}

fn write_cache(dir: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut temp = tempfile::Builder::new()
        .prefix(".entries-")
        .tempfile_in(dir)?;
    temp.write_all(bytes)?;
    temp.write_all(b"\n")?;
    temp.as_file().sync_all()?;
    temp.persist(dir.join(CACHE_FILE)).map_err(|e| e.error)?;
    Ok(())
}

/// A support program of the installation (such as the ACP Agent worker
/// `jig-agent-acp`): the executable regular file `name` beside the running
/// `jig` (in its executable's directory), or the fixed reason it is not
/// there. Its digest is taken with [`Verifier::digest`] like any other
/// installed file's.
pub fn installed(name: &str) -> Result<PathBuf, Error> {
    let missing = Error::NotInstalled;
    let exe = std::env::current_exe()
        .map_err(|e| missing(format!("cannot find the jig executable: {e}")))?;
    let path = exe
        .parent()
        .map(|dir| dir.join(name))
        .ok_or_else(|| missing("the jig executable has no directory".to_string()))?;
    match std::fs::metadata(&path) {
        Ok(meta) if meta.is_file() && meta.mode() & 0o111 != 0 => Ok(path),
        _ => Err(missing(format!(
            "{name} is not installed beside jig (expected the executable {}); install it with jig, or build it with `cargo build --manifest-path providers/acp/Cargo.toml --target-dir target`",
            path.display()
        ))),
    }
}

/// This crate's one error type, each with its stable code ([`Error::code`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// `JIG_CONFIG_INVALID`: `JIG_VERIFICATION` names no policy.
    #[error("{0}")]
    PolicyInvalid(String),
    /// `UNAVAILABLE`: a support program is not installed beside `jig`.
    #[error("{0}")]
    NotInstalled(String),
}

impl Error {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Error::PolicyInvalid(_) => "JIG_CONFIG_INVALID",
            Error::NotInstalled(_) => "UNAVAILABLE",
        }
    }
}

/// Bound a cache directory to its `max` newest entries: remove the oldest
/// (by modification time) past it, never `kept` (the one just written)
/// nor a temporary (dot) file. A removed entry is only work to redo.
pub fn keep_newest(dir: &Path, max: usize, kept: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut others: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .filter(|(_, path)| path != kept)
        .collect();
    let excess = (others.len() + 1).saturating_sub(max);
    others.sort();
    for (_, path) in others.into_iter().take(excess) {
        let _ = std::fs::remove_file(path);
    }
}

static CURRENT: OnceLock<Verifier> = OnceLock::new();

/// Fix this command's verifier; the policy is captured once, before the
/// project is loaded, and kept for the rest of the command.
pub fn install(verifier: Verifier) {
    let _ = CURRENT.set(verifier);
}

/// This command's verifier (`strict`, without a cache and without
/// remembering, when none was installed, as for library use outside the CLI).
pub fn current() -> &'static Verifier {
    CURRENT.get_or_init(|| Verifier {
        remember: false,
        ..Verifier::new(Policy::Strict, None, false)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_newest_removes_the_oldest_past_the_bound_and_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let start = std::time::SystemTime::now() - std::time::Duration::from_secs(1000);
        let write = |name: &str, age: u64| {
            let path = dir.path().join(name);
            std::fs::write(&path, b"x").unwrap();
            let file = std::fs::File::options().write(true).open(&path).unwrap();
            file.set_modified(start + std::time::Duration::from_secs(age))
                .unwrap();
            path
        };
        write("a", 0);
        write("b", 1);
        write(".temp", 0);
        let kept = write("c", 2);
        // At the bound (three entries, the one kept included): nothing goes.
        keep_newest(dir.path(), 3, &kept);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 4);
        // One past it: the oldest goes; the temporary is not counted.
        keep_newest(dir.path(), 2, &kept);
        assert!(!dir.path().join("a").exists());
        assert!(dir.path().join("b").exists());
        assert!(dir.path().join(".temp").exists());
        assert!(kept.exists());
    }
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_flag_wins_then_the_variable_then_cached() {
        assert_eq!(Policy::effective(None, None), Ok(Policy::Cached));
        let fast = OsStr::new("fast");
        assert_eq!(Policy::effective(None, Some(fast)), Ok(Policy::Fast));
        assert_eq!(
            Policy::effective(Some(Policy::Strict), Some(fast)),
            Ok(Policy::Strict)
        );
        let bad = OsStr::new("inspect");
        assert!(Policy::effective(None, Some(bad)).is_err());
        assert_eq!(
            Policy::effective(Some(Policy::Cached), Some(bad)),
            Ok(Policy::Cached)
        );
    }

    fn private_base() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        dir
    }

    #[test]
    fn each_policy_over_an_in_place_edit_that_keeps_the_mtime() {
        let base = private_base();
        let cache = safe_route(base.path(), true).unwrap();
        let file = base.path().join("runtime");
        std::fs::write(&file, b"one").unwrap();
        let first = Verifier::new(Policy::Cached, Some(cache.clone()), true);
        let original = first.digest(&file).unwrap();
        // Asked again in the same command: not hashed again.
        assert_eq!(first.digest(&file).unwrap(), original);
        assert_eq!(first.hashed(), 1);
        first.persist();

        let hit = Verifier::new(Policy::Cached, Some(cache.clone()), true);
        assert_eq!(hit.digest(&file).unwrap(), original);
        assert_eq!(hit.hashed(), 0, "a cached hit hashes nothing");

        // Same size, new bytes, modification time put back: ctime moved.
        let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();
        std::fs::write(&file, b"two").unwrap();
        let f = std::fs::File::options().write(true).open(&file).unwrap();
        f.set_modified(mtime).unwrap();
        drop(f);

        let cached = Verifier::new(Policy::Cached, Some(cache.clone()), false);
        assert_ne!(cached.digest(&file).unwrap(), original, "cached sees it");
        let fast = Verifier::new(Policy::Fast, Some(cache.clone()), false);
        assert_eq!(
            fast.digest(&file).unwrap(),
            original,
            "fast trusts the path"
        );
        assert_eq!(fast.hashed(), 0);
        let strict = Verifier::new(Policy::Strict, Some(cache), false);
        assert_ne!(strict.digest(&file).unwrap(), original);
        assert_eq!(strict.hashed(), 1);
    }

    #[test]
    fn unsafe_routes_are_not_used() {
        let base = private_base();
        // Writable by others.
        let open = base.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(safe_route(&open, true).is_none());
        // A symlink on the route.
        let real = base.path().join("real");
        std::fs::create_dir_all(real.join("installation-verification")).unwrap();
        let home = base.path().join("home");
        std::fs::create_dir(&home).unwrap();
        std::os::unix::fs::symlink(&real, home.join("jig")).unwrap();
        assert!(safe_route(&home, true).is_none());
        // Without `create`, a missing cache directory is simply absent.
        assert!(safe_route(base.path(), false).is_none());
        assert!(!base.path().join("jig").exists());
        assert!(safe_route(&base.path().join("missing"), false).is_none());
        assert!(!base.path().join("missing").exists());
    }

    #[test]
    fn a_missing_cache_home_is_made_private() {
        let base = private_base();
        let home = base.path().join("fresh/.cache");
        let cache = safe_route(&home, true).expect("the cache home is made");
        assert_eq!(cache, home.join("jig/installation-verification"));
        for dir in [base.path().join("fresh"), home.clone(), cache] {
            let mode = std::fs::metadata(&dir).unwrap().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", dir.display());
        }
    }

    #[test]
    fn corrupt_or_invalid_entries_fall_back_to_hashing_and_are_rewritten() {
        let base = private_base();
        let cache = safe_route(base.path(), true).unwrap();
        let file = base.path().join("runtime");
        std::fs::write(&file, b"bytes").unwrap();
        std::fs::write(cache.join(CACHE_FILE), b"{not json").unwrap();
        let v = Verifier::new(Policy::Fast, Some(cache.clone()), true);
        let digest = v.digest(&file).unwrap();
        assert_eq!(v.hashed(), 1);
        v.persist();
        let key = std::fs::canonicalize(&file).unwrap();
        let key = key.to_string_lossy();
        // A well-formed file whose entry for this path is invalid.
        let bad = json!({"format": FORMAT, "entries": {key.as_ref(): {"digest": "sha256:zz"}}});
        std::fs::write(cache.join(CACHE_FILE), flow::json::canonical(&bad)).unwrap();
        let v = Verifier::new(Policy::Fast, Some(cache.clone()), true);
        assert_eq!(v.digest(&file).unwrap(), digest);
        assert_eq!(v.hashed(), 1, "the invalid entry was not trusted");
        v.persist();
        let again = Verifier::new(Policy::Fast, Some(cache), false);
        assert_eq!(again.digest(&file).unwrap(), digest);
        assert_eq!(again.hashed(), 0, "rewritten valid");
    }

    #[test]
    fn a_reader_never_writes_and_strict_never_touches_the_cache() {
        let base = private_base();
        let cache = safe_route(base.path(), true).unwrap();
        let file = base.path().join("runtime");
        std::fs::write(&file, b"bytes").unwrap();
        let reader = Verifier::new(Policy::Cached, Some(cache.clone()), false);
        reader.digest(&file).unwrap();
        reader.persist();
        assert!(!cache.join(CACHE_FILE).exists());
        let strict = Verifier::new(Policy::Strict, Some(cache.clone()), true);
        strict.digest(&file).unwrap();
        strict.persist();
        assert!(!cache.join(CACHE_FILE).exists());
    }

    #[test]
    fn a_probe_is_asked_once_per_tool_revision() {
        let base = private_base();
        let cache = safe_route(base.path(), true).unwrap();
        let tool = base.path().join("tool");
        std::fs::write(&tool, b"v1").unwrap();
        let asked = std::cell::Cell::new(0);
        let ask = || {
            asked.set(asked.get() + 1);
            Ok(format!("tool {}", asked.get()))
        };
        let v = Verifier::new(Policy::Cached, Some(cache.clone()), true);
        assert_eq!(v.probe(&tool, "version", ask).unwrap(), "tool 1");
        assert_eq!(v.probe(&tool, "version", ask).unwrap(), "tool 1");
        v.persist();
        let v = Verifier::new(Policy::Cached, Some(cache.clone()), true);
        assert_eq!(v.probe(&tool, "version", ask).unwrap(), "tool 1");
        assert_eq!(asked.get(), 1, "remembered across commands");
        std::fs::write(&tool, b"v2").unwrap();
        let v = Verifier::new(Policy::Cached, Some(cache.clone()), true);
        assert_eq!(v.probe(&tool, "version", ask).unwrap(), "tool 2");
        let strict = Verifier::new(Policy::Strict, Some(cache), true);
        assert_eq!(strict.probe(&tool, "version", ask).unwrap(), "tool 3");
    }

    #[test]
    fn a_daemon_hashes_a_file_once_while_it_is_unchanged_and_again_after_a_change() {
        let base = private_base();
        let cache = safe_route(base.path(), true).unwrap();
        let file = base.path().join("runtime");
        std::fs::write(&file, b"revision a").unwrap();
        let daemon = Verifier {
            remember: false,
            ..Verifier::new(Policy::Cached, Some(cache.clone()), true)
        };
        let first = daemon.digest(&file).unwrap();
        for _ in 0..3 {
            assert_eq!(daemon.digest(&file).unwrap(), first);
        }
        assert_eq!(daemon.hashed(), 1, "each Run stats, none hashes again");
        daemon.persist();
        assert!(cache.join(CACHE_FILE).exists(), "what it learned is kept");
        std::fs::remove_file(cache.join(CACHE_FILE)).unwrap();
        daemon.digest(&file).unwrap();
        daemon.persist();
        assert!(
            !cache.join(CACHE_FILE).exists(),
            "nothing new learned, nothing written"
        );
        // The same length, the modification time kept: the change time
        // still moves, and the next boundary hashes the new bytes.
        let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();
        std::fs::write(&file, b"revision b").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        let second = daemon.digest(&file).unwrap();
        assert_ne!(second, first);
        assert_eq!(daemon.hashed(), 2);
        assert_eq!(daemon.digest(&file).unwrap(), second);
        assert_eq!(daemon.hashed(), 2);
        // Under `strict` every boundary hashes.
        let strict = Verifier {
            remember: false,
            ..Verifier::new(Policy::Strict, Some(cache), true)
        };
        for _ in 0..3 {
            strict.digest(&file).unwrap();
        }
        assert_eq!(strict.hashed(), 3);
    }

    #[test]
    fn the_cache_keeps_at_most_max_entries() {
        let base = private_base();
        let cache = safe_route(base.path(), true).unwrap();
        let files = base.path().join("files");
        std::fs::create_dir(&files).unwrap();
        let v = Verifier::new(Policy::Cached, Some(cache.clone()), true);
        for i in 0..=MAX_ENTRIES {
            let f = files.join(format!("f{i:05}"));
            std::fs::write(&f, i.to_string()).unwrap();
            v.digest(&f).unwrap();
        }
        v.persist();
        let (kept, _) = read_cache(&cache).unwrap();
        assert_eq!(kept.len(), MAX_ENTRIES, "the limit plus one drops one");
    }
}
