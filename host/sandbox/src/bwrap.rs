//! The contained envelope: a Run-owned cgroup entered before exec, then
//! bubblewrap with new user, mount, PID, IPC, UTS, cgroup and network
//! namespaces, showing only what [`Launch`] grants.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use super::cgroup::{Group, Hierarchy, Limits, EMPTY_WAIT, HOST_GROUP_PREFIX};
use super::{open_directory, Contained, Fence, Hold, Launch, Sandbox, OUTPUT_TMPFS_BYTES};

/// The descriptor numbers bubblewrap is given for the handoff: it reports
/// the sandbox's pid on `INFO_FD` and waits on `BLOCK_FD` before it execs
/// the payload.
const INFO_FD: RawFd = 3;
const BLOCK_FD: RawFd = 4;
/// Where a payload held at its own gate ([`Hold::Payload`]) finds it; the
/// handoff then moves up by one.
pub const PAYLOAD_GATE_FD: RawFd = 3;
/// How long the host waits for bubblewrap to report and mount the
/// writable attachment before it gives up on the launch.
const HANDOFF_WAIT: Duration = Duration::from_secs(5);
/// Where the holder of an in-process recipe's output mounts it.
const HOLDER_MOUNT: &str = "/output";

/// The unprivileged identity package code runs as inside the envelope.
pub const SANDBOX_UID: u32 = 65534;
pub const SANDBOX_GID: u32 = 65534;
/// The host name package code sees.
pub const SANDBOX_HOSTNAME: &str = "flow";

/// Read-only runtime trees the host's own effects (the Agent worker,
/// Project Commands, dependency preparation) see: the system's programs and
/// libraries. A process recipe sees only its runtime's closure instead
/// ([`Launch::view`]). `/etc` is never shown whole; only the dynamic linker
/// cache.
const RUNTIME_TREES: [&str; 1] = ["/usr"];
/// Top-level names that are usually links into `/usr` (merged-/usr systems)
/// or real library directories on older layouts.
const RUNTIME_TOP: [&str; 5] = ["/bin", "/sbin", "/lib", "/lib64", "/lib32"];
const RUNTIME_FILES: [&str; 1] = ["/etc/ld.so.cache"];
/// The Nix store: on NixOS every runtime and library lives here.
const NIX_STORE: &str = "/nix/store";

/// Bubblewrap plus a cgroup per envelope.
pub struct Bubblewrap {
    bwrap: PathBuf,
    hierarchy: Hierarchy,
    host: Arc<Mutex<HostGroup>>,
    counter: AtomicU64,
}

/// The per-host-process group with the root aggregate ceiling, present
/// while at least one envelope is (or a group made ahead waits in it).
#[derive(Default)]
struct HostGroup {
    group: Option<Group>,
    active: usize,
    /// A Run group made ahead of its launch ([`Sandbox::prepare`]), taken
    /// by the first spawn with the same limits.
    ready: Option<(Limits, Group)>,
    /// Kept while no envelope is (a daemon between Runs).
    keep: bool,
    /// A daemon let go of what it kept (its drain is over): nothing more
    /// is made ahead, so nothing is left behind at its exit.
    released: bool,
}

impl HostGroup {
    /// With no envelope left: remove a group made ahead that nothing took,
    /// then the host group.
    fn release_if_idle(&mut self) -> Result<(), String> {
        if self.active > 0 || self.keep {
            return Ok(());
        }
        let mut failures = Vec::new();
        if let Some((_, ready)) = self.ready.take() {
            failures.extend(ready.remove(EMPTY_WAIT).err());
        }
        if let Some(group) = self.group.take() {
            failures.extend(group.remove(EMPTY_WAIT).err());
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("; "))
        }
    }
}

impl Bubblewrap {
    pub fn new(bwrap: PathBuf, hierarchy: Hierarchy) -> Bubblewrap {
        hierarchy.sweep_stale();
        Bubblewrap {
            bwrap,
            hierarchy,
            host: Arc::new(Mutex::new(HostGroup::default())),
            counter: AtomicU64::new(0),
        }
    }

    pub fn hierarchy(&self) -> &Hierarchy {
        &self.hierarchy
    }

    /// The host group's name for this process.
    pub fn host_group_name() -> String {
        format!("{HOST_GROUP_PREFIX}{}", std::process::id())
    }

    fn run_group(&self, limits: Limits) -> Result<Group, String> {
        let mut host = self.host.lock().unwrap_or_else(|e| e.into_inner());
        if host.ready.as_ref().is_some_and(|(l, _)| *l == limits) {
            let (_, group) = host.ready.take().expect("just checked");
            host.active += 1;
            return Ok(group);
        }
        let group = self.new_run_group(&mut host, limits);
        match group {
            Ok(group) => {
                host.active += 1;
                Ok(group)
            }
            Err(e) => {
                let _ = host.release_if_idle();
                Err(e)
            }
        }
    }

    /// A new Run group below the host group (made first when absent).
    fn new_run_group(&self, host: &mut HostGroup, limits: Limits) -> Result<Group, String> {
        if host.group.is_none() {
            host.group = Some(self.hierarchy.create_host_group(&Self::host_group_name())?);
        }
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let parent = host.group.as_ref().expect("just created");
        parent.child(&format!("run-{n}"), limits)
    }

    /// The bubblewrap arguments for `launch` (everything before `--`).
    pub fn arguments(&self, launch: &Launch) -> Vec<OsString> {
        let mut a: Vec<OsString> = Vec::new();
        let mut push = |items: &[&dyn AsRef<std::ffi::OsStr>]| {
            a.extend(items.iter().map(|i| i.as_ref().to_os_string()));
        };
        push(&[&"--unshare-all"]);
        if launch.network {
            push(&[&"--share-net"]);
        }
        push(&[
            &"--die-with-parent",
            &"--new-session",
            &"--clearenv",
            &"--cap-drop",
            &"ALL",
        ]);
        let uid = SANDBOX_UID.to_string();
        let gid = SANDBOX_GID.to_string();
        push(&[&"--uid", &uid, &"--gid", &gid]);
        push(&[&"--hostname", &SANDBOX_HOSTNAME]);
        push(&[&"--proc", &"/proc"]);
        // Only null, zero and urandom, and the standard descriptor links.
        push(&[&"--tmpfs", &"/dev"]);
        for dev in ["/dev/null", "/dev/zero", "/dev/urandom"] {
            push(&[&"--dev-bind", &dev, &dev]);
        }
        push(&[&"--symlink", &"/proc/self/fd", &"/dev/fd"]);
        for (n, name) in ["stdin", "stdout", "stderr"].iter().enumerate() {
            let target = format!("/proc/self/fd/{n}");
            let link = format!("/dev/{name}");
            push(&[&"--symlink", &target, &link]);
        }
        push(&[&"--tmpfs", &"/tmp"]);
        match &launch.view {
            // A process recipe: exactly its runtime's proved closure.
            Some(view) => {
                for path in view.dirs.iter().chain(view.files.iter()) {
                    push(&[&"--ro-bind", path, path]);
                }
                // After the binds: a link never sits below a bound tree.
                for (link, target) in &view.links {
                    push(&[&"--symlink", target, link]);
                }
            }
            // The host's own effects (Agent worker, commands, preparation).
            None => {
                for tree in RUNTIME_TREES {
                    push(&[&"--ro-bind", &tree, &tree]);
                }
                for top in RUNTIME_TOP {
                    let path = Path::new(top);
                    match std::fs::read_link(path) {
                        Ok(target) => push(&[&"--symlink", &target, &top]),
                        Err(_) if path.is_dir() => push(&[&"--ro-bind", &top, &top]),
                        Err(_) => {}
                    }
                }
                for root in program_roots(&launch.program, &launch.package) {
                    push(&[&"--ro-bind", &root, &root]);
                }
            }
        }
        for file in RUNTIME_FILES {
            push(&[&"--ro-bind-try", &file, &file]);
        }
        if !launch
            .shown
            .iter()
            .any(|(_, inside)| *inside == launch.package)
        {
            push(&[&"--ro-bind", &launch.package, &launch.package]);
        }
        for tree in &launch.read_only {
            push(&[&"--ro-bind", tree, tree]);
        }
        for (host, inside) in &launch.shown {
            push(&[&"--ro-bind", host, inside]);
        }
        push(&[&"--bind", &launch.scratch, &launch.scratch]);
        let size = OUTPUT_TMPFS_BYTES.to_string();
        for (path, writable) in &launch.attachments {
            if *writable {
                // A fresh bounded tmpfs, never a host directory: a full
                // output is ENOSPC inside the Run, not a full host disk.
                push(&[&"--size", &size, &"--tmpfs", path]);
            } else {
                push(&[&"--ro-bind", path, path]);
            }
        }
        push(&[&"--chdir", &launch.cwd]);
        for (key, value) in &launch.env {
            push(&[&"--setenv", key, value]);
        }
        // Nothing outside the explicit writable grants (scratch, writable
        // attachments, the private /tmp) can be written.
        push(&[&"--remount-ro", &"/"]);
        a
    }
}

/// Read-only trees the program itself needs beyond the fixed runtime view:
/// the Nix store for a store path, or the install prefix (`<prefix>/bin/x`)
/// of an interpreter that lives outside `/usr` and outside the package.
fn program_roots(program: &Path, package: &Path) -> Vec<PathBuf> {
    let Ok(real) = program.canonicalize() else {
        return Vec::new();
    };
    if real.starts_with(NIX_STORE) {
        return vec![PathBuf::from(NIX_STORE)];
    }
    let package = package.canonicalize().unwrap_or(package.to_path_buf());
    let covered = RUNTIME_TREES.iter().any(|t| real.starts_with(t)) || real.starts_with(&package);
    if covered {
        return Vec::new();
    }
    let mut roots = Vec::new();
    if program != real {
        // The named path (a link) must resolve inside too.
        if let Some(dir) = program.parent() {
            roots.push(dir.to_path_buf());
        }
    }
    let prefix = real
        .parent()
        .filter(|bin| bin.file_name().is_some_and(|n| n == "bin"))
        .and_then(Path::parent)
        .or_else(|| real.parent())
        .map(Path::to_path_buf);
    roots.extend(prefix.filter(|p| p != Path::new("/")));
    roots
}

impl Sandbox for Bubblewrap {
    fn name(&self) -> &'static str {
        "bubblewrap"
    }

    fn spawn(&self, launch: &Launch) -> std::io::Result<Contained> {
        self.start(launch, None)
    }

    fn spawn_held(&self, launch: &Launch, hold: Hold) -> std::io::Result<Contained> {
        self.start(launch, Some(hold))
    }

    fn bounded_output(&self, _path: &Path) -> std::io::Result<OwnedFd> {
        self.hold_output()
    }

    /// Make the host group and one Run group with `limits` now, on the
    /// caller's thread, so the launch that follows finds them made: the
    /// CLI does this while the package is read and verified, a daemon
    /// after each Run for the next. A group nothing takes is removed with
    /// the host group (or, should the host die first, swept by the next
    /// host like any stale group); after a daemon released what it kept,
    /// nothing is made ahead.
    fn prepare(&self, limits: Limits) {
        let mut host = self.host.lock().unwrap_or_else(|e| e.into_inner());
        if host.ready.is_some() || host.released {
            return;
        }
        match self.new_run_group(&mut host, limits) {
            Ok(group) => host.ready = Some((limits, group)),
            Err(_) => {
                let _ = host.release_if_idle();
            }
        }
    }

    fn shows_elsewhere(&self) -> bool {
        true
    }

    fn keep_between_runs(&self, keep: bool) {
        let mut host = self.host.lock().unwrap_or_else(|e| e.into_inner());
        host.keep = keep;
        host.released = !keep;
        let _ = host.release_if_idle();
    }
}

impl Bubblewrap {
    /// Start `launch` in a new envelope, held as `hold` says: bubblewrap
    /// waits on the gate after making it, before it executes the program
    /// ([`Hold::Envelope`]), or the program finds it at
    /// [`PAYLOAD_GATE_FD`] ([`Hold::Payload`]).
    fn start(&self, launch: &Launch, hold: Option<Hold>) -> std::io::Result<Contained> {
        let writable = launch.attachments.iter().any(|(_, writable)| *writable);
        if hold == Some(Hold::Envelope) && writable {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "an envelope with a writable attachment cannot be held before exec",
            ));
        }
        let group = self
            .run_group(launch.limits)
            .map_err(std::io::Error::other)?;
        let mut fence = CgroupFence {
            group: Some(group),
            host: self.host.clone(),
        };
        if hold.is_some() {
            fence.set_idle(true);
        }
        let group = fence.group.as_ref().expect("set above");
        let procs: Vec<std::fs::File> = group
            .entry_files()
            .iter()
            .map(|p| std::fs::OpenOptions::new().write(true).open(p))
            .collect::<std::io::Result<_>>()?;
        let fds: Vec<RawFd> = procs.iter().map(AsRawFd::as_raw_fd).collect();
        let outputs: Vec<PathBuf> = launch
            .attachments
            .iter()
            .filter(|(_, writable)| *writable)
            .map(|(path, _)| path.clone())
            .collect();
        // With a writable attachment, bubblewrap reports the sandbox pid
        // and waits until the host holds the attachment's directory.
        let handoff = if outputs.is_empty() {
            None
        } else {
            Some(Pipes::new()?)
        };
        // Held: the gate's read end goes to bubblewrap or to the program.
        let gate = match hold {
            Some(_) => Some(nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?),
            None => None,
        };
        // Where each passed descriptor lands: a payload's gate first, the
        // handoff after it.
        let first = match hold {
            Some(Hold::Payload) => PAYLOAD_GATE_FD + 1,
            _ => INFO_FD,
        };
        let mut placed: Vec<(RawFd, RawFd)> = Vec::new();
        let mut command = tokio::process::Command::new(&self.bwrap);
        command.args(self.arguments(launch));
        if let Some(pipes) = &handoff {
            let (info, block) = pipes.child_ends();
            placed.extend([(info, first), (block, first + 1)]);
            command.args(handoff_arguments(first, first + 1));
        }
        match (hold, &gate) {
            (Some(Hold::Envelope), Some((read, _))) => {
                placed.push((read.as_raw_fd(), BLOCK_FD));
                command.args(["--block-fd".to_string(), BLOCK_FD.to_string()]);
            }
            (Some(Hold::Payload), Some((read, _))) => {
                placed.push((read.as_raw_fd(), PAYLOAD_GATE_FD))
            }
            _ => {}
        }
        command
            .arg("--")
            .arg(&launch.program)
            .args(&launch.args)
            .env_clear()
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let passed = Passed::new(&placed);
        // SAFETY: the hook runs in the forked child before exec and only
        // makes raw system calls (write, fcntl, dup2, close_range) on
        // descriptors opened by the parent; it allocates nothing and takes
        // no locks.
        unsafe {
            command.pre_exec(move || {
                enter_cgroup(&fds)?;
                pass_handoff(passed)
            });
        }
        let spawned = command.spawn();
        drop(procs);
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => {
                let _ = fence.cleanup();
                return Err(e);
            }
        };
        let held = match handoff {
            None => Vec::new(),
            Some(pipes) => match pipes.receive(&outputs) {
                Ok(held) => held,
                Err(e) => {
                    let _ = child.start_kill();
                    fence.kill_all();
                    let _ = fence.cleanup();
                    return Err(e);
                }
            },
        };
        let contained = Contained::new(child, Box::new(fence)).with_outputs(held);
        Ok(match gate {
            Some((_, write)) => contained.held_at(write),
            None => contained,
        })
    }
}

/// The bubblewrap options of the descriptor handoff.
fn handoff_arguments(info: RawFd, block: RawFd) -> [String; 4] {
    [
        "--info-fd".into(),
        info.to_string(),
        "--block-fd".into(),
        block.to_string(),
    ]
}

impl Bubblewrap {
    /// The writable attachment of an in-process recipe: a minimal holder
    /// (bubblewrap alone, in its own user and mount namespaces, running no
    /// program) mounts the same bounded tmpfs; the host takes its directory
    /// and ends the holder. The mount then lives, detached, exactly as long
    /// as the returned descriptor.
    pub fn hold_output(&self) -> std::io::Result<OwnedFd> {
        let pipes = Pipes::new()?;
        let size = OUTPUT_TMPFS_BYTES.to_string();
        use std::os::unix::process::CommandExt;
        let mut command = std::process::Command::new(&self.bwrap);
        command
            .args([
                "--unshare-all",
                "--die-with-parent",
                "--new-session",
                "--clearenv",
                "--cap-drop",
                "ALL",
                "--size",
                &size,
                "--tmpfs",
                HOLDER_MOUNT,
            ])
            .args(handoff_arguments(INFO_FD, BLOCK_FD))
            // There is nothing to run: once released, the exec of this
            // absent placeholder fails and the holder exits.
            .args(["--", "/nonexistent/jig-output-holder"])
            .env_clear()
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        let (info, block) = pipes.child_ends();
        let passed = Passed::new(&[(info, INFO_FD), (block, BLOCK_FD)]);
        // SAFETY: as in `spawn`: raw system calls only.
        unsafe {
            command.pre_exec(move || pass_handoff(passed));
        }
        let mut child = command.spawn()?;
        let held = pipes.receive(&[PathBuf::from(HOLDER_MOUNT)]);
        if held.is_err() {
            let _ = child.kill();
        }
        // Released, the holder fails to exec its placeholder and exits;
        // its namespace goes with it, the tmpfs stays with the descriptor.
        let _ = child.wait();
        held.map(|mut h| h.remove(0).1)
    }
}

/// The pipes of one handoff: bubblewrap writes its info JSON to `info`
/// and waits for a byte (or EOF) on `block`.
struct Pipes {
    info_read: OwnedFd,
    info_write: OwnedFd,
    block_read: OwnedFd,
    block_write: OwnedFd,
}

impl Pipes {
    fn new() -> std::io::Result<Pipes> {
        let (info_read, info_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        let (block_read, block_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        Ok(Pipes {
            info_read,
            info_write,
            block_read,
            block_write,
        })
    }

    fn child_ends(&self) -> (RawFd, RawFd) {
        (self.info_write.as_raw_fd(), self.block_read.as_raw_fd())
    }

    /// After spawn: learn the sandbox pid, open each writable attachment
    /// through `/proc/<pid>/root` once it is the bounded tmpfs, then let
    /// bubblewrap exec the payload.
    fn receive(self, outputs: &[PathBuf]) -> std::io::Result<Vec<(PathBuf, OwnedFd)>> {
        let Pipes {
            info_read,
            info_write,
            block_read,
            block_write,
        } = self;
        drop(info_write);
        drop(block_read);
        let until = Instant::now() + HANDOFF_WAIT;
        let pid = read_child_pid(&info_read, until)?;
        let mut held = Vec::new();
        for path in outputs {
            held.push((path.clone(), open_mounted_output(pid, path, until)?));
        }
        nix::unistd::write(&block_write, b"x")?;
        Ok(held)
    }
}

/// Read bubblewrap's `--info-fd` JSON up to its closing brace.
fn read_child_pid(info: &OwnedFd, until: Instant) -> std::io::Result<u32> {
    let mut text = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        if let Ok(value) = serde_json::from_slice::<serde_json::Value>(&text) {
            return value
                .get("child-pid")
                .and_then(serde_json::Value::as_u64)
                .map(|p| p as u32)
                .ok_or_else(|| std::io::Error::other("bubblewrap reported no child-pid"));
        }
        let left = until.saturating_duration_since(Instant::now());
        let mut pfd = nix::libc::pollfd {
            fd: info.as_raw_fd(),
            events: nix::libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call.
        let ready = unsafe { nix::libc::poll(&mut pfd, 1, left.as_millis().min(60_000) as i32) };
        if ready < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if left.is_zero() || ready == 0 {
            return Err(std::io::Error::other(
                "bubblewrap did not report its sandbox in time",
            ));
        }
        let n = nix::unistd::read(info, &mut buf)?;
        if n == 0 {
            return Err(std::io::Error::other(
                "bubblewrap exited before it reported its sandbox",
            ));
        }
        text.extend_from_slice(&buf[..n]);
    }
}

/// Open `path` as the sandbox `pid` sees it, once it is the bounded tmpfs
/// bubblewrap mounts there (until then it is absent, or still the host's
/// directory: the sandbox is being set up).
fn open_mounted_output(pid: u32, path: &Path, until: Instant) -> std::io::Result<OwnedFd> {
    let inside = Path::new("/proc")
        .join(pid.to_string())
        .join("root")
        .join(path.strip_prefix("/").unwrap_or(path));
    let host_dev = std::fs::symlink_metadata(path).ok().map(|m| {
        use std::os::unix::fs::MetadataExt;
        m.dev()
    });
    let mut backoff = super::cgroup::Backoff::new();
    loop {
        if let Ok(fd) = open_directory(&inside) {
            if is_output_tmpfs(&fd, host_dev) {
                return Ok(fd);
            }
        }
        if Instant::now() >= until {
            return Err(std::io::Error::other(format!(
                "the writable attachment {} was not mounted in time",
                path.display()
            )));
        }
        backoff.pause();
    }
}

/// Is `fd` the root of a tmpfs of exactly [`OUTPUT_TMPFS_BYTES`], on
/// another device than the host directory of the same name?
fn is_output_tmpfs(fd: &OwnedFd, host_dev: Option<u64>) -> bool {
    let Ok(fs) = nix::sys::statfs::fstatfs(fd) else {
        return false;
    };
    let Ok(stat) = nix::sys::stat::fstat(fd) else {
        return false;
    };
    fs.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC
        && fs.blocks() * fs.block_size() as u64 == OUTPUT_TMPFS_BYTES
        && host_dev != Some(stat.st_dev)
}

/// The descriptors the forked child passes bubblewrap, each moved to its
/// number there (at most three: a payload's gate and the handoff pipes).
#[derive(Clone, Copy)]
struct Passed {
    fds: [(RawFd, RawFd); 3],
    len: usize,
}

impl Passed {
    fn new(placed: &[(RawFd, RawFd)]) -> Passed {
        assert!(placed.len() <= 3, "at most three descriptors are passed");
        let mut fds = [(-1, -1); 3];
        fds[..placed.len()].copy_from_slice(placed);
        Passed {
            fds,
            len: placed.len(),
        }
    }
}

/// In the forked child: put each passed descriptor at its number
/// (inherited), everything else above stderr close-on-exec.
/// Async-signal-safe: raw syscalls only, no allocation.
fn pass_handoff(passed: Passed) -> std::io::Result<()> {
    let fds = &passed.fds[..passed.len];
    let mut moved = [-1; 3];
    // Out of the way first: a source may sit at another's number.
    for (i, (from, _)) in fds.iter().enumerate() {
        // SAFETY: fcntl on a descriptor the parent keeps open.
        moved[i] = unsafe { nix::libc::fcntl(*from, nix::libc::F_DUPFD, 16) };
        if moved[i] < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    let mut first_closed = 3;
    for (i, (_, to)) in fds.iter().enumerate() {
        // SAFETY: dup2 of a descriptor made above onto a fixed number.
        if unsafe { nix::libc::dup2(moved[i], *to) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        first_closed = first_closed.max(*to as u32 + 1);
    }
    // SAFETY: close_range only changes descriptor flags.
    let r = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_close_range,
            first_closed,
            u32::MAX,
            nix::libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// In the forked child: join the Run's cgroup (writing "0" moves the
/// writer). Async-signal-safe: raw syscalls only.
fn enter_cgroup(fds: &[RawFd]) -> std::io::Result<()> {
    for fd in fds {
        // SAFETY: fd is an open descriptor owned by the parent's File,
        // alive until after spawn returns.
        let n = unsafe { nix::libc::write(*fd, b"0".as_ptr().cast(), 1) };
        if n != 1 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

struct CgroupFence {
    group: Option<Group>,
    host: Arc<Mutex<HostGroup>>,
}

impl Fence for CgroupFence {
    fn terminate(&mut self, spare: Option<u32>) {
        if let Some(group) = &self.group {
            group.signal_members(nix::sys::signal::Signal::SIGTERM, spare);
        }
    }

    fn populated(&mut self) -> bool {
        self.group.as_ref().is_some_and(Group::populated)
    }

    fn kill_all(&mut self) {
        if let Some(group) = &self.group {
            group.kill_all();
        }
    }

    fn set_idle(&mut self, idle: bool) {
        if let Some(group) = &self.group {
            let _ = group.set_idle(idle);
        }
    }

    fn cleanup(&mut self) -> Result<(), String> {
        let Some(group) = &self.group else {
            return Ok(());
        };
        group.remove(EMPTY_WAIT)?;
        self.group = None;
        let mut host = self.host.lock().unwrap_or_else(|e| e.into_inner());
        host.active -= 1;
        host.release_if_idle()
    }
}

impl Drop for Bubblewrap {
    /// A Run group made ahead that no launch took goes with the host.
    fn drop(&mut self) {
        let mut host = self.host.lock().unwrap_or_else(|e| e.into_inner());
        host.keep = false;
        let _ = host.release_if_idle();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Bubblewrap with `bwrap` whose cgroups are never made (a v2 base
    /// that does not exist): for the arguments it builds.
    fn unplaced(bwrap: PathBuf) -> Bubblewrap {
        Bubblewrap {
            bwrap,
            hierarchy: Hierarchy::new(super::super::cgroup::Layout::V2 {
                base: "/nonexistent".into(),
            }),
            host: Arc::default(),
            counter: AtomicU64::new(0),
        }
    }

    /// A daemon's Bubblewrap whose v2 cgroups are recorded, not made.
    fn recorded(sys: &Arc<crate::syscall::recording::Recording>) -> Bubblewrap {
        let files = [
            "cgroup.procs",
            "cgroup.events",
            "cgroup.kill",
            "cgroup.subtree_control",
        ];
        sys.dir("/cg/jig.slice")
            .makes("/cg/jig.slice", &files)
            .makes("/cg/jig.slice", &["memory.max", "pids.max", "cpu.max"]);
        Bubblewrap {
            bwrap: "/usr/bin/bwrap".into(),
            hierarchy: Hierarchy::with_syscall(
                super::super::cgroup::Layout::V2 {
                    base: "/cg/jig.slice".into(),
                },
                sys.clone(),
            ),
            host: Arc::default(),
            counter: AtomicU64::new(0),
        }
    }

    #[test]
    fn a_daemon_makes_the_next_group_ahead_until_it_lets_go() {
        let sys = Arc::new(crate::syscall::recording::Recording::new());
        let bw = recorded(&sys);
        let host = format!("/cg/jig.slice/{}", Bubblewrap::host_group_name());
        bw.keep_between_runs(true);
        bw.prepare(Limits::FLOW);
        assert!(sys.has_dir(format!("{host}/run-0")), "{:?}", sys.calls());
        // A second prepare while one waits makes no other.
        bw.prepare(Limits::FLOW);
        assert!(!sys.has_dir(format!("{host}/run-1")));
        // Letting go removes the waiting group and the host group, and
        // nothing is made ahead after it.
        bw.keep_between_runs(false);
        assert!(!sys.has_dir(format!("{host}/run-0")));
        assert!(!sys.has_dir(&host));
        bw.prepare(Limits::FLOW);
        assert!(!sys.has_dir(&host), "{:?}", sys.calls());
    }

    fn launch() -> Launch {
        Launch {
            program: "/usr/bin/python3".into(),
            args: vec!["/p/pkg/flow.py".into()],
            env: vec![("LANG".into(), "C.UTF-8".into())],
            cwd: "/p/scratch".into(),
            package: "/p/pkg".into(),
            scratch: "/p/scratch".into(),
            read_only: vec!["/p/sdk".into()],
            shown: Vec::new(),
            attachments: vec![("/a/in".into(), false), ("/a/out".into(), true)],
            limits: Limits::FLOW,
            network: false,
            view: None,
        }
    }

    fn after<'a>(args: &'a [String], flag: &str) -> Vec<&'a str> {
        args.windows(3)
            .filter(|w| w[0] == flag)
            .map(|w| w[1].as_str())
            .collect()
    }

    /// A shared tree shown at the package's path is the package: the
    /// package path itself is not bound, the tree is, read-only, there.
    #[test]
    fn a_tree_shown_at_the_package_replaces_its_bind() {
        let b = unplaced(PathBuf::from("/usr/bin/bwrap"));
        let mut launch = launch();
        launch.shown = vec![
            ("/s/trees/abc".into(), "/p/pkg".into()),
            ("/s/support/py".into(), "/p/python".into()),
        ];
        let args: Vec<String> = b
            .arguments(&launch)
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        let binds: Vec<(&str, &str)> = args
            .windows(3)
            .filter(|w| w[0] == "--ro-bind")
            .map(|w| (w[1].as_str(), w[2].as_str()))
            .collect();
        assert!(binds.contains(&("/s/trees/abc", "/p/pkg")), "{binds:?}");
        assert!(binds.contains(&("/s/support/py", "/p/python")), "{binds:?}");
        assert!(!binds.contains(&("/p/pkg", "/p/pkg")), "{binds:?}");
        assert!(b.shows_elsewhere());
    }

    /// With a runtime view, the host's /usr and its top-level links are
    /// not shown: only the view's files, directories and links.
    #[test]
    fn a_runtime_view_replaces_usr() {
        let b = unplaced(PathBuf::from("/usr/bin/bwrap"));
        let mut launch = launch();
        let mut view = super::super::closure::View::default();
        view.files.insert("/usr/bin/python3.11".into());
        view.dirs.insert("/usr/lib/python3.11".into());
        view.links
            .insert("/usr/bin/python3".into(), "python3.11".into());
        launch.view = Some(Arc::new(view));
        let args: Vec<String> = b
            .arguments(&launch)
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        let ro = after(&args, "--ro-bind");
        assert!(!ro.contains(&"/usr"), "{args:?}");
        assert!(ro.contains(&"/usr/bin/python3.11") && ro.contains(&"/usr/lib/python3.11"));
        assert_eq!(after(&args, "--symlink")[4..], ["python3.11"], "{args:?}");
        assert!(!args.iter().any(|a| a == "/lib64"), "{args:?}");
    }

    #[test]
    fn arguments_grant_exactly_the_launch() {
        let b = unplaced(PathBuf::from("/usr/bin/bwrap"));
        let args: Vec<String> = b
            .arguments(&launch())
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        for flag in [
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
        ] {
            assert!(args.iter().any(|a| a == flag), "{flag} in {args:?}");
        }
        assert!(!args.iter().any(|a| a == "--share-net"));
        let ro = after(&args, "--ro-bind");
        assert!(ro.contains(&"/p/pkg") && ro.contains(&"/p/sdk") && ro.contains(&"/a/in"));
        assert!(ro.contains(&"/usr"));
        assert!(!ro
            .iter()
            .any(|p| *p == "/etc" || *p == "/home" || *p == "/root"));
        assert_eq!(after(&args, "--bind"), vec!["/p/scratch"]);
        // The writable attachment is a bounded tmpfs, not a host directory.
        let tmpfs = args.iter().position(|a| a == "/a/out").unwrap();
        assert_eq!(
            &args[tmpfs - 3..=tmpfs],
            ["--size", "16777216", "--tmpfs", "/a/out"]
        );
        assert_eq!(after(&args, "--chdir"), vec!["/p/scratch"]);
        assert_eq!(
            after(&args, "--dev-bind"),
            vec!["/dev/null", "/dev/zero", "/dev/urandom"]
        );
        // Binds under /tmp must come after the private /tmp.
        let tmp = args.iter().position(|a| a == "/tmp").unwrap();
        let scratch = args.iter().position(|a| a == "/p/scratch").unwrap();
        assert!(tmp < scratch);
        let env = args.iter().position(|a| a == "--setenv").unwrap();
        assert_eq!(&args[env..env + 3], ["--setenv", "LANG", "C.UTF-8"]);
        // The root view is read-only once everything is mounted.
        assert_eq!(&args[args.len() - 2..], ["--remount-ro", "/"]);
        assert_eq!(after(&args, "--uid"), vec!["65534"]);
        assert_eq!(after(&args, "--cap-drop"), vec!["ALL"]);
    }

    /// The in-process recipe's writable attachment: a 16 MiB tmpfs held
    /// only by the returned descriptor. 16 MiB fit, one byte more is
    /// ENOSPC, and no mount of it ever appears in the host's namespace.
    #[test]
    fn a_held_output_is_a_bounded_tmpfs_reachable_only_by_its_descriptor() {
        let bwrap = match super::super::find_bwrap(None) {
            Ok((path, _)) => path,
            Err(e) => {
                eprintln!("\n*** SKIPPED: no usable bubblewrap: {e} ***\n");
                return;
            }
        };
        let b = unplaced(bwrap);
        let mounts_before = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let fd = b.hold_output().expect("a held output");
        let dir = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
        let fs = nix::sys::statfs::fstatfs(&fd).unwrap();
        assert_eq!(fs.filesystem_type(), nix::sys::statfs::TMPFS_MAGIC);
        assert_eq!(fs.blocks() * fs.block_size() as u64, OUTPUT_TMPFS_BYTES);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "empty");
        let chunk = vec![7u8; OUTPUT_TMPFS_BYTES as usize];
        std::fs::write(dir.join("full"), &chunk).expect("16 MiB fit");
        let one_more = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join("full"))
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"x"));
        assert_eq!(
            one_more.unwrap_err().raw_os_error(),
            Some(nix::libc::ENOSPC),
            "one byte past the bound"
        );
        // Read back through the handed-back descriptor, as delivery does.
        let through_fd = format!("/proc/self/fd/{}", fd.as_raw_fd());
        let files: Vec<Vec<u8>> = std::fs::read_dir(&through_fd)
            .unwrap()
            .map(|entry| std::fs::read(entry.unwrap().path()).unwrap())
            .collect();
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].len() as u64, OUTPUT_TMPFS_BYTES);
        assert_eq!(
            std::fs::read_to_string("/proc/self/mountinfo").unwrap(),
            mounts_before,
            "the tmpfs is never mounted in the host's namespace"
        );
        // Closing the descriptor frees the filesystem: its 16 MiB of
        // shared memory go (slack for whatever else runs meanwhile).
        let held = shmem_kib();
        drop(fd);
        let until = std::time::Instant::now() + Duration::from_secs(2);
        while held - shmem_kib() < 12 * 1024 && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        let freed = held - shmem_kib();
        assert!(freed >= 12 * 1024, "only {freed} KiB freed after close");
    }

    fn shmem_kib() -> i64 {
        std::fs::read_to_string("/proc/meminfo")
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("Shmem:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap()
    }

    #[test]
    fn an_interpreter_outside_usr_brings_its_prefix_only() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("py/bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join("python3"), "").unwrap();
        let roots = program_roots(&bin.join("python3"), Path::new("/p/pkg"));
        assert_eq!(roots, vec![dir.path().join("py").canonicalize().unwrap()]);
        assert!(program_roots(Path::new("/usr/bin/env"), Path::new("/p")).is_empty());
    }
}
