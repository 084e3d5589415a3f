//! The system calls the cgroup layer makes, behind one narrow trait: the
//! real one ([`Linux`]) that the host uses, and, in unit tests, a
//! recording one (`recording::Recording`) that answers from a scripted
//! tree. The cgroup logic is thus tested without privileges, and the tests
//! that need a real hierarchy run the real thing.
//!
//! The trait holds exactly what the cgroup code needs; it must not grow
//! into a general filesystem.

use std::ffi::OsString;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;

use nix::sys::signal::Signal;

#[cfg(test)]
pub mod recording;

/// What the cgroup code asks of the kernel.
pub trait Syscall: std::fmt::Debug + Send + Sync {
    /// mkdir(2): make `dir`, never its parents.
    fn create_dir(&self, dir: &Path) -> io::Result<()>;
    /// rmdir(2).
    fn remove_dir(&self, dir: &Path) -> io::Result<()>;
    /// A whole control file, as text.
    fn read(&self, file: &Path) -> io::Result<String>;
    /// Write `value` into an existing control file (never creates it).
    fn write(&self, file: &Path, value: &str) -> io::Result<()>;
    /// The names of the directories directly inside `dir`.
    fn subdirs(&self, dir: &Path) -> io::Result<Vec<OsString>>;
    /// Is there anything at `path`?
    fn exists(&self, path: &Path) -> bool;
    /// kill(2).
    fn kill(&self, pid: i32, signal: Signal) -> io::Result<()>;
}

/// The kernel itself.
#[derive(Debug, Clone, Copy, Default)]
pub struct Linux;

/// The real system calls, as the hierarchy holds them.
pub fn real() -> Arc<dyn Syscall> {
    Arc::new(Linux)
}

impl Syscall for Linux {
    fn create_dir(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir(dir)
    }

    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        std::fs::remove_dir(dir)
    }

    fn read(&self, file: &Path) -> io::Result<String> {
        std::fs::read_to_string(file)
    }

    fn write(&self, file: &Path, value: &str) -> io::Result<()> {
        std::fs::OpenOptions::new()
            .write(true)
            .open(file)
            .and_then(|mut f| f.write_all(value.as_bytes()))
    }

    fn subdirs(&self, dir: &Path) -> io::Result<Vec<OsString>> {
        Ok(std::fs::read_dir(dir)?
            .flatten()
            .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
            .map(|e| e.file_name())
            .collect())
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn kill(&self, pid: i32, signal: Signal) -> io::Result<()> {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal).map_err(io::Error::from)
    }
}

#[cfg(test)]
mod tests {
    use super::recording::Recording;
    use super::*;

    fn outcome<T: std::fmt::Debug>(result: io::Result<T>) -> String {
        match result {
            Ok(value) => format!("ok {value:?}"),
            Err(e) => format!("errno {:?}", e.raw_os_error()),
        }
    }

    /// The same calls on the same tree, in a temporary directory and in the
    /// recording, give the same answers wherever the cgroup code looks at
    /// them. (One known difference: `rmdir` of a directory with a child is
    /// `ENOTEMPTY` on an ordinary filesystem; the recording answers `EBUSY`
    /// as cgroupfs does.)
    #[test]
    fn the_recording_answers_as_the_kernel_does() {
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path();
        let group = root.join("group");
        std::fs::create_dir(&group).unwrap();
        std::fs::write(group.join("pids.max"), "max\n").unwrap();
        let recording = Recording::new();
        recording.dir(&group).file(group.join("pids.max"), "max\n");
        let answers = |sys: &dyn Syscall| -> Vec<String> {
            vec![
                outcome(sys.create_dir(&group)),
                outcome(sys.create_dir(&root.join("absent/child"))),
                outcome(sys.create_dir(&group.join("child"))),
                outcome(sys.read(&group.join("pids.max"))),
                outcome(sys.write(&group.join("pids.max"), "64")),
                outcome(sys.write(&group.join("absent"), "1")),
                sys.exists(&group.join("absent")).to_string(),
                outcome(sys.read(&group)),
                outcome(sys.read(&group.join("absent"))),
                outcome(sys.subdirs(root)),
                outcome(sys.subdirs(&group)),
                outcome(sys.subdirs(&root.join("absent"))),
                outcome(sys.remove_dir(&group.join("pids.max"))),
                outcome(sys.remove_dir(&group.join("child"))),
                outcome(sys.remove_dir(&group.join("child"))),
                sys.exists(&group).to_string(),
            ]
        };
        let kernel = answers(&Linux);
        assert_eq!(answers(&recording), kernel);
        assert_eq!(kernel[0], "errno Some(17)", "EEXIST");
        assert_eq!(kernel[10], "ok [\"child\"]", "directories only");
        assert_eq!(recording.calls().len(), kernel.len());
    }
}
