//! A [`Syscall`] for unit tests: it records every call in order and
//! answers from an in-memory tree the test scripts, so a test can say
//! "cgroup.procs holds 12, then nothing", "rmdir answers EBUSY twice" or
//! "a directory made under this base holds memory.max and pids.max", and
//! then check what the cgroup code wrote, read, removed and signalled.
//!
//! The tree follows cgroupfs where the cgroup code depends on it: `mkdir`
//! needs the parent and refuses an existing name, a file exists only while
//! its directory does, a write never creates a file, and `rmdir` of a
//! directory that still has a child directory is `EBUSY`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use nix::errno::Errno;
use nix::sys::signal::Signal;

use super::Syscall;

/// One call, as the cgroup code made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    CreateDir(PathBuf),
    RemoveDir(PathBuf),
    Read(PathBuf),
    Write(PathBuf, String),
    Subdirs(PathBuf),
    Exists(PathBuf),
    Kill(i32, Signal),
}

/// The calls a test can make fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    CreateDir,
    RemoveDir,
    Read,
    Write,
    Subdirs,
}

#[derive(Debug, Default)]
pub struct Recording {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    calls: Vec<Call>,
    dirs: BTreeSet<PathBuf>,
    files: BTreeMap<PathBuf, Content>,
    /// (base, files): a directory made anywhere below `base` holds `files`,
    /// as a new cgroup holds its controllers' files.
    made_with: Vec<(PathBuf, Vec<String>)>,
    failures: Vec<Failure>,
}

#[derive(Debug)]
struct Content {
    /// What the next reads return; the last answer stays.
    answers: VecDeque<String>,
    /// Scripted by the test: writes do not change what reads return.
    scripted: bool,
}

#[derive(Debug)]
struct Failure {
    op: Op,
    path: PathBuf,
    errno: Errno,
    /// How many more times; `None` for always.
    left: Option<usize>,
}

impl Recording {
    pub fn new() -> Recording {
        Recording::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A directory, with its ancestors.
    pub fn dir(&self, path: impl AsRef<Path>) -> &Recording {
        let mut state = self.state();
        for dir in path.as_ref().ancestors() {
            state.dirs.insert(dir.to_path_buf());
        }
        self
    }

    /// A file holding `text` until something is written into it. Like
    /// every file, it exists only while its directory does.
    pub fn file(&self, path: impl AsRef<Path>, text: &str) -> &Recording {
        self.state().files.insert(
            path.as_ref().to_path_buf(),
            Content {
                answers: VecDeque::from([text.to_string()]),
                scripted: false,
            },
        );
        self
    }

    /// A file whose successive reads return `answers` (the last one
    /// stays), whatever is written into it.
    pub fn reads(&self, path: impl AsRef<Path>, answers: &[&str]) -> &Recording {
        assert!(!answers.is_empty(), "a scripted file needs an answer");
        self.state().files.insert(
            path.as_ref().to_path_buf(),
            Content {
                answers: answers.iter().map(|a| a.to_string()).collect(),
                scripted: true,
            },
        );
        self
    }

    /// Directories made below `base` hold `files` (empty, unless scripted).
    pub fn makes(&self, base: impl AsRef<Path>, files: &[&str]) -> &Recording {
        self.state().made_with.push((
            base.as_ref().to_path_buf(),
            files.iter().map(|f| f.to_string()).collect(),
        ));
        self
    }

    /// `op` on `path` fails with `errno` every time.
    pub fn fails(&self, op: Op, path: impl AsRef<Path>, errno: Errno) -> &Recording {
        self.fail(op, path.as_ref(), errno, None)
    }

    /// `op` on `path` fails with `errno` the next `times` times.
    pub fn fails_times(
        &self,
        op: Op,
        path: impl AsRef<Path>,
        errno: Errno,
        times: usize,
    ) -> &Recording {
        self.fail(op, path.as_ref(), errno, Some(times))
    }

    fn fail(&self, op: Op, path: &Path, errno: Errno, left: Option<usize>) -> &Recording {
        self.state().failures.push(Failure {
            op,
            path: path.to_path_buf(),
            errno,
            left,
        });
        self
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.state().calls.clone()
    }

    /// The writes attempted into files directly inside `dir`, in order, as
    /// (file name, value).
    pub fn writes_in(&self, dir: impl AsRef<Path>) -> Vec<(String, String)> {
        let dir = dir.as_ref();
        self.calls()
            .into_iter()
            .filter_map(|call| match call {
                Call::Write(path, value) if path.parent() == Some(dir) => {
                    let name = path.file_name()?.to_string_lossy().into_owned();
                    Some((name, value))
                }
                _ => None,
            })
            .collect()
    }

    /// Is the directory `dir` there now?
    pub fn has_dir(&self, dir: impl AsRef<Path>) -> bool {
        self.state().dirs.contains(dir.as_ref())
    }
}

impl State {
    fn record(&mut self, call: Call) {
        self.calls.push(call);
    }

    /// The scripted failure for `op` on `path`, used up once.
    fn failure(&mut self, op: Op, path: &Path) -> io::Result<()> {
        let Some(failure) = self
            .failures
            .iter_mut()
            .find(|f| f.op == op && f.path == path && f.left != Some(0))
        else {
            return Ok(());
        };
        if let Some(left) = &mut failure.left {
            *left -= 1;
        }
        Err(failure.errno.into())
    }

    fn is_file(&self, path: &Path) -> bool {
        self.files.contains_key(path) && path.parent().is_some_and(|p| self.dirs.contains(p))
    }
}

impl Syscall for Recording {
    fn create_dir(&self, dir: &Path) -> io::Result<()> {
        let mut state = self.state();
        state.record(Call::CreateDir(dir.to_path_buf()));
        state.failure(Op::CreateDir, dir)?;
        if state.dirs.contains(dir) || state.is_file(dir) {
            return Err(Errno::EEXIST.into());
        }
        if !dir.parent().is_some_and(|p| state.dirs.contains(p)) {
            return Err(Errno::ENOENT.into());
        }
        state.dirs.insert(dir.to_path_buf());
        let made: Vec<String> = state
            .made_with
            .iter()
            .filter(|(base, _)| dir.starts_with(base) && dir != base)
            .flat_map(|(_, files)| files.clone())
            .collect();
        for file in made {
            state
                .files
                .entry(dir.join(file))
                .or_insert_with(|| Content {
                    answers: VecDeque::from([String::new()]),
                    scripted: false,
                });
        }
        Ok(())
    }

    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        let mut state = self.state();
        state.record(Call::RemoveDir(dir.to_path_buf()));
        state.failure(Op::RemoveDir, dir)?;
        if state.is_file(dir) {
            return Err(Errno::ENOTDIR.into());
        }
        if !state.dirs.contains(dir) {
            return Err(Errno::ENOENT.into());
        }
        if state.dirs.iter().any(|d| d.parent() == Some(dir)) {
            return Err(Errno::EBUSY.into());
        }
        state.dirs.remove(dir);
        Ok(())
    }

    fn read(&self, file: &Path) -> io::Result<String> {
        let mut state = self.state();
        state.record(Call::Read(file.to_path_buf()));
        state.failure(Op::Read, file)?;
        if state.dirs.contains(file) {
            return Err(Errno::EISDIR.into());
        }
        if !state.is_file(file) {
            return Err(Errno::ENOENT.into());
        }
        let content = state.files.get_mut(file).expect("checked above");
        let answer = if content.answers.len() > 1 {
            content.answers.pop_front()
        } else {
            content.answers.front().cloned()
        };
        Ok(answer.unwrap_or_default())
    }

    fn write(&self, file: &Path, value: &str) -> io::Result<()> {
        let mut state = self.state();
        state.record(Call::Write(file.to_path_buf(), value.to_string()));
        state.failure(Op::Write, file)?;
        if state.dirs.contains(file) {
            return Err(Errno::EISDIR.into());
        }
        if !state.is_file(file) {
            return Err(Errno::ENOENT.into());
        }
        let content = state.files.get_mut(file).expect("checked above");
        if !content.scripted {
            content.answers = VecDeque::from([value.to_string()]);
        }
        Ok(())
    }

    fn subdirs(&self, dir: &Path) -> io::Result<Vec<OsString>> {
        let mut state = self.state();
        state.record(Call::Subdirs(dir.to_path_buf()));
        state.failure(Op::Subdirs, dir)?;
        if !state.dirs.contains(dir) {
            return Err(Errno::ENOENT.into());
        }
        Ok(state
            .dirs
            .iter()
            .filter(|d| d.parent() == Some(dir))
            .filter_map(|d| d.file_name().map(|n| n.to_os_string()))
            .collect())
    }

    fn exists(&self, path: &Path) -> bool {
        let mut state = self.state();
        state.record(Call::Exists(path.to_path_buf()));
        state.dirs.contains(path) || state.is_file(path)
    }

    fn kill(&self, pid: i32, signal: Signal) -> io::Result<()> {
        self.state().record(Call::Kill(pid, signal));
        Ok(())
    }
}
