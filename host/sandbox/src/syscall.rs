//! The system calls the cgroup layer makes, behind one narrow trait, so
//! that unit tests can give the cgroup logic another implementation than
//! the real one ([`Linux`]) and run without privileges, while the tests
//! that need a real hierarchy run the real thing.
//!
//! The trait holds exactly what the cgroup code needs; it must not grow
//! into a general filesystem.

use std::ffi::OsString;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;

use nix::sys::signal::Signal;

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
