//! Run-owned cgroups: created and limited before package code starts,
//! killed as a whole, waited empty and removed on every ending.
//!
//! cgroup v2 when the unified hierarchy is mounted at `/sys/fs/cgroup`
//! (`cpu`, `memory`, `pids` must be available for our children); cgroup v1
//! otherwise, with the `memory`, `pids` and `cpu` hierarchies (and `freezer`
//! when mounted, for an atomic kill).
//!
//! Layout: one host group `jig-<host pid>` per host process carrying the
//! root's aggregate ceiling, and one child `run-<n>` per envelope carrying
//! the Flow ceiling. The host group is removed when its last envelope is.
//!
//! Every system call goes through the hierarchy's [`Syscall`] (the kernel
//! itself unless a unit test gives a recording one), and a group made from
//! a hierarchy keeps using it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal::{self, SIGKILL};

use super::syscall::{self, Syscall};

const MIB: u64 = 1024 * 1024;

/// The CPU accounting period for both ceilings (seed 002 §8: 100 ms).
pub const CPU_PERIOD_US: u64 = 100_000;
/// Flow execution ceiling (docs/src/containment.md, Ceilings): 256 MiB.
pub const FLOW_MEMORY_BYTES: u64 = 256 * MIB;
/// Flow execution ceiling: 64 tasks (threads count as tasks).
pub const FLOW_TASKS: u64 = 64;
/// Flow execution ceiling: half a CPU per period.
pub const FLOW_CPU_QUOTA_US: u64 = CPU_PERIOD_US / 2;
/// Agent provider ceiling (docs/src/containment.md, Ceilings): 256 MiB, 128 tasks, half a CPU.
pub const AGENT_TASKS: u64 = 128;
/// Dependency preparation ceiling (docs/src/containment.md, Ceilings): 512 MiB.
pub const PREPARATION_MEMORY_BYTES: u64 = 512 * MIB;
/// Dependency preparation ceiling: 64 tasks.
pub const PREPARATION_TASKS: u64 = 64;
/// Dependency preparation ceiling: one CPU per period.
pub const PREPARATION_CPU_QUOTA_US: u64 = CPU_PERIOD_US;
/// The root's aggregate payload budget (seed 002 §8): 1,280 MiB.
pub const ROOT_MEMORY_BYTES: u64 = 1280 * MIB;
/// The root's aggregate payload budget: 448 tasks.
pub const ROOT_TASKS: u64 = 448;
/// The root's aggregate payload budget: 2.5 CPUs per period.
pub const ROOT_CPU_QUOTA_US: u64 = CPU_PERIOD_US * 5 / 2;
/// How long cleanup waits for a killed group to become empty.
pub const EMPTY_WAIT: Duration = Duration::from_secs(10);
/// The first and the longest pause while cleanup polls a group that is
/// emptying (or freezing): the last members of an envelope usually leave
/// within microseconds of its leader, so a fixed millisecond pause was most
/// of the time a Run spent in cleanup.
pub const POLL_FIRST: Duration = Duration::from_micros(20);
pub const POLL_LONGEST: Duration = Duration::from_millis(2);

/// Pauses that start at [`POLL_FIRST`] and double up to [`POLL_LONGEST`].
pub struct Backoff(Duration);

impl Backoff {
    pub fn new() -> Backoff {
        Backoff(POLL_FIRST)
    }

    pub fn pause(&mut self) {
        std::thread::sleep(self.0);
        self.0 = (self.0 * 2).min(POLL_LONGEST);
    }
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff::new()
    }
}

/// The prefix of every cgroup this host creates.
pub const HOST_GROUP_PREFIX: &str = "jig-";
/// cgroup v2 only: the suffix of the leaf a host moves itself into.
pub const HOST_LEAF_SUFFIX: &str = "-host";

/// Where the cgroup filesystems are mounted.
pub const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The controllers a Run group must have.
pub const REQUIRED_CONTROLLERS: [&str; 3] = ["cpu", "memory", "pids"];

/// The ceilings written into one group before anything enters it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub memory_bytes: u64,
    pub tasks: u64,
    pub cpu_quota_us: u64,
    pub cpu_period_us: u64,
}

impl Limits {
    pub const FLOW: Limits = Limits {
        memory_bytes: FLOW_MEMORY_BYTES,
        tasks: FLOW_TASKS,
        cpu_quota_us: FLOW_CPU_QUOTA_US,
        cpu_period_us: CPU_PERIOD_US,
    };
    /// The Agent worker's envelope (docs/src/containment.md: 256 MiB, 128 tasks, 0.5 CPU).
    pub const AGENT: Limits = Limits {
        memory_bytes: FLOW_MEMORY_BYTES,
        tasks: AGENT_TASKS,
        cpu_quota_us: FLOW_CPU_QUOTA_US,
        cpu_period_us: CPU_PERIOD_US,
    };
    /// A project command's envelope (docs/src/containment.md: 256 MiB, 64 tasks, 0.5 CPU).
    pub const COMMAND: Limits = Limits::FLOW;
    /// The Bun installer's envelope at review (docs/src/containment.md: 512 MiB, 64
    /// tasks, 1 CPU).
    pub const PREPARATION: Limits = Limits {
        memory_bytes: PREPARATION_MEMORY_BYTES,
        tasks: PREPARATION_TASKS,
        cpu_quota_us: PREPARATION_CPU_QUOTA_US,
        cpu_period_us: CPU_PERIOD_US,
    };
    pub const ROOT: Limits = Limits {
        memory_bytes: ROOT_MEMORY_BYTES,
        tasks: ROOT_TASKS,
        cpu_quota_us: ROOT_CPU_QUOTA_US,
        cpu_period_us: CPU_PERIOD_US,
    };
}

/// Where this host's groups go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// The unified hierarchy; `base` is the directory our host groups are
    /// created in.
    V2 { base: PathBuf },
    /// Per-controller hierarchies: (controller, base directory).
    V1 { bases: Vec<(String, PathBuf)> },
}

/// Which cgroup hierarchy this host uses, where our groups go, and the
/// system calls that make them.
#[derive(Debug, Clone)]
pub struct Hierarchy {
    layout: Layout,
    sys: Arc<dyn Syscall>,
}

impl Hierarchy {
    /// A hierarchy laid out as `layout`, worked with the real system calls.
    pub fn new(layout: Layout) -> Hierarchy {
        Hierarchy::with_syscall(layout, syscall::real())
    }

    /// The same, worked through `sys` (a recording one in unit tests).
    pub fn with_syscall(layout: Layout, sys: Arc<dyn Syscall>) -> Hierarchy {
        Hierarchy { layout, sys }
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Find a usable hierarchy, or say exactly what is missing. `parent`,
    /// when given, is a cgroup path relative to the hierarchy root (e.g.
    /// `/jig.slice`) used instead of this process's own cgroup.
    pub fn detect(parent: Option<&Path>) -> Result<Hierarchy, String> {
        Hierarchy::detect_at(Path::new(CGROUP_ROOT), parent)
    }

    /// [`Hierarchy::detect`] with the cgroup filesystems mounted at `root`
    /// instead of `/sys/fs/cgroup`.
    pub fn detect_at(root: &Path, parent: Option<&Path>) -> Result<Hierarchy, String> {
        Hierarchy::detect_with(syscall::real(), root, parent)
    }

    /// [`Hierarchy::detect_at`] through `sys`, which the hierarchy keeps.
    pub fn detect_with(
        sys: Arc<dyn Syscall>,
        root: &Path,
        parent: Option<&Path>,
    ) -> Result<Hierarchy, String> {
        let own = sys
            .read(Path::new("/proc/self/cgroup"))
            .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
        if sys.exists(&root.join("cgroup.controllers")) {
            let base = match parent {
                Some(p) => root.join(p.strip_prefix("/").unwrap_or(p)),
                None => {
                    let rel = own
                        .lines()
                        .find_map(|l| l.strip_prefix("0::"))
                        .ok_or("cgroup v2 is mounted but this process has no v2 cgroup")?;
                    root.join(rel.trim_start_matches('/'))
                }
            };
            let available = read_words(&*sys, &base.join("cgroup.controllers"))?;
            let missing: Vec<&str> = REQUIRED_CONTROLLERS
                .into_iter()
                .filter(|c| !available.iter().any(|a| a == c))
                .collect();
            if !missing.is_empty() {
                return Err(format!(
                    "cgroup v2 controllers {} are not delegated to {}",
                    missing.join(" "),
                    base.display()
                ));
            }
            prepare_v2(&*sys, &base)?;
            return Ok(Hierarchy::with_syscall(Layout::V2 { base }, sys));
        }
        let mut bases = Vec::new();
        for controller in REQUIRED_CONTROLLERS.into_iter().chain(["freezer"]) {
            let mount = root.join(controller);
            if !sys.exists(&mount.join("cgroup.procs")) {
                if controller == "freezer" {
                    continue;
                }
                return Err(format!(
                    "the cgroup v1 {controller} hierarchy is not mounted at {}",
                    mount.display()
                ));
            }
            let base = match parent {
                Some(p) => mount.join(p.strip_prefix("/").unwrap_or(p)),
                None => {
                    let rel = own
                        .lines()
                        .find_map(|l| {
                            let mut parts = l.splitn(3, ':');
                            let _ = parts.next();
                            let names = parts.next()?;
                            let path = parts.next()?;
                            names.split(',').any(|n| n == controller).then_some(path)
                        })
                        .unwrap_or("/");
                    mount.join(rel.trim_start_matches('/'))
                }
            };
            bases.push((controller.to_string(), base));
        }
        Ok(Hierarchy::with_syscall(Layout::V1 { bases }, sys))
    }

    pub fn version(&self) -> &'static str {
        match self.layout {
            Layout::V2 { .. } => "v2",
            Layout::V1 { .. } => "v1",
        }
    }

    /// The directories our host groups are created in (one per hierarchy).
    pub fn bases(&self) -> Vec<PathBuf> {
        match &self.layout {
            Layout::V2 { base } => vec![base.clone()],
            Layout::V1 { bases } => bases.iter().map(|(_, b)| b.clone()).collect(),
        }
    }

    /// The directories a host group named `name` would occupy.
    pub fn host_dirs(&self, name: &str) -> Vec<PathBuf> {
        self.bases().iter().map(|b| b.join(name)).collect()
    }

    /// Create the host group for this process with the root's aggregate
    /// ceiling (v2: and enable the controllers for its children).
    pub fn create_host_group(&self, name: &str) -> Result<Group, String> {
        let group = Group::create(self, &self.host_dirs(name), Limits::ROOT)?;
        if let Layout::V2 { .. } = self.layout {
            if let Err(e) = enable_controllers(&*self.sys, &group.dirs[0].1) {
                let _ = group.remove(Duration::ZERO);
                return Err(e);
            }
        }
        Ok(group)
    }

    /// Remove groups left by host processes that no longer exist (a host
    /// killed before it could clean up). Best effort.
    pub fn sweep_stale(&self) {
        let sys = &*self.sys;
        for base in self.bases() {
            let Ok(entries) = sys.subdirs(&base) else {
                continue;
            };
            for entry in entries {
                let name = entry.to_string_lossy().into_owned();
                let Some(pid) = name
                    .strip_prefix(HOST_GROUP_PREFIX)
                    .map(|p| p.strip_suffix(HOST_LEAF_SUFFIX).unwrap_or(p))
                    .and_then(|p| p.parse::<i32>().ok())
                else {
                    continue;
                };
                if sys.exists(&Path::new("/proc").join(pid.to_string())) {
                    continue;
                }
                let _ = remove_tree(sys, &base.join(&entry));
            }
        }
    }
}

/// A group's CPU weight among its siblings (v2 `cpu.weight`, v1
/// `cpu.shares`): the least, for an envelope made ahead of its Run, and
/// the kernel's default.
const CPU_WEIGHT_IDLE: &str = "1";
const CPU_WEIGHT_DEFAULT: &str = "100";
const CPU_SHARES_IDLE: &str = "2";
const CPU_SHARES_DEFAULT: &str = "1024";

/// One cgroup, present in one (v2) or several (v1) hierarchies.
#[derive(Debug)]
pub struct Group {
    /// (controller or "unified", directory)
    dirs: Vec<(String, PathBuf)>,
    v2: bool,
    sys: Arc<dyn Syscall>,
}

impl Group {
    fn create(hierarchy: &Hierarchy, dirs: &[PathBuf], limits: Limits) -> Result<Group, String> {
        let named: Vec<(String, PathBuf)> = match &hierarchy.layout {
            Layout::V2 { .. } => vec![("unified".to_string(), dirs[0].clone())],
            Layout::V1 { bases } => bases
                .iter()
                .zip(dirs)
                .map(|((c, _), d)| (c.clone(), d.clone()))
                .collect(),
        };
        let mut group = Group {
            dirs: Vec::new(),
            v2: matches!(hierarchy.layout, Layout::V2 { .. }),
            sys: hierarchy.sys.clone(),
        };
        for (controller, dir) in named {
            if let Err(e) = group.sys.create_dir(&dir) {
                // v1: not left in the hierarchies it was already made in.
                if !group.dirs.is_empty() {
                    let _ = group.remove(Duration::ZERO);
                }
                return Err(format!("cannot create cgroup {}: {e}", dir.display()));
            }
            group.dirs.push((controller, dir));
        }
        if let Err(e) = group.limit(limits) {
            let _ = group.remove(Duration::ZERO);
            return Err(e);
        }
        Ok(group)
    }

    /// A child group (`name`) under this one, limited before it is returned.
    pub fn child(&self, name: &str, limits: Limits) -> Result<Group, String> {
        let layout = if self.v2 {
            Layout::V2 {
                base: self.dirs[0].1.clone(),
            }
        } else {
            Layout::V1 {
                bases: self.dirs.clone(),
            }
        };
        let hierarchy = Hierarchy::with_syscall(layout, self.sys.clone());
        let dirs = hierarchy.host_dirs(name);
        Group::create(&hierarchy, &dirs, limits)
    }

    fn limit(&self, limits: Limits) -> Result<(), String> {
        for (controller, dir) in &self.dirs {
            let writes: Vec<(&str, String)> = match (self.v2, controller.as_str()) {
                (true, _) => vec![
                    ("memory.max", limits.memory_bytes.to_string()),
                    ("memory.swap.max", "0".into()),
                    ("pids.max", limits.tasks.to_string()),
                    (
                        "cpu.max",
                        format!("{} {}", limits.cpu_quota_us, limits.cpu_period_us),
                    ),
                ],
                (false, "memory") => vec![
                    ("memory.limit_in_bytes", limits.memory_bytes.to_string()),
                    (
                        "memory.memsw.limit_in_bytes",
                        limits.memory_bytes.to_string(),
                    ),
                ],
                (false, "pids") => vec![("pids.max", limits.tasks.to_string())],
                (false, "cpu") => vec![
                    ("cpu.cfs_period_us", limits.cpu_period_us.to_string()),
                    ("cpu.cfs_quota_us", limits.cpu_quota_us.to_string()),
                ],
                _ => vec![],
            };
            for (file, value) in writes {
                let path = dir.join(file);
                // Swap accounting may be compiled out; without it there is
                // no swap to limit.
                let optional = file.contains("swap") || file.contains("memsw");
                if optional && !self.sys.exists(&path) {
                    continue;
                }
                write_value(&*self.sys, &path, &value)?;
            }
        }
        Ok(())
    }

    /// Weigh this group's CPU against its siblings: `idle`, the least
    /// (it gets CPU nothing else wants), else the default. A hierarchy
    /// without the weight (no `cpu` controller) is left as it is.
    pub fn set_idle(&self, idle: bool) -> Result<(), String> {
        for (controller, dir) in &self.dirs {
            let (file, value) = match (self.v2, controller.as_str(), idle) {
                (true, _, true) => ("cpu.weight", CPU_WEIGHT_IDLE),
                (true, _, false) => ("cpu.weight", CPU_WEIGHT_DEFAULT),
                (false, "cpu", true) => ("cpu.shares", CPU_SHARES_IDLE),
                (false, "cpu", false) => ("cpu.shares", CPU_SHARES_DEFAULT),
                _ => continue,
            };
            let path = dir.join(file);
            if self.sys.exists(&path) {
                write_value(&*self.sys, &path, value)?;
            }
        }
        Ok(())
    }

    /// The `cgroup.procs` files a process must write itself into to enter
    /// this group (one per hierarchy).
    pub fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs
            .iter()
            .map(|(_, d)| d.join("cgroup.procs"))
            .collect()
    }

    /// The files a process that was just forked (so has one thread) writes
    /// `0` into, before exec, to enter this group itself (one per
    /// hierarchy). On cgroup v1 that is `tasks`: moving the writing thread
    /// moves the whole single-threaded process, and the kernel moves the
    /// writer itself without taking the threadgroup write lock that a
    /// `cgroup.procs` write takes, which waits for an RCU grace period
    /// (8 to 14 ms per Run on the 2-core CI machine, the largest part of a
    /// `flow.bin` Run). cgroup v2 has no `tasks` file (`cgroup.threads` is
    /// for threaded groups only), so it stays `cgroup.procs`.
    pub fn entry_files(&self) -> Vec<PathBuf> {
        let file = if self.v2 { "cgroup.procs" } else { "tasks" };
        self.dirs.iter().map(|(_, d)| d.join(file)).collect()
    }

    /// Every process currently in the group, across hierarchies.
    pub fn pids(&self) -> Vec<i32> {
        let mut pids: Vec<i32> = self
            .dirs
            .iter()
            .flat_map(|(_, d)| read_pids(&*self.sys, d))
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// Send `signal` to every process in the group except `spare` (no
    /// freezing: a polite signal may race a fork; the kill after the grace
    /// does not).
    pub fn signal_members(&self, signal: Signal, spare: Option<u32>) {
        let pids: Vec<i32> = self
            .pids()
            .into_iter()
            .filter(|p| Some(*p as u32) != spare)
            .collect();
        signal_all(&*self.sys, &pids, signal);
    }

    /// Does the group still hold a process? v2 reads `cgroup.events`
    /// (`populated 0|1`, which also covers descendants), v1 the member lists.
    pub fn populated(&self) -> bool {
        if self.v2 {
            if let Ok(events) = self.sys.read(&self.dirs[0].1.join("cgroup.events")) {
                return events.lines().any(|l| l.trim() == "populated 1");
            }
        }
        !self.pids().is_empty()
    }

    /// Kill every process in the group. v2: `cgroup.kill` (or a signal to
    /// each member where the kernel predates it); v1: freeze, signal every
    /// member, thaw, so no member can fork while the kill is delivered.
    pub fn kill_all(&self) {
        if self.v2 {
            let kill = self.dirs[0].1.join("cgroup.kill");
            if self.sys.exists(&kill) && write_value(&*self.sys, &kill, "1").is_ok() {
                return;
            }
            signal_all(&*self.sys, &self.pids(), SIGKILL);
            return;
        }
        // No member left to fork while the kill is delivered: nothing to
        // freeze.
        if self.pids().is_empty() {
            return;
        }
        let freezer = self
            .dirs
            .iter()
            .find(|(c, _)| c == "freezer")
            .map(|(_, d)| d.clone());
        if let Some(dir) = &freezer {
            let state = dir.join("freezer.state");
            if write_value(&*self.sys, &state, "FROZEN").is_ok() {
                let until = Instant::now() + Duration::from_millis(500);
                let mut backoff = Backoff::new();
                while Instant::now() < until {
                    match self.sys.read(&state) {
                        Ok(s) if s.trim() == "FROZEN" => break,
                        Ok(_) => backoff.pause(),
                        Err(_) => break,
                    }
                }
            }
        }
        signal_all(&*self.sys, &self.pids(), SIGKILL);
        if let Some(dir) = &freezer {
            let _ = write_value(&*self.sys, &dir.join("freezer.state"), "THAWED");
        }
    }

    /// Kill what remains, wait until the group is empty, and remove it.
    pub fn remove(&self, wait: Duration) -> Result<(), String> {
        let until = Instant::now() + wait;
        let mut backoff = Backoff::new();
        loop {
            if !self.populated() {
                break;
            }
            if Instant::now() >= until {
                return Err(format!(
                    "cgroup {} still holds processes {:?}",
                    self.dirs[0].1.display(),
                    self.pids()
                ));
            }
            self.kill_all();
            backoff.pause();
        }
        let mut failures = Vec::new();
        for (_, dir) in &self.dirs {
            if let Err(e) = rmdir_retrying(&*self.sys, dir, until) {
                failures.push(format!("cannot remove cgroup {}: {e}", dir.display()));
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("; "))
        }
    }

    pub fn dirs(&self) -> impl Iterator<Item = &Path> {
        self.dirs.iter().map(|(_, d)| d.as_path())
    }
}

/// cgroup v2: make `base` hand cpu, memory and pids to its children. A
/// directory that holds processes cannot (the "no internal processes"
/// rule); when the only obstacle is this host itself, as when jig is
/// started in a delegated scope (`systemd-run --user --scope -p
/// Delegate=yes jig ...`), the host moves itself into its own leaf
/// `jig-<pid>-host` first. That empty leaf is swept by the next host.
fn prepare_v2(sys: &dyn Syscall, base: &Path) -> Result<(), String> {
    let Err(first) = enable_controllers(sys, base) else {
        return Ok(());
    };
    let leaf = base.join(format!(
        "{HOST_GROUP_PREFIX}{}{HOST_LEAF_SUFFIX}",
        std::process::id()
    ));
    if let Err(e) = sys.create_dir(&leaf) {
        if e.kind() != std::io::ErrorKind::AlreadyExists {
            return Err(first);
        }
    }
    if write_value(sys, &leaf.join("cgroup.procs"), "0").is_err() {
        let _ = sys.remove_dir(&leaf);
        return Err(first);
    }
    enable_controllers(sys, base)
}

fn enable_controllers(sys: &dyn Syscall, dir: &Path) -> Result<(), String> {
    let control = dir.join("cgroup.subtree_control");
    let enabled = read_words(sys, &control)?;
    let wanted: Vec<String> = REQUIRED_CONTROLLERS
        .into_iter()
        .filter(|c| !enabled.iter().any(|e| e == c))
        .map(|c| format!("+{c}"))
        .collect();
    if wanted.is_empty() {
        return Ok(());
    }
    write_value(sys, &control, &wanted.join(" ")).map_err(|e| {
        format!(
            "{e} (a cgroup v2 directory can hand controllers to children only \
             when it holds no processes itself: start jig in a delegated scope, \
             e.g. `systemd-run --user --scope -p Delegate=yes`, or set \
             [containment] cgroup-parent to an empty delegated directory)"
        )
    })
}

fn rmdir_retrying(sys: &dyn Syscall, dir: &Path, until: Instant) -> std::io::Result<()> {
    let mut backoff = Backoff::new();
    loop {
        match sys.remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            // A just-killed member may still be leaving.
            Err(e) if e.raw_os_error() == Some(nix::libc::EBUSY) && Instant::now() < until => {
                backoff.pause();
            }
            Err(e) => return Err(e),
        }
    }
}

/// Kill and remove a whole stale subtree, deepest first.
fn remove_tree(sys: &dyn Syscall, dir: &Path) -> Result<(), String> {
    if let Ok(entries) = sys.subdirs(dir) {
        for entry in entries {
            remove_tree(sys, &dir.join(entry))?;
        }
    }
    let until = Instant::now() + Duration::from_secs(2);
    loop {
        let pids = read_pids(sys, dir);
        if pids.is_empty() {
            break;
        }
        if Instant::now() >= until {
            return Err(format!("{} still holds {pids:?}", dir.display()));
        }
        signal_all(sys, &pids, SIGKILL);
        std::thread::sleep(Duration::from_millis(2));
    }
    rmdir_retrying(sys, dir, until).map_err(|e| e.to_string())
}

fn signal_all(sys: &dyn Syscall, pids: &[i32], signal: Signal) {
    for pid in pids {
        let _ = sys.kill(*pid, signal);
    }
}

fn read_pids(sys: &dyn Syscall, dir: &Path) -> Vec<i32> {
    sys.read(&dir.join("cgroup.procs"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

fn read_words(sys: &dyn Syscall, path: &Path) -> Result<Vec<String>, String> {
    sys.read(path)
        .map(|t| t.split_whitespace().map(str::to_string).collect())
        .map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn write_value(sys: &dyn Syscall, path: &Path, value: &str) -> Result<(), String> {
    sys.write(path, value)
        .map_err(|e| format!("cannot write {value:?} to {}: {e}", path.display()))
}

#[cfg(test)]
mod tests;
