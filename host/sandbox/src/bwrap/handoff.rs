//! The descriptor handoff between the host and bubblewrap: the pipes
//! bubblewrap reports its child on and waits on, the descriptors passed to
//! the forked child before exec (and its entry into the Run's cgroup), and
//! the writable attachment's mount taken from the new namespace.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::open_directory;

/// How long the host waits for bubblewrap to report and mount the
/// writable attachment before it gives up on the launch.
const HANDOFF_WAIT: Duration = Duration::from_secs(5);

/// The bubblewrap options of the descriptor handoff.
pub(super) fn handoff_arguments(info: RawFd, block: RawFd) -> [String; 4] {
    [
        "--info-fd".into(),
        info.to_string(),
        "--block-fd".into(),
        block.to_string(),
    ]
}

/// The pipes of one handoff: bubblewrap writes its info JSON to `info`
/// and waits for a byte (or EOF) on `block`.
pub(super) struct Pipes {
    info_read: OwnedFd,
    info_write: OwnedFd,
    block_read: OwnedFd,
    block_write: OwnedFd,
}

impl Pipes {
    pub(super) fn new() -> std::io::Result<Pipes> {
        let (info_read, info_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        let (block_read, block_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        Ok(Pipes {
            info_read,
            info_write,
            block_read,
            block_write,
        })
    }

    pub(super) fn child_ends(&self) -> (RawFd, RawFd) {
        (self.info_write.as_raw_fd(), self.block_read.as_raw_fd())
    }

    /// After spawn: learn the sandbox pid, open each writable directory
    /// through `/proc/<pid>/root` once it is the tmpfs of `bytes`, then let
    /// bubblewrap exec the payload.
    pub(super) fn receive(
        self,
        outputs: &[PathBuf],
        bytes: u64,
    ) -> std::io::Result<Vec<(PathBuf, OwnedFd)>> {
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
            held.push((path.clone(), open_mounted_output(pid, path, bytes, until)?));
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

/// Open `path` as the sandbox `pid` sees it, once it is the tmpfs of
/// `bytes` bubblewrap mounts there (until then it is absent, or still the
/// host's directory: the sandbox is being set up).
fn open_mounted_output(
    pid: u32,
    path: &Path,
    bytes: u64,
    until: Instant,
) -> std::io::Result<OwnedFd> {
    let inside = Path::new("/proc")
        .join(pid.to_string())
        .join("root")
        .join(path.strip_prefix("/").unwrap_or(path));
    let host_dev = std::fs::symlink_metadata(path).ok().map(|m| {
        use std::os::unix::fs::MetadataExt;
        m.dev()
    });
    let mut backoff = crate::cgroup::Backoff::new();
    loop {
        if let Ok(fd) = open_directory(&inside) {
            if is_bounded_tmpfs(&fd, bytes, host_dev) {
                return Ok(fd);
            }
        }
        if Instant::now() >= until {
            return Err(std::io::Error::other(format!(
                "the writable directory {} was not mounted in time",
                path.display()
            )));
        }
        backoff.pause();
    }
}

/// Is `fd` the root of a tmpfs of exactly `bytes`, on another device than
/// the host directory of the same name?
fn is_bounded_tmpfs(fd: &OwnedFd, bytes: u64, host_dev: Option<u64>) -> bool {
    let Ok(fs) = nix::sys::statfs::fstatfs(fd) else {
        return false;
    };
    let Ok(stat) = nix::sys::stat::fstat(fd) else {
        return false;
    };
    fs.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC
        && fs.blocks() * fs.block_size() as u64 == bytes
        && host_dev != Some(stat.st_dev)
}

/// The descriptors the forked child passes bubblewrap, each moved to its
/// number there (at most three: a payload's gate and the handoff pipes).
#[derive(Clone, Copy)]
pub(super) struct Passed {
    fds: [(RawFd, RawFd); 3],
    len: usize,
}

impl Passed {
    pub(super) fn new(placed: &[(RawFd, RawFd)]) -> Passed {
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
pub(super) fn pass_handoff(passed: Passed) -> std::io::Result<()> {
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
pub(super) fn enter_cgroup(fds: &[RawFd]) -> std::io::Result<()> {
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
