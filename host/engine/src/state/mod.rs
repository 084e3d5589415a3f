//! Protected project state under `.jig/`: one owner at a time, a
//! content-addressed store for admitted bytes, retained Plans, admission
//! generations advanced by one compare-and-set, and durable Run records.
//!
//! Nothing here reads project source or decides what a Plan means; it keeps
//! exactly what it is given and refuses state it cannot validate
//! (`PROJECT_STATE_INVALID`). Every write that matters goes through
//! [`write_atomic`]: a temporary file, fsync, rename, fsync of the directory.

mod checkpoints;
pub mod lock;
mod records;
pub mod retention;
mod sources;
mod store;

pub use checkpoints::{Aggregate, Checkpoints, Mirror};
pub use records::{
    is_run_id, utc_text, Listing, RunRecord, Runs, RunsError, Submission, Unreadable,
};
pub(crate) use records::{retain_input, DEFAULT_SETTLE_RESERVE_BYTES};
pub use sources::Sources;
pub use store::Store;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use flow::digest::sha256_digest;
use flow::json::Value;

pub const STATE_DIR: &str = ".jig";
/// Where a daemon keeps the packets of its file Runs under `.jig/`, one per
/// Run id (`GET .../runs/{id}/packet` reads them).
pub const PACKET_STORE: &str = "packets";
/// The entry under `.jig/` where a `jig serve` holding the project names
/// its socket, so a `jig run` in the project submits to it.
pub(crate) const SERVED_ENTRY: &str = "served.json";

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("{message}")]
    Busy { message: String },
    #[error("{message}")]
    Invalid { message: String },
    #[error("{message}")]
    Unsafe { message: String },
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    /// The host cannot write its state at all (its filesystem is full,
    /// read-only or failing): the one refusal every door gives for it,
    /// naming no host path.
    #[error("the host cannot write its records ({cause})")]
    Unwritable { cause: String },
    #[error("{message}")]
    StalePlan { message: String },
    #[error("{message}")]
    PlanNotFound { message: String },
}

impl StateError {
    pub fn code(&self) -> &'static str {
        match self {
            StateError::Busy { .. } => "PROJECT_BUSY",
            StateError::Invalid { .. } => "PROJECT_STATE_INVALID",
            StateError::Unsafe { .. } => "PROJECT_UNSAFE",
            StateError::Io { .. } => "INTERNAL",
            StateError::Unwritable { .. } => "JIG_STORAGE_UNAVAILABLE",
            StateError::StalePlan { .. } => "STALE_PLAN",
            StateError::PlanNotFound { .. } => "PLAN_NOT_FOUND",
        }
    }

    /// An I/O failure while `context`; a filesystem that cannot be
    /// written at all is [`StateError::Unwritable`].
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> StateError {
        let context = context.into();
        move |source| match unwritable(&source) {
            // The cause alone: an error a library wrapped may name the path.
            true => StateError::Unwritable {
                cause: match source.raw_os_error() {
                    Some(errno) => std::io::Error::from_raw_os_error(errno).to_string(),
                    None => source.kind().to_string(),
                },
            },
            false => StateError::Io { context, source },
        }
    }
}

/// Does `e` say the filesystem cannot be written at all (full, over quota,
/// read-only, or failing), rather than that one operation went wrong?
pub(crate) fn unwritable(e: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        e.kind(),
        ErrorKind::StorageFull | ErrorKind::QuotaExceeded | ErrorKind::ReadOnlyFilesystem
    ) || e.raw_os_error() == Some(nix::libc::EIO)
}

/// An acquired project: the exclusive owner of its `.jig/` state for as long
/// as this value lives.
pub struct ProjectState {
    root: PathBuf,
    dir: PathBuf,
    /// The run-holder lock; `None` when admitting beside a daemon that
    /// holds it ([`ProjectState::beside_holder`]).
    _owner: Option<File>,
    /// The admission lock, while a review may advance the generation.
    admission: Option<File>,
    /// The space set aside when a Run is recorded to settle it on a full
    /// filesystem ([`ProjectState::with_settle_reserve`]).
    settle_reserve: u64,
}

/// The admitted generation: the exact authority that Runs execute.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    pub number: u64,
    /// The retained Plan value this generation admitted.
    pub plan: Value,
    pub plan_digest: String,
}

impl Generation {
    /// The admitted configuration a Run ran under, as the admission
    /// pointer and a checkpoint's identity name it: `{generation, plan}`.
    pub fn configuration(&self) -> Value {
        configuration(self.number, &self.plan_digest)
    }
}

/// `{generation, plan}`: one admitted configuration.
fn configuration(number: u64, plan_digest: &str) -> Value {
    serde_json::json!({ "generation": number, "plan": plan_digest })
}

impl ProjectState {
    /// Acquire the project at `root` (which must hold `jig.ts`), creating
    /// `.jig/` on first use. A second concurrent owner gets `PROJECT_BUSY`.
    pub fn acquire(root: &Path) -> Result<ProjectState, StateError> {
        let dir = open_state_dir(root)?;
        let owner = lock_file(&dir, "owner.lock", || StateError::Busy {
            message: "another jig process owns this project; try again when it finishes".into(),
        })?;
        for sub in ["store", "plans", "admission", "runs", "work", "checkpoints"] {
            let path = dir.join(sub);
            if !path.exists() {
                create_private_dir(&path)?;
            }
        }
        Ok(ProjectState {
            root: root.to_path_buf(),
            dir,
            _owner: Some(owner),
            admission: None,
            settle_reserve: records::DEFAULT_SETTLE_RESERVE_BYTES,
        })
    }

    /// Open the project for admission only, beside a `jig serve` that holds
    /// it (the caller has checked that one does): under the admission lock,
    /// not the run-holder lock. Store writes are content-addressed and
    /// atomic and [`ProjectState::apply`] is one compare-and-set, so the
    /// daemon's next Runs take the new generation and its in-flight Runs
    /// keep theirs. Use only the admission methods (store, plans, current,
    /// apply, the lock file); Runs and their scratch belong to the holder.
    pub fn beside_holder(root: &Path) -> Result<ProjectState, StateError> {
        let dir = open_state_dir(root)?;
        for sub in ["store", "plans", "admission"] {
            if !dir.join(sub).is_dir() {
                return Err(StateError::Invalid {
                    message: format!("{} has no {sub}/", dir.display()),
                });
            }
        }
        let mut state = ProjectState {
            root: root.to_path_buf(),
            dir,
            _owner: None,
            admission: None,
            settle_reserve: records::DEFAULT_SETTLE_RESERVE_BYTES,
        };
        state.hold_admission()?;
        Ok(state)
    }

    /// Take the admission lock (one review at a time advances the
    /// generation), held until this value is dropped.
    pub(crate) fn hold_admission(&mut self) -> Result<(), StateError> {
        if self.admission.is_none() {
            self.admission = Some(lock_file(&self.dir, "admission.lock", || {
                StateError::Busy {
                    message: "another review is admitting this project; try again when it finishes"
                        .into(),
                }
            })?);
        }
        Ok(())
    }

    /// The admission lock for as long as the guard lives, without
    /// waiting: `PROJECT_BUSY` while a review is admitting. Store
    /// collection holds it, so no review writes a package it has not yet
    /// admitted while the collection decides what is unreferenced.
    /// `None` when this value already holds it.
    pub(crate) fn admission_guard(&self) -> Result<Option<File>, StateError> {
        if self.admission.is_some() {
            return Ok(None);
        }
        lock_file(&self.dir, "admission.lock", || StateError::Busy {
            message: "a review is admitting this project".into(),
        })
        .map(Some)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn store(&self) -> Store {
        Store::new(self.dir.join("store"))
    }

    pub fn runs(&self) -> Runs {
        Runs::new(self.dir.join("runs"), self.settle_reserve)
    }

    /// Set aside `bytes` when a Run is recorded, to settle it on a full
    /// filesystem (`[records] settle-reserve`): a settled record up to
    /// that size is written whatever fills the disk meanwhile.
    pub fn with_settle_reserve(mut self, bytes: u64) -> ProjectState {
        self.settle_reserve = bytes;
        self
    }

    /// The latest accepted Run Checkpoint of each root Run that has one.
    pub fn checkpoints(&self) -> Checkpoints {
        Checkpoints::new(self.dir.join("checkpoints"))
    }

    /// Retain a Plan by the digest of its canonical bytes.
    pub(crate) fn retain_plan(&self, plan: &Value) -> Result<String, StateError> {
        let bytes = flow::json::canonical(plan);
        let digest = sha256_digest(&bytes);
        let path = self.dir.join("plans").join(digest_hex(&digest));
        if !path.exists() {
            write_atomic(&path, &bytes)?;
        }
        Ok(digest)
    }

    pub(crate) fn load_plan(&self, digest: &str) -> Result<Value, StateError> {
        let path = self.dir.join("plans").join(digest_hex(digest));
        let bytes = std::fs::read(&path).map_err(|_| StateError::PlanNotFound {
            message: format!("plan {digest} is not retained"),
        })?;
        if sha256_digest(&bytes) != digest {
            return Err(StateError::Invalid {
                message: format!("retained plan {digest} is corrupt"),
            });
        }
        parse_state(&bytes, "retained plan")
    }

    /// The current admitted generation, if any.
    pub fn current(&self) -> Result<Option<Generation>, StateError> {
        let Some((number, plan_digest)) = self.admitted()? else {
            return Ok(None);
        };
        let plan = self.load_plan(&plan_digest)?;
        Ok(Some(Generation {
            number,
            plan,
            plan_digest,
        }))
    }

    /// The admission pointer alone: the current generation's number and
    /// Plan digest (a daemon holding that generation reads nothing more).
    pub fn admitted(&self) -> Result<Option<(u64, String)>, StateError> {
        let pointer = self.dir.join("admission").join("current");
        let bytes = match std::fs::read(&pointer) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StateError::io("reading the admission pointer")(e)),
        };
        let value = parse_state(&bytes, "admission pointer")?;
        let number = value.get("generation").and_then(Value::as_u64);
        let plan_digest = value.get("plan").and_then(Value::as_str);
        let (Some(number), Some(plan_digest)) = (number, plan_digest) else {
            return Err(StateError::Invalid {
                message: "admission pointer has an unknown shape".into(),
            });
        };
        Ok(Some((number, plan_digest.to_string())))
    }

    /// Admit a retained Plan: write `jig.lock` durably, then advance the
    /// admission pointer in one rename, but only if the current generation is
    /// still the Plan's base. Returns the new generation number.
    pub fn apply(&self, plan_digest: &str, base: Option<u64>) -> Result<u64, StateError> {
        let plan = self.load_plan(plan_digest)?;
        let lock_bytes = lock::lock_bytes(&plan["lock"]);
        let current = self.current()?;
        if let Some(current) = &current {
            if current.plan_digest == plan_digest {
                // Replaying an applied Plan converges: only the lock may need repair.
                if self.read_lock().as_deref() != Some(&lock_bytes[..]) {
                    self.write_lock(&lock_bytes)?;
                }
                return Ok(current.number);
            }
        }
        if current.as_ref().map(|g| g.number) != base {
            return Err(StateError::StalePlan {
                message: "the admitted project changed since this review; review again".into(),
            });
        }
        crash_point("apply:before-lock");
        write_atomic_at(&self.root.join("jig.lock"), &lock_bytes, Some("apply:lock"))?;
        crash_point("apply:after-lock");
        let number = base.unwrap_or(0) + 1;
        let pointer = configuration(number, plan_digest);
        write_atomic_at(
            &self.dir.join("admission").join("current"),
            &flow::json::canonical(&pointer),
            Some("apply:pointer"),
        )?;
        crash_point("apply:after-pointer");
        Ok(number)
    }

    /// Write the visible `jig.lock` (only apply calls this, and lock repair).
    pub(crate) fn write_lock(&self, lock_bytes: &[u8]) -> Result<(), StateError> {
        write_atomic(&self.root.join("jig.lock"), lock_bytes)
    }

    pub fn read_lock(&self) -> Option<Vec<u8>> {
        std::fs::read(self.root.join("jig.lock")).ok()
    }

    /// Name the socket of the daemon now holding this project (owner-private).
    pub fn publish_served(&self, entry: &Value) -> Result<(), StateError> {
        write_atomic(&self.dir.join(SERVED_ENTRY), &flow::json::canonical(entry))
    }

    /// Remove the entry [`ProjectState::publish_served`] wrote.
    pub fn withdraw_served(&self) {
        let _ = std::fs::remove_file(self.dir.join(SERVED_ENTRY));
    }

    /// A fresh private directory for one Run's scratch and materialized package.
    pub fn run_dir(&self, run_id: &str) -> Result<PathBuf, StateError> {
        let dir = self.dir.join("work").join(run_id);
        std::fs::create_dir_all(&dir).map_err(StateError::io("creating the run directory"))?;
        set_private(&dir)?;
        Ok(dir)
    }
}

/// The entry a daemon holding the project at `root` published, read
/// without owning the project. `None` when there is none, or when `.jig/`
/// or the entry is not this user's and private (then it is not trusted).
/// A stale entry (its daemon gone) is the caller's to detect by connecting.
pub fn served_entry(root: &Path) -> Option<Value> {
    use std::os::unix::fs::MetadataExt;
    let me = nix::unistd::geteuid().as_raw();
    let dir = root.join(STATE_DIR);
    let meta = std::fs::symlink_metadata(&dir).ok()?;
    if !meta.is_dir() || meta.uid() != me || meta.mode() & 0o022 != 0 {
        return None;
    }
    let path = dir.join(SERVED_ENTRY);
    let meta = std::fs::symlink_metadata(&path).ok()?;
    if !meta.is_file() || meta.uid() != me || meta.mode() & 0o077 != 0 || meta.len() > 64 * 1024 {
        return None;
    }
    flow::json::parse(&std::fs::read(&path).ok()?).ok()
}

fn parse_state(bytes: &[u8], what: &str) -> Result<Value, StateError> {
    flow::json::parse(bytes).map_err(|e| StateError::Invalid {
        message: format!("{what} is not JSON/1: {e}"),
    })
}

pub fn digest_hex(digest: &str) -> &str {
    digest.strip_prefix("sha256:").unwrap_or(digest)
}

/// `.jig/` under `root`: created private on first use, else checked to be
/// a plain directory of this user that nobody else can write.
fn open_state_dir(root: &Path) -> Result<PathBuf, StateError> {
    let dir = root.join(STATE_DIR);
    match std::fs::symlink_metadata(&dir) {
        Ok(meta) if meta.file_type().is_symlink() || !meta.is_dir() => {
            return Err(StateError::Unsafe {
                message: format!("{} is not a plain directory", dir.display()),
            })
        }
        Ok(meta) => {
            use std::os::unix::fs::MetadataExt;
            if meta.uid() != nix::unistd::geteuid().as_raw() || meta.mode() & 0o022 != 0 {
                return Err(StateError::Unsafe {
                    message: format!(
                        "{} must be owned by this user and writable by nobody else",
                        dir.display()
                    ),
                });
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            create_private_dir(&dir)?;
        }
        Err(e) => return Err(StateError::io(format!("inspecting {}", dir.display()))(e)),
    }
    Ok(dir)
}

/// An exclusive, non-blocking lock on `dir/name`, held until the file is
/// dropped; `busy` when another holds it.
fn lock_file(
    dir: &Path,
    name: &str,
    busy: impl FnOnce() -> StateError,
) -> Result<File, StateError> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(name))
        .map_err(StateError::io(format!("opening the project {name}")))?;
    try_lock(file, name, busy)
}

/// Lock `file` exclusively without waiting: `busy` only when another holds
/// the lock; any other failure (no locks on this filesystem, a bad handle)
/// is an I/O error of its own, never reported as busy.
fn try_lock(file: File, name: &str, busy: impl FnOnce() -> StateError) -> Result<File, StateError> {
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(busy()),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(StateError::io(format!("locking the project {name}"))(e))
        }
    }
}

fn create_private_dir(path: &Path) -> Result<(), StateError> {
    std::fs::create_dir_all(path)
        .map_err(StateError::io(format!("creating {}", path.display())))?;
    set_private(path)
}

fn set_private(path: &Path) -> Result<(), StateError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
        .map_err(StateError::io(format!("protecting {}", path.display())))
}

// The fault hooks below are for tests only. They read their variables only
// in a build with the `fault-hooks` feature, which `cargo test` turns on
// (the `jig` package's dev-dependency on this crate) and `cargo build`
// leaves off: there each hook is a no-op and names no variable.

/// Test-only delay: when `JIG_TEST_PAUSE_AT` is `<point>:<ms>`, the thread
/// sleeps here that long (a slow disk, say), so a test can prove that what
/// must wait for this step does. It has no other effect.
#[cfg(feature = "fault-hooks")]
pub(crate) fn pause_point(point: &str) {
    let paused = std::env::var("JIG_TEST_PAUSE_AT").ok().and_then(|v| {
        let (at, ms) = v.split_once(':')?;
        (at == point).then(|| ms.parse::<u64>().ok()).flatten()
    });
    if let Some(ms) = paused {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

#[cfg(not(feature = "fault-hooks"))]
#[inline(always)]
pub(crate) fn pause_point(_point: &str) {}

/// Test-only crash injection: when `JIG_TEST_CRASH_AT` names this point, the
/// process aborts here, as a power cut or `kill -9` would stop it. Tests use
/// it to prove that every step of apply leaves the old or the new complete
/// state. It has no other effect.
#[cfg(feature = "fault-hooks")]
pub fn crash_point(point: &str) {
    if std::env::var_os("JIG_TEST_CRASH_AT").is_some_and(|p| p == point) {
        std::process::abort();
    }
}

#[cfg(not(feature = "fault-hooks"))]
#[inline(always)]
pub fn crash_point(_point: &str) {}

/// A test-only hook's variable `name` (a door's own hook, such as `jig
/// run`'s abort after dispatch): its value in a build with `fault-hooks`,
/// never present without.
#[cfg(feature = "fault-hooks")]
pub fn fault_hook(name: &str) -> Result<String, std::env::VarError> {
    std::env::var(name)
}

#[cfg(not(feature = "fault-hooks"))]
#[inline(always)]
pub fn fault_hook(_name: &str) -> Result<String, std::env::VarError> {
    Err(std::env::VarError::NotPresent)
}

/// Replace `path` with `bytes` atomically and durably.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StateError> {
    write_atomic_at(path, bytes, None)
}

/// [`write_atomic`] without its two syncs: a reader sees the whole file or
/// none, but a crash may lose it. For what is kept beside a record to be
/// shown, not to recover from (a Run's input: a lost one reads as not
/// retained), so it costs no disk flush before dispatch.
pub(crate) fn write_unsynced(path: &Path, bytes: &[u8]) -> Result<(), StateError> {
    write_replacing(path, bytes, false, None)
}

fn write_atomic_at(path: &Path, bytes: &[u8], point: Option<&str>) -> Result<(), StateError> {
    write_replacing(path, bytes, true, point)
}

/// Write `bytes` beside `path` and rename them over it; with `sync`, the
/// file before the rename and its directory after.
fn write_replacing(
    path: &Path,
    bytes: &[u8],
    sync: bool,
    point: Option<&str>,
) -> Result<(), StateError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut temp = tempfile::Builder::new()
        .prefix(".jig-write-")
        .tempfile_in(dir)
        .map_err(StateError::io(format!("writing {}", path.display())))?;
    temp.write_all(bytes)
        .map_err(StateError::io(format!("writing {}", path.display())))?;
    if sync {
        temp.as_file()
            .sync_all()
            .map_err(StateError::io(format!("syncing {}", path.display())))?;
    }
    if let Some(point) = point {
        crash_point(&format!("{point}-written"));
    }
    temp.persist(path)
        .map_err(|e| StateError::io(format!("publishing {}", path.display()))(e.error))?;
    if sync {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Make what a rename, a creation or an unlink did in `dir` durable: fsync
/// the directory. Its error is returned, never dropped: a record, a store
/// entry or an SDK tree is durable only once this succeeds.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), StateError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(StateError::io(format!(
            "syncing the directory {}",
            dir.display()
        )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_held_lock_is_busy_and_a_failed_lock_is_not() {
        use std::os::unix::fs::OpenOptionsExt;
        let dir = tempfile::tempdir().unwrap();
        let busy = || StateError::Busy {
            message: "held".into(),
        };
        let held = lock_file(dir.path(), "owner.lock", busy).unwrap();
        let again = lock_file(dir.path(), "owner.lock", busy).unwrap_err();
        assert_eq!(again.code(), "PROJECT_BUSY");
        drop(held);
        assert!(lock_file(dir.path(), "owner.lock", busy).is_ok());

        // A handle opened with O_PATH cannot be locked at all: flock(2)
        // answers EBADF, which is a failure, not another holder.
        let path_only = OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_PATH)
            .open(dir.path().join("owner.lock"))
            .unwrap();
        let failed = try_lock(path_only, "owner.lock", busy).unwrap_err();
        assert_ne!(failed.code(), "PROJECT_BUSY");
        assert!(
            failed
                .to_string()
                .starts_with("locking the project owner.lock"),
            "{failed}"
        );
    }

    #[test]
    fn a_directory_fsync_failure_is_returned() {
        // procfs has no fsync: the kernel answers EINVAL, a real failure of
        // the call every durable rename and unlink now ends with.
        let err = sync_dir(Path::new("/proc/self")).unwrap_err();
        assert!(
            err.to_string().contains("syncing the directory /proc/self"),
            "{err}"
        );
        assert!(sync_dir(&std::env::temp_dir()).is_ok());
        let gone = tempfile::tempdir().unwrap().path().join("gone");
        assert!(sync_dir(&gone).is_err());
    }

    fn plan(word: &str, base: Option<u64>) -> Value {
        json!({
            "base": base,
            "lock": {"bindings": {}, "packages": {"flows/hello": {"digest": format!("sha256:{}", word.repeat(64)), "directRun": true, "uses": {}}}},
            "execution": {},
        })
    }

    fn project() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("jig.ts"), "export default {};\n").unwrap();
        dir
    }

    #[test]
    fn a_filesystem_that_cannot_be_written_is_one_refusal_naming_no_path() {
        use nix::libc::{EIO, ENOENT, ENOSPC, EROFS};
        for errno in [ENOSPC, EROFS, EIO, nix::libc::EDQUOT] {
            let e = StateError::io("writing /secret/.jig/runs/x.json")(
                std::io::Error::from_raw_os_error(errno),
            );
            assert_eq!(e.code(), "JIG_STORAGE_UNAVAILABLE", "{errno}: {e}");
            assert!(!e.to_string().contains("/secret"), "{e}");
        }
        // A library's error naming the path it failed on (tempfile's) is
        // reported by its kind alone.
        let wrapped = std::io::Error::new(
            std::io::ErrorKind::StorageFull,
            "No space left on device at path \"/secret/.jig/runs/.jig-write-1\"",
        );
        let e = StateError::io("writing")(wrapped);
        assert_eq!(e.code(), "JIG_STORAGE_UNAVAILABLE");
        assert!(!e.to_string().contains("/secret"), "{e}");
        let e = StateError::io("reading x")(std::io::Error::from_raw_os_error(ENOENT));
        assert_eq!(e.code(), "INTERNAL");
    }

    #[test]
    fn a_stale_plan_changes_nothing() {
        let dir = project();
        let state = ProjectState::acquire(dir.path()).unwrap();
        let a = state.retain_plan(&plan("a", None)).unwrap();
        let b = state.retain_plan(&plan("b", None)).unwrap();
        assert_eq!(state.apply(&b, None).unwrap(), 1);
        let lock = std::fs::read(dir.path().join("jig.lock")).unwrap();
        let err = state.apply(&a, None).unwrap_err();
        assert_eq!(err.code(), "STALE_PLAN");
        assert_eq!(state.current().unwrap().unwrap().plan_digest, b);
        assert_eq!(std::fs::read(dir.path().join("jig.lock")).unwrap(), lock);
    }

    #[test]
    fn replaying_an_applied_plan_converges() {
        let dir = project();
        let state = ProjectState::acquire(dir.path()).unwrap();
        let a = state.retain_plan(&plan("a", None)).unwrap();
        assert_eq!(state.apply(&a, None).unwrap(), 1);
        std::fs::remove_file(dir.path().join("jig.lock")).unwrap();
        assert_eq!(state.apply(&a, None).unwrap(), 1, "the same generation");
        assert!(
            dir.path().join("jig.lock").exists(),
            "the lock was repaired"
        );
        assert_eq!(state.apply(&a, Some(1)).unwrap(), 1);
    }

    #[test]
    fn an_unknown_plan_is_not_found() {
        let dir = project();
        let state = ProjectState::acquire(dir.path()).unwrap();
        let missing = format!("sha256:{}", "0".repeat(64));
        assert_eq!(
            state.apply(&missing, None).unwrap_err().code(),
            "PLAN_NOT_FOUND"
        );
    }

    #[test]
    fn one_owner_at_a_time() {
        let dir = project();
        let _first = ProjectState::acquire(dir.path()).unwrap();
        let second = ProjectState::acquire(dir.path());
        assert_eq!(second.err().map(|e| e.code()), Some("PROJECT_BUSY"));
    }
}
