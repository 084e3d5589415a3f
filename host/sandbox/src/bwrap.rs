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

use super::cgroup::{Group, Hierarchy, Limits, EMPTY_WAIT, HOST_GROUP_PREFIX};
use super::{Contained, Fence, Hold, Launch, Sandbox, OUTPUT_TMPFS_BYTES};

mod handoff;

use handoff::{enter_cgroup, handoff_arguments, pass_handoff, Passed, Pipes};

/// The descriptor numbers bubblewrap is given for the handoff: it reports
/// the sandbox's pid on `INFO_FD` and waits on `BLOCK_FD` before it execs
/// the payload.
const INFO_FD: RawFd = 3;
const BLOCK_FD: RawFd = 4;
/// Where a payload held at its own gate ([`Hold::Payload`]) finds it; the
/// handoff then moves up by one.
pub const PAYLOAD_GATE_FD: RawFd = 3;
/// Where the holder of an in-process recipe's output mounts it.
const HOLDER_MOUNT: &str = "/output";

/// The unprivileged identity package code runs as inside the envelope.
pub const SANDBOX_UID: u32 = 65534;
pub const SANDBOX_GID: u32 = 65534;
/// The host name package code sees.
pub const SANDBOX_HOSTNAME: &str = "flow";

/// What bubblewrap prints when `sethostname()` is refused for its
/// `--hostname`: a seccomp filter inherited from whatever started jig.
const HOSTNAME_REFUSED: &str = "Can't set hostname";

/// The explanation of a failed Run's stderr where bubblewrap itself failed
/// for a cause jig knows (its `bwrap: ` line), else None: a Run whose
/// envelope never started says why, not only that its program exited.
pub fn known_failure(stderr: &str) -> Option<String> {
    stderr
        .lines()
        .find(|line| line.starts_with("bwrap: ") && line.contains(HOSTNAME_REFUSED))
        .map(explain_failure)
}

/// bubblewrap's own complaint (its stderr) in the operator's terms where
/// jig knows the cause; otherwise the complaint as it is.
pub fn explain_failure(stderr: &str) -> String {
    let stderr = stderr.trim();
    if stderr.contains(HOSTNAME_REFUSED) {
        format!(
            "{stderr}: a seccomp filter on jig's process (such as systemd's \
             ProtectHostname=) forbids sethostname(), which bubblewrap needs to name each \
             sandbox inside its own UTS namespace, so contained Runs cannot start under it; \
             lift the filter for the unit that runs jig (ProtectHostname=false; the host's \
             own hostname stays unchanged either way)"
        )
    } else {
        stderr.to_string()
    }
}

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
        let scratch_size = launch.scratch_bytes.map(|bytes| bytes.to_string());
        match &scratch_size {
            Some(size) => push(&[&"--size", size, &"--tmpfs", &"/tmp"]),
            None => push(&[&"--tmpfs", &"/tmp"]),
        }
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
        match &scratch_size {
            // A fresh bounded tmpfs, as the writable attachment: a full
            // scratch is ENOSPC inside the Run, not a full host disk.
            Some(size) => push(&[&"--size", size, &"--tmpfs", &launch.scratch]),
            None => push(&[&"--bind", &launch.scratch, &launch.scratch]),
        }
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

    fn bounded_tmpfs(&self, _path: &Path, bytes: u64) -> std::io::Result<OwnedFd> {
        self.hold_tmpfs(bytes)
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
            Some(pipes) => match pipes.receive(&outputs, OUTPUT_TMPFS_BYTES) {
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

impl Bubblewrap {
    /// A writable directory of an in-process recipe: a minimal holder
    /// (bubblewrap alone, in its own user and mount namespaces, running no
    /// program) mounts a tmpfs of at most `bytes`; the host takes its
    /// directory and ends the holder. The mount then lives, detached,
    /// exactly as long as the returned descriptor.
    pub fn hold_tmpfs(&self, bytes: u64) -> std::io::Result<OwnedFd> {
        let pipes = Pipes::new()?;
        let size = bytes.to_string();
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
        let held = pipes.receive(&[PathBuf::from(HOLDER_MOUNT)], bytes);
        if held.is_err() {
            let _ = child.kill();
        }
        // Released, the holder fails to exec its placeholder and exits;
        // its namespace goes with it, the tmpfs stays with the descriptor.
        let _ = child.wait();
        held.map(|mut h| h.remove(0).1)
    }
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
mod tests;
