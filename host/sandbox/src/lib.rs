//! The execution envelope for process recipes. Everything that starts
//! package code goes through [`Sandbox::spawn`], so the envelope has one
//! narrow door: what the process sees is exactly what [`Launch`] grants.
//!
//! The default envelope is [`Bubblewrap`]: a Run-owned cgroup (memory,
//! tasks, CPU; see [`cgroup`]) entered before exec, then new user, mount,
//! PID, IPC, UTS, cgroup and network namespaces. A host that cannot provide
//! it refuses process recipes (`UNAVAILABLE`, naming what is missing);
//! there is no silent weaker fallback. The [`ProcessGroup`] launch is kept
//! only behind the explicit operator opt-out `[containment] mode = "none"`.
//!
//! This crate owns the envelope and nothing above it: the cgroups, the
//! namespaces, the minimal runtime view ([`closure`]) and the root payload
//! budget ([`budget`]). It knows nothing of projects, packages, admission or
//! the Run/1 protocol; it starts exactly what a [`Launch`] names, and must
//! never widen a grant, fall back to a weaker envelope, or leave a process,
//! cgroup or mount behind.

pub mod budget;
pub mod bwrap;
pub mod cgroup;
pub mod closure;
pub mod syscall;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;

pub use budget::{Budget, Exhausted, Reservation};
pub use error::Error;

mod error;
pub use bwrap::Bubblewrap;
pub use cgroup::Limits;

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// The size of the writable attachment's tmpfs (docs/src/
/// containment.md: one optional empty writable output, a 16 MiB tmpfs). A write past it
/// fails inside the Run with `ENOSPC`.
pub const OUTPUT_TMPFS_BYTES: u64 = 16 * 1024 * 1024;
/// The default bound of each private writable space of a Flow (its scratch
/// directory and its `/tmp`): `[containment] scratch-size`
/// (docs/src/containment.md, Writable space).
pub const DEFAULT_SCRATCH_BYTES: u64 = 64 * 1024 * 1024;
/// The range `[containment] scratch-size` takes.
pub const SCRATCH_BYTES_RANGE: std::ops::RangeInclusive<u64> = (1 << 20)..=(16 << 30);
/// From SIGTERM to SIGKILL when an envelope is ended early (cancellation,
/// deadline, host shutdown): 250 ms, as the reference's envelope.
pub const KILL_GRACE: Duration = Duration::from_millis(250);

/// The `[containment]` section of the host configuration: which
/// bubblewrap, whether process recipes are contained, and under which cgroup.
#[derive(Debug, Default, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Containment {
    pub bwrap: Option<PathBuf>,
    /// `contained` (the default): every process recipe runs in the
    /// bubblewrap + cgroup envelope, and a host that cannot provide it
    /// refuses to run them (`UNAVAILABLE`). `none` is an explicit operator
    /// opt-out to the process-group launch, which is not a security
    /// boundary and enforces no limits.
    #[serde(default)]
    pub mode: ContainmentMode,
    /// An existing cgroup, as a path from the hierarchy root (`/jig.slice`),
    /// under which Run cgroups are created instead of under the host
    /// process's own cgroup. On cgroup v2 it must be delegated to this user
    /// and hold no processes, so its controllers can be enabled for children.
    pub cgroup_parent: Option<PathBuf>,
    /// `scratch-size`: the bound of each private writable space of a
    /// contained Flow, its scratch directory and its `/tmp`, each a fresh
    /// tmpfs (charged, where the memory controller is on, to the Run's own
    /// cgroup). A write past it fails inside the Run with `ENOSPC`; the
    /// host's disk is never written. Absent: [`DEFAULT_SCRATCH_BYTES`].
    #[serde(default, deserialize_with = "scratch_size")]
    pub scratch_size: Option<u64>,
}

impl Containment {
    /// The bound of each private writable space of a contained Flow.
    pub fn scratch_bytes(&self) -> u64 {
        self.scratch_size.unwrap_or(DEFAULT_SCRATCH_BYTES)
    }
}

/// `scratch-size` as written (`"64MiB"`), within [`SCRATCH_BYTES_RANGE`].
fn scratch_size<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let text = <String as serde::Deserialize>::deserialize(d)?;
    let bytes = flow::size::parse(&text).ok_or_else(|| {
        serde::de::Error::custom(format!(
            "scratch-size {text:?} is not a size (a byte count with B, KiB, MiB or GiB)"
        ))
    })?;
    if !SCRATCH_BYTES_RANGE.contains(&bytes) {
        return Err(serde::de::Error::custom(format!(
            "scratch-size {text:?} is outside 1MiB..=16GiB"
        )));
    }
    Ok(Some(bytes))
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ContainmentMode {
    #[default]
    Contained,
    None,
}

/// What one contained process is granted. Paths are host paths; an
/// envelope may show them at the same location inside. Two equal launches
/// start the same process in the same envelope.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub env: Vec<(String, String)>,
    /// The working directory: the Run's private scratch.
    pub cwd: PathBuf,
    /// The admitted package tree, visible read-only.
    pub package: PathBuf,
    /// The one private writable directory.
    pub scratch: PathBuf,
    /// `Some(bytes)`: the scratch directory and `/tmp` are each a fresh
    /// tmpfs of at most `bytes`, and nothing written there outlives the
    /// launch (package code). `None`: the scratch directory is the host
    /// directory itself, whose contents the host reads afterwards (the
    /// host's own effects, dependency preparation).
    pub scratch_bytes: Option<u64>,
    /// Further read-only trees the recipe needs (e.g. the bundled Python SDK).
    pub read_only: Vec<PathBuf>,
    /// Read-only trees shown inside at another path than on the host:
    /// (host path, path inside). A shared tree (the package's, the compiled
    /// SDK) appears where a private copy would, so the envelope shows
    /// nothing of where it is kept. One shown at `package` is the package.
    /// Only an envelope that [`Sandbox::shows_elsewhere`] takes them.
    pub shown: Vec<(PathBuf, PathBuf)>,
    /// Attachments: (path, writable). A read attachment is shown
    /// read-only at its host path; a writable one is a fresh, empty,
    /// [`OUTPUT_TMPFS_BYTES`]-bounded tmpfs at that path, handed back to
    /// the host as a directory descriptor (see [`Contained::take_outputs`]).
    pub attachments: Vec<(PathBuf, bool)>,
    /// The ceilings of this envelope's cgroup ([`Limits::FLOW`] for package
    /// code; the builtin effects have their own, docs/src/containment.md).
    pub limits: Limits,
    /// Share the host's network namespace. Only the Agent worker and a
    /// credentialed command may; package code never does.
    pub network: bool,
    /// The runtime files shown: a process recipe's proved closure
    /// ([`closure`]); `None` (only the host's own builtin effects and
    /// preparation) shows the host's `/usr`.
    pub view: Option<std::sync::Arc<closure::View>>,
}

impl Launch {
    /// `program` from `package`, working in its private `scratch`, with
    /// nothing else granted: no arguments, environment, further trees,
    /// attachments or network, the host's `/usr` as its view, under the
    /// Flow ceilings. Callers add what a recipe needs.
    pub fn new(program: PathBuf, package: PathBuf, scratch: PathBuf) -> Launch {
        Launch {
            program,
            args: Vec::new(),
            env: Vec::new(),
            cwd: scratch.clone(),
            package,
            scratch,
            scratch_bytes: None,
            read_only: Vec::new(),
            shown: Vec::new(),
            attachments: Vec::new(),
            limits: Limits::FLOW,
            network: false,
            view: None,
        }
    }
}

/// Where a held launch waits for [`Contained::open_gate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// Bubblewrap makes the envelope and waits before it executes the
    /// program: nothing of the program runs.
    Envelope,
    /// The program is executed with the gate's read end as descriptor 3
    /// ([`bwrap::PAYLOAD_GATE_FD`]) and waits on it itself: a runtime's
    /// host-provided preload, which reads one byte and closes it before
    /// any package code is loaded.
    Payload,
}

/// A started process and everything it may have started: the envelope
/// fences the whole tree, not only the leader.
pub struct Contained {
    pub child: tokio::process::Child,
    fence: Box<dyn Fence>,
    /// The writable attachments, retained by descriptor: (path, directory).
    outputs: Vec<(PathBuf, OwnedFd)>,
    /// The leader's pid, spared by the SIGTERM (it is the envelope's own
    /// monitor; its death would SIGKILL the tree before the grace).
    leader: Option<u32>,
    /// A held envelope's gate ([`Sandbox::spawn_held`]): one byte written
    /// to it lets the program be executed.
    gate: Option<OwnedFd>,
}

/// How an envelope ends everything a Run started.
pub trait Fence: Send {
    /// Send SIGTERM to every process of the envelope except `spare` (the
    /// leader when it is the envelope's monitor rather than package code).
    fn terminate(&mut self, spare: Option<u32>);
    /// Is any process of the envelope still alive?
    fn populated(&mut self) -> bool;
    /// Kill every process of the envelope now (the leader included).
    fn kill_all(&mut self);
    /// Give the envelope the least CPU (`idle`: it was made ahead of its
    /// Run and waits), or its due share again.
    fn set_idle(&mut self, _idle: bool) {}
    /// After the leader exited or was killed: kill what remains, wait until
    /// nothing remains, and release the envelope's resources. An error is a
    /// cleanup failure the Run must report, never hide.
    fn cleanup(&mut self) -> Result<(), String>;
}

impl Contained {
    pub fn new(child: tokio::process::Child, fence: Box<dyn Fence>) -> Contained {
        let leader = child.id();
        Contained {
            child,
            fence,
            outputs: Vec::new(),
            leader,
            gate: None,
        }
    }

    /// The same, held at `gate` until [`Contained::open_gate`].
    pub fn held_at(mut self, gate: OwnedFd) -> Contained {
        self.gate = Some(gate);
        self
    }

    /// Is the program still held (its envelope made, nothing executed)?
    pub fn is_held(&self) -> bool {
        self.gate.is_some()
    }

    /// Let a held envelope execute its program, once; an envelope that
    /// was not held (or was opened) has nothing to open. An envelope that
    /// ended while it was held fails here (the pipe has no reader), and
    /// the caller starts another.
    pub fn open_gate(&mut self) -> std::io::Result<()> {
        let Some(gate) = self.gate.take() else {
            return Ok(());
        };
        if let Ok(Some(status)) = self.child.try_wait() {
            return Err(std::io::Error::other(format!(
                "the held envelope ended before it was opened ({status})"
            )));
        }
        self.fence.set_idle(false);
        nix::unistd::write(&gate, b"x")?;
        Ok(())
    }

    /// The same, holding the writable attachments' directories.
    pub fn with_outputs(mut self, outputs: Vec<(PathBuf, OwnedFd)>) -> Contained {
        self.outputs = outputs;
        self
    }

    /// The retained writable attachments (path as granted, directory
    /// descriptor). Taken once; after the envelope is cleaned up they stay
    /// readable through the descriptor alone.
    pub fn take_outputs(&mut self) -> Vec<(PathBuf, OwnedFd)> {
        std::mem::take(&mut self.outputs)
    }

    /// Kill the whole tree, then reap the leader.
    pub async fn kill(&mut self) {
        self.fence.kill_all();
        let _ = self.child.kill().await;
    }

    /// End the tree early: SIGTERM to every package process, up to
    /// [`KILL_GRACE`] for the tree to empty, then SIGKILL to what remains,
    /// and reap the leader.
    pub async fn terminate(&mut self) {
        self.fence.terminate(self.leader);
        let until = tokio::time::Instant::now() + KILL_GRACE;
        loop {
            // Reap the leader as soon as it exits, so it does not count.
            let _ = self.child.try_wait();
            if !self.fence.populated() || tokio::time::Instant::now() >= until {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.kill().await;
    }

    /// Confirm the envelope is empty and released.
    pub fn cleanup(&mut self) -> Result<(), Error> {
        self.fence.cleanup().map_err(Error::Cleanup)
    }
}

impl Drop for Contained {
    fn drop(&mut self) {
        self.fence.kill_all();
        let _ = self.fence.cleanup();
    }
}

pub trait Sandbox: Send + Sync {
    fn name(&self) -> &'static str;
    fn spawn(&self, launch: &Launch) -> std::io::Result<Contained>;
    /// Make `launch`'s envelope now and hold it until
    /// [`Contained::open_gate`], with the least CPU weight until then (what
    /// it does while held takes only CPU nothing else wants): the
    /// namespaces, mounts and cgroup are ready, and the program is either
    /// not executed yet
    /// ([`Hold::Envelope`]) or executed with the gate as its descriptor 3,
    /// to wait on itself ([`Hold::Payload`]). A launch with a writable
    /// attachment cannot be held before exec, nor can an envelope that has
    /// no gate (`Unsupported`). The process that holds it must outlive it:
    /// the envelope dies with the thread that spawned it.
    fn spawn_held(&self, _launch: &Launch, _hold: Hold) -> std::io::Result<Contained> {
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "this envelope cannot be made ahead of its launch",
        ))
    }
    /// A writable directory of an in-process recipe (`flow.wasm`: its
    /// writable attachment, its scratch): the directory descriptor of the
    /// same bounded filesystem of at most `bytes` a process recipe gets at
    /// `path`. The caller owns it; closing it releases everything.
    fn bounded_tmpfs(&self, path: &Path, bytes: u64) -> std::io::Result<OwnedFd>;
    /// Can a tree be shown inside at another path ([`Launch::shown`])?
    fn shows_elsewhere(&self) -> bool {
        false
    }
    /// Prepare, ahead of a launch with `limits`, what it would otherwise
    /// make first (best effort: a launch that finds nothing made makes it).
    fn prepare(&self, _limits: Limits) {}
    /// Keep what every launch would otherwise make again (the host's
    /// parent cgroup) between Runs: a daemon sets it while it serves, and
    /// clears it to release them once its Runs are done (after which
    /// [`Sandbox::prepare`] makes nothing).
    fn keep_between_runs(&self, _keep: bool) {}
}

/// Open a directory as the handoff descriptor.
pub(crate) fn open_directory(path: &Path) -> std::io::Result<OwnedFd> {
    use nix::fcntl::OFlag;
    nix::fcntl::open(
        path,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(std::io::Error::from)
}

/// The envelope this host uses for process recipes: the contained
/// envelope, or an error naming what this machine lacks. The process-group
/// launch only when the operator opted out with `[containment] mode = "none"`.
pub fn select(config: &Containment) -> Result<std::sync::Arc<dyn Sandbox>, Error> {
    if config.mode == ContainmentMode::None {
        return Ok(std::sync::Arc::new(ProcessGroup));
    }
    Ok(std::sync::Arc::new(contained(config)?))
}

/// Build the contained envelope, or say everything that is missing.
pub fn contained(config: &Containment) -> Result<Bubblewrap, Error> {
    let mut missing = Vec::new();
    let bwrap = find_bwrap_text(config.bwrap.as_deref())
        .map_err(|e| missing.push(e))
        .ok();
    if let Err(e) = user_namespaces() {
        missing.push(e);
    }
    let hierarchy = cgroup::Hierarchy::detect(config.cgroup_parent.as_deref())
        .and_then(|h| writable(&h).map(|()| h))
        .map_err(|e| missing.push(e))
        .ok();
    match (bwrap, hierarchy) {
        (Some((path, _)), Some(hierarchy)) if missing.is_empty() => {
            Ok(Bubblewrap::new(path, hierarchy))
        }
        _ => Err(Error::Unavailable(format!(
            "process recipes cannot run contained on this host: {}; fix that, or opt out \
             explicitly with [containment] mode = \"none\" in host.toml (no isolation, no limits)",
            missing.join("; ")
        ))),
    }
}

/// Start `true` in the envelope and clean it up: proves namespaces,
/// bubblewrap and the cgroup work here, not only that they are present.
fn smoke_test(envelope: &Bubblewrap) -> Result<(), String> {
    let program = ["/usr/bin/true", "/bin/true"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .ok_or("no /usr/bin/true to test the envelope with")?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).map_err(|e| e.to_string())?;
    // With a writable attachment: proves --size and the descriptor handoff.
    let output = dir.path().join("output");
    std::fs::create_dir(&output).map_err(|e| e.to_string())?;
    let launch = Launch {
        attachments: vec![(output, true)],
        ..Launch::new(program, dir.path().to_path_buf(), scratch)
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let mut contained = envelope
            .spawn(&launch)
            .map_err(|e| format!("the envelope does not start: {e}"))?;
        let stderr = contained.child.stderr.take();
        let status =
            tokio::time::timeout(std::time::Duration::from_secs(10), contained.child.wait()).await;
        let cleaned = contained.cleanup();
        let status = match status {
            Ok(Ok(status)) => status,
            Ok(Err(e)) => return Err(format!("the envelope test failed: {e}")),
            Err(_) => return Err("the envelope test did not finish in 10 s".into()),
        };
        cleaned.map_err(|e| format!("the envelope test was not cleaned up: {e}"))?;
        if !status.success() {
            let mut why = String::new();
            if let Some(mut stderr) = stderr {
                use tokio::io::AsyncReadExt;
                let _ = stderr.read_to_string(&mut why).await;
            }
            return Err(format!(
                "bubblewrap could not start a process here ({status}): {}",
                bwrap::explain_failure(&why)
            ));
        }
        Ok(())
    })
}

fn writable(hierarchy: &cgroup::Hierarchy) -> Result<(), String> {
    for base in hierarchy.bases() {
        nix::unistd::access(&base, nix::unistd::AccessFlags::W_OK)
            .map_err(|e| format!("cannot create cgroups in {}: {e}", base.display()))?;
    }
    Ok(())
}

/// What `jig doctor` says about the envelope `select` would give.
pub fn describe(config: &Containment) -> Result<String, Error> {
    if config.mode == ContainmentMode::None {
        return Ok(
            "process-group (operator opt-out [containment] mode = \"none\": cleared \
                   environment, private scratch, whole-group kill; NOT isolated, no limits)"
                .into(),
        );
    }
    let envelope = contained(config)?;
    smoke_test(&envelope).map_err(Error::Unavailable)?;
    Ok(format!(
        "bubblewrap with cgroup {} (user, mount, PID, IPC, UTS, cgroup and network namespaces; \
         per Flow {} MiB, {} tasks, {}/{} us CPU; root {} MiB, {} tasks; scratch and /tmp \
         each a {} MiB tmpfs; writable attachment a {} MiB tmpfs handed back by descriptor; \
         SIGTERM then SIGKILL after {} ms)",
        envelope.hierarchy().version(),
        cgroup::FLOW_MEMORY_BYTES >> 20,
        cgroup::FLOW_TASKS,
        cgroup::FLOW_CPU_QUOTA_US,
        cgroup::CPU_PERIOD_US,
        cgroup::ROOT_MEMORY_BYTES >> 20,
        cgroup::ROOT_TASKS,
        config.scratch_bytes() >> 20,
        OUTPUT_TMPFS_BYTES >> 20,
        KILL_GRACE.as_millis(),
    ))
}

/// The process-group envelope: a cleared environment, the scratch as working
/// directory, and its own process group killed as a whole. It is not a
/// security boundary.
pub struct ProcessGroup;

struct GroupFence(Option<i32>);

impl Fence for GroupFence {
    fn terminate(&mut self, _spare: Option<u32>) {
        if let Some(pgid) = self.0 {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pgid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
    }

    fn populated(&mut self) -> bool {
        // The group exists while any member (also a zombie) does.
        self.0.is_some_and(|pgid| {
            nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), None).is_ok()
        })
    }

    fn kill_all(&mut self) {
        if let Some(pgid) = self.0 {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pgid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }

    fn cleanup(&mut self) -> Result<(), String> {
        self.kill_all();
        self.0 = None;
        Ok(())
    }
}

impl Sandbox for ProcessGroup {
    fn name(&self) -> &'static str {
        "process-group"
    }

    fn spawn(&self, launch: &Launch) -> std::io::Result<Contained> {
        if !launch.shown.is_empty() {
            return Err(std::io::Error::other(
                "the process-group launch cannot show a tree at another path",
            ));
        }
        let mut command = tokio::process::Command::new(&launch.program);
        command
            .args(&launch.args)
            .env_clear()
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&launch.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        // Opt-out mode: the writable attachment is the host directory
        // itself, unbounded; it is still handed back by descriptor.
        let outputs = launch
            .attachments
            .iter()
            .filter(|(_, writable)| *writable)
            .map(|(path, _)| Ok((path.clone(), open_directory(path)?)))
            .collect::<std::io::Result<Vec<_>>>()?;
        let child = command.spawn()?;
        let pgid = child.id().map(|id| id as i32);
        Ok(Contained::new(child, Box::new(GroupFence(pgid))).with_outputs(outputs))
    }

    fn bounded_tmpfs(&self, path: &Path, _bytes: u64) -> std::io::Result<OwnedFd> {
        open_directory(path)
    }
}

/// Where bubblewrap may come from: an absolute `JIG_BWRAP_PATH`, else these
/// system directories. Ambient `PATH` never selects a containment tool.
pub const BWRAP_DIRS: [&str; 3] = ["/usr/bin", "/bin", "/run/current-system/sw/bin"];

/// What this machine offers for containment, as `jig doctor` reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    pub bwrap: Result<(PathBuf, String), String>,
    pub user_namespaces: Result<(), String>,
    pub cgroup: Cgroup,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Cgroup {
    /// cgroup v2 with the controllers enabled at the root.
    V2 {
        controllers: Vec<String>,
    },
    /// cgroup v1 with the hierarchies that are mounted.
    V1 {
        controllers: Vec<String>,
    },
    None,
}

impl Probe {
    pub fn run(configured_bwrap: Option<&std::path::Path>) -> Probe {
        Probe {
            bwrap: find_bwrap_text(configured_bwrap),
            user_namespaces: user_namespaces(),
            cgroup: cgroup(),
        }
    }
}

/// The oldest bubblewrap that has every option the envelope passes:
/// `--size` (bounded tmpfs for the writable attachment) arrived in 0.7.0;
/// the rest (`--clearenv`, `--info-fd`, `--block-fd`, `--die-with-parent`,
/// `--cap-drop`, `--remount-ro`) is older.
pub const BWRAP_MIN_VERSION: (u32, u32, u32) = (0, 7, 0);
/// What the reference host asks for (docs/src/containment.md); reported as a note,
/// not enforced: nothing here needs it.
pub const BWRAP_REFERENCE_VERSION: (u32, u32, u32) = (0, 12, 0);

/// `bubblewrap 0.8.0` (the `--version` line) as (0, 8, 0).
pub fn parse_bwrap_version(text: &str) -> Option<(u32, u32, u32)> {
    let number = text.trim().strip_prefix("bubblewrap ")?;
    let mut parts = number.split('.').map(|p| {
        let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<u32>().ok()
    });
    let major = parts.next()??;
    let minor = parts.next()??;
    let patch = parts.next().flatten().unwrap_or(0);
    Some((major, minor, patch))
}

/// `0.7.0`
pub fn version_text((a, b, c): (u32, u32, u32)) -> String {
    format!("{a}.{b}.{c}")
}

/// Select bubblewrap: `JIG_BWRAP_PATH` (must be absolute and executable; no
/// fallback when it is not), else the configured path, else the fixed dirs.
/// Whichever is selected must report a version of at least
/// [`BWRAP_MIN_VERSION`]; an older one is an error, never a fallback.
pub fn find_bwrap(configured: Option<&std::path::Path>) -> Result<(PathBuf, String), Error> {
    find_bwrap_text(configured).map_err(Error::Unavailable)
}

fn find_bwrap_text(configured: Option<&std::path::Path>) -> Result<(PathBuf, String), String> {
    let explicit = std::env::var_os("JIG_BWRAP_PATH")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from);
    let candidate = match explicit.or_else(|| configured.map(PathBuf::from)) {
        Some(path) => {
            if !path.is_absolute() || !jig_verify::is_executable(&path) {
                return Err(format!(
                    "{} is not an absolute executable bubblewrap",
                    path.display()
                ));
            }
            path
        }
        None => BWRAP_DIRS
            .iter()
            .map(|d| std::path::Path::new(d).join("bwrap"))
            .find(|p| jig_verify::is_executable(p))
            .ok_or_else(|| {
                "bubblewrap was not found in /usr/bin, /bin or /run/current-system/sw/bin"
                    .to_string()
            })?,
    };
    // Asked once per revision of the tool (installation verification).
    let version = jig_verify::current().probe(&candidate, "--version", || {
        let out = std::process::Command::new(&candidate)
            .arg("--version")
            .env_clear()
            .output()
            .map_err(|e| format!("{} does not run: {e}", candidate.display()))?;
        let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !out.status.success() || version.is_empty() {
            return Err(format!("{} --version failed", candidate.display()));
        }
        Ok(version)
    })?;
    let Some(number) = parse_bwrap_version(&version) else {
        return Err(format!(
            "{} reports {version:?}, not a bubblewrap version",
            candidate.display()
        ));
    };
    if number < BWRAP_MIN_VERSION {
        return Err(format!(
            "{} is bubblewrap {}, older than {}, the oldest with --size (the bounded \
             writable attachment); install a newer bubblewrap",
            candidate.display(),
            version_text(number),
            version_text(BWRAP_MIN_VERSION)
        ));
    }
    Ok((candidate, version))
}

fn user_namespaces() -> Result<(), String> {
    if let Ok(text) = std::fs::read_to_string("/proc/sys/user/max_user_namespaces") {
        if text.trim() == "0" {
            return Err("user.max_user_namespaces is 0".into());
        }
    }
    if let Ok(text) = std::fs::read_to_string("/proc/sys/kernel/unprivileged_userns_clone") {
        if text.trim() == "0" && !nix::unistd::geteuid().is_root() {
            return Err("kernel.unprivileged_userns_clone is 0".into());
        }
    }
    Ok(())
}

fn cgroup() -> Cgroup {
    if let Ok(text) = std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers") {
        return Cgroup::V2 {
            controllers: text.split_whitespace().map(str::to_string).collect(),
        };
    }
    let controllers: Vec<String> = ["memory", "pids", "cpu", "freezer"]
        .into_iter()
        .filter(|c| std::path::Path::new("/sys/fs/cgroup").join(c).is_dir())
        .map(str::to_string)
        .collect();
    if controllers.is_empty() {
        Cgroup::None
    } else {
        Cgroup::V1 { controllers }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `scratch-size` takes [`SCRATCH_BYTES_RANGE`]: each end, and one
    /// byte past it, refused with the range; absent is the default.
    #[test]
    fn scratch_size_is_bounded_at_each_end() {
        let size = |text: &str| {
            serde_json::from_value::<Containment>(serde_json::json!({ "scratch-size": text }))
                .map(|c| c.scratch_bytes())
                .map_err(|e| e.to_string())
        };
        assert_eq!(size("1MiB"), Ok(1 << 20));
        assert_eq!(size("16GiB"), Ok(16 << 30));
        for past in [(1u64 << 20) - 1, (16 << 30) + 1] {
            let refused = size(&past.to_string()).unwrap_err();
            assert!(refused.contains("is outside 1MiB..=16GiB"), "{refused}");
        }
        assert!(size("64MB").unwrap_err().contains("is not a size"));
        let absent: Containment = serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!(absent.scratch_bytes(), DEFAULT_SCRATCH_BYTES);
    }

    #[test]
    fn envelope_figures_match_host_facts() {
        // The reference's envelope: a 16 MiB tmpfs; 250 ms from SIGTERM
        // to SIGKILL.
        assert_eq!(OUTPUT_TMPFS_BYTES, 16_777_216);
        assert_eq!(KILL_GRACE, Duration::from_millis(250));
    }

    #[test]
    fn bubblewrap_versions_parse_and_the_floor_is_what_we_use() {
        assert_eq!(parse_bwrap_version("bubblewrap 0.8.0"), Some((0, 8, 0)));
        assert_eq!(parse_bwrap_version("bubblewrap 0.11.0\n"), Some((0, 11, 0)));
        assert_eq!(parse_bwrap_version("bubblewrap 0.7"), Some((0, 7, 0)));
        assert_eq!(parse_bwrap_version("bwrap 1.0"), None);
        assert_eq!(parse_bwrap_version("bubblewrap x.y"), None);
        // At the floor and one release past it below.
        assert!(parse_bwrap_version("bubblewrap 0.7.0").unwrap() >= BWRAP_MIN_VERSION);
        assert!(parse_bwrap_version("bubblewrap 0.6.3").unwrap() < BWRAP_MIN_VERSION);
        assert!(parse_bwrap_version("bubblewrap 0.10.0").unwrap() > BWRAP_MIN_VERSION);
        assert_eq!(version_text(BWRAP_REFERENCE_VERSION), "0.12.0");
    }

    /// An explicit JIG_BWRAP_PATH below the floor is an error naming it,
    /// never a fallback to the system bubblewrap.
    #[test]
    fn an_explicit_bubblewrap_below_the_floor_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("bwrap");
        std::fs::write(&fake, "#!/bin/sh\necho 'bubblewrap 0.6.1'\n").unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let err = find_bwrap(Some(&fake)).unwrap_err().to_string();
        assert!(
            err.contains("is bubblewrap 0.6.1, older than 0.7.0"),
            "{err}"
        );
        std::fs::write(&fake, "#!/bin/sh\necho 'bubblewrap 0.7.0'\n").unwrap();
        let (path, version) = find_bwrap(Some(&fake)).unwrap();
        assert_eq!((path, version.as_str()), (fake, "bubblewrap 0.7.0"));
    }
}
