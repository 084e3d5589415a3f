//! The contained envelope: a Run-owned cgroup entered before exec, then
//! bubblewrap with new user, mount, PID, IPC, UTS, cgroup and network
//! namespaces, showing only what [`Launch`] grants.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::cgroup::{Group, Hierarchy, Limits, EMPTY_WAIT, HOST_GROUP_PREFIX};
use super::{Contained, Fence, Launch, Sandbox};

/// The unprivileged identity package code runs as inside the envelope.
pub const SANDBOX_UID: u32 = 65534;
pub const SANDBOX_GID: u32 = 65534;
/// The host name package code sees.
pub const SANDBOX_HOSTNAME: &str = "flow";

/// Read-only runtime trees every process recipe may need: the system's
/// programs and libraries. `/etc` is never shown whole; only the dynamic
/// linker cache.
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
/// while at least one envelope is.
#[derive(Default)]
struct HostGroup {
    group: Option<Group>,
    active: usize,
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

    fn run_group(&self) -> Result<Group, String> {
        let mut host = self.host.lock().unwrap_or_else(|e| e.into_inner());
        if host.group.is_none() {
            host.group = Some(self.hierarchy.create_host_group(&Self::host_group_name())?);
        }
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let parent = host.group.as_ref().expect("just created");
        let group = parent.child(&format!("run-{n}"), Limits::FLOW);
        match group {
            Ok(group) => {
                host.active += 1;
                Ok(group)
            }
            Err(e) => {
                if host.active == 0 {
                    if let Some(g) = host.group.take() {
                        let _ = g.remove(EMPTY_WAIT);
                    }
                }
                Err(e)
            }
        }
    }

    /// The bubblewrap arguments for `launch` (everything before `--`).
    pub fn arguments(&self, launch: &Launch) -> Vec<OsString> {
        let mut a: Vec<OsString> = Vec::new();
        let mut push = |items: &[&dyn AsRef<std::ffi::OsStr>]| {
            a.extend(items.iter().map(|i| i.as_ref().to_os_string()));
        };
        push(&[
            &"--unshare-all",
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
        for file in RUNTIME_FILES {
            push(&[&"--ro-bind-try", &file, &file]);
        }
        for root in program_roots(&launch.program, &launch.package) {
            push(&[&"--ro-bind", &root, &root]);
        }
        push(&[&"--ro-bind", &launch.package, &launch.package]);
        for tree in &launch.read_only {
            push(&[&"--ro-bind", tree, tree]);
        }
        push(&[&"--bind", &launch.scratch, &launch.scratch]);
        for (path, writable) in &launch.attachments {
            let how = if *writable { "--bind" } else { "--ro-bind" };
            push(&[&how, path, path]);
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
        let group = self.run_group().map_err(std::io::Error::other)?;
        let mut fence = CgroupFence {
            group: Some(group),
            host: self.host.clone(),
        };
        let group = fence.group.as_ref().expect("set above");
        let procs: Vec<std::fs::File> = group
            .procs_files()
            .iter()
            .map(|p| std::fs::OpenOptions::new().write(true).open(p))
            .collect::<std::io::Result<_>>()?;
        let fds: Vec<RawFd> = procs.iter().map(AsRawFd::as_raw_fd).collect();
        let mut command = tokio::process::Command::new(&self.bwrap);
        command
            .args(self.arguments(launch))
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
        // SAFETY: the hook runs in the forked child before exec and only
        // makes raw system calls (write, close_range) on descriptors opened
        // by the parent; it allocates nothing and takes no locks.
        unsafe {
            command.pre_exec(move || enter_cgroup(&fds));
        }
        let spawned = command.spawn();
        drop(procs);
        match spawned {
            Ok(child) => Ok(Contained::new(child, Box::new(fence))),
            Err(e) => {
                let _ = fence.cleanup();
                Err(e)
            }
        }
    }
}

/// In the forked child: join the Run's cgroup (writing "0" moves the
/// writer), then make every inherited descriptor above stderr close on
/// exec. Async-signal-safe: raw syscalls only.
fn enter_cgroup(fds: &[RawFd]) -> std::io::Result<()> {
    for fd in fds {
        // SAFETY: fd is an open descriptor owned by the parent's File,
        // alive until after spawn returns.
        let n = unsafe { nix::libc::write(*fd, b"0".as_ptr().cast(), 1) };
        if n != 1 {
            return Err(std::io::Error::last_os_error());
        }
    }
    // SAFETY: close_range only changes descriptor flags.
    let r = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_close_range,
            3u32,
            u32::MAX,
            nix::libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

struct CgroupFence {
    group: Option<Group>,
    host: Arc<Mutex<HostGroup>>,
}

impl Fence for CgroupFence {
    fn kill_all(&mut self) {
        if let Some(group) = &self.group {
            group.kill_all();
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
        if host.active == 0 {
            if let Some(g) = host.group.take() {
                g.remove(EMPTY_WAIT)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch() -> Launch {
        Launch {
            program: "/usr/bin/python3".into(),
            args: vec!["/p/pkg/flow.py".into()],
            env: vec![("LANG".into(), "C.UTF-8".into())],
            cwd: "/p/scratch".into(),
            package: "/p/pkg".into(),
            scratch: "/p/scratch".into(),
            read_only: vec!["/p/sdk".into()],
            attachments: vec![("/a/in".into(), false), ("/a/out".into(), true)],
        }
    }

    fn after<'a>(args: &'a [String], flag: &str) -> Vec<&'a str> {
        args.windows(3)
            .filter(|w| w[0] == flag)
            .map(|w| w[1].as_str())
            .collect()
    }

    #[test]
    fn arguments_grant_exactly_the_launch() {
        let b = Bubblewrap {
            bwrap: "/usr/bin/bwrap".into(),
            hierarchy: Hierarchy::V2 {
                base: "/nonexistent".into(),
            },
            host: Arc::default(),
            counter: AtomicU64::new(0),
        };
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
        assert_eq!(after(&args, "--bind"), vec!["/p/scratch", "/a/out"]);
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
