//! The execution envelope for process recipes. Everything that starts
//! package code goes through [`Sandbox::spawn`], so the envelope has one
//! narrow door: what the process sees is exactly what [`Launch`] grants.
//!
//! This first envelope gives a cleared environment, a private working
//! directory (the Run's scratch), its own process group killed as a whole,
//! and no inherited descriptors beyond the three protocol/diagnostic pipes.
//! Namespaces, cgroup limits and bubblewrap come with the containment work;
//! `jig doctor` must say which envelope is in use.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;

/// What one contained process is granted.
#[derive(Debug, Clone)]
pub struct Launch {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub env: Vec<(String, String)>,
    /// The working directory: the Run's private scratch.
    pub cwd: PathBuf,
}

pub struct Contained {
    pub child: tokio::process::Child,
    pgid: Option<i32>,
}

impl Contained {
    /// Kill the whole process group, then reap the leader.
    pub async fn kill(&mut self) {
        if let Some(pgid) = self.pgid {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pgid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = self.child.kill().await;
    }

    /// After the leader exited, remove anything it left in its group.
    pub fn reap_group(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pgid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

impl Drop for Contained {
    fn drop(&mut self) {
        self.reap_group();
    }
}

pub trait Sandbox: Send + Sync {
    fn name(&self) -> &'static str;
    fn spawn(&self, launch: &Launch) -> std::io::Result<Contained>;
}

/// The process-group envelope.
pub struct ProcessGroup;

impl Sandbox for ProcessGroup {
    fn name(&self) -> &'static str {
        "process-group"
    }

    fn spawn(&self, launch: &Launch) -> std::io::Result<Contained> {
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
        let child = command.spawn()?;
        let pgid = child.id().map(|id| id as i32);
        Ok(Contained { child, pgid })
    }
}
