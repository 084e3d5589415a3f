//! The execution envelope as the doors meet it: chosen from the host's
//! `[containment]`, kept between Runs by a daemon, probed beside a `jig
//! run`'s package verification, and described for `jig doctor`. The engine
//! owns the sandbox; a door holds an [`Envelope`] and never names
//! `jig_sandbox`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use jig_sandbox::{Containment, Limits, Sandbox};

use crate::error::Error;

/// The envelope every Run of this process is made in.
#[derive(Clone)]
pub struct Envelope {
    sandbox: Arc<dyn Sandbox>,
    /// The bound of each private writable space of a Flow
    /// (`[containment] scratch-size`).
    scratch_bytes: u64,
}

impl Envelope {
    /// The envelope `[containment]` selects, or why there is none
    /// (`UNAVAILABLE`, naming everything that is missing).
    pub fn select(containment: &Containment) -> Result<Envelope, Error> {
        Ok(Envelope {
            sandbox: jig_sandbox::select(containment)?,
            scratch_bytes: containment.scratch_bytes(),
        })
    }

    /// A daemon's envelope (`jig serve`, `jig worker`): its parent cgroup is
    /// made once, not again for every Run, and the first Run's own group
    /// before any Run arrives.
    pub fn for_daemon(containment: &Containment) -> Result<Envelope, Error> {
        let envelope = Envelope::select(containment)?;
        envelope.sandbox.keep_between_runs(true);
        envelope.sandbox.prepare(Limits::FLOW);
        Ok(envelope)
    }

    /// After a daemon's Run answered: what its verification learned (a
    /// runtime hashed for the first time or after it changed) is kept for
    /// the next process (nothing is written when nothing was learned), and
    /// the next Run's group is made now, not on its way. Blocking.
    pub fn ready_next(&self) {
        jig_verify::current().persist();
        self.sandbox.prepare(Limits::FLOW);
    }

    /// Release what a daemon kept between Runs, once its Runs are done.
    pub fn release(&self) {
        self.sandbox.keep_between_runs(false);
    }

    pub(crate) fn sandbox(&self) -> &Arc<dyn Sandbox> {
        &self.sandbox
    }

    pub(crate) fn scratch_bytes(&self) -> u64 {
        self.scratch_bytes
    }
}

/// The envelope being probed on a thread of its own (containment tools
/// verified, cgroups found, stale ones swept) while `jig run` reads and
/// verifies the package. A Run refused before it takes the envelope still
/// joins the thread when this is dropped, so what the probe made ahead
/// (the cgroups of a process root) is removed before the command ends.
pub struct Probing(Option<std::thread::JoinHandle<Result<Envelope, Error>>>);

/// Start probing the envelope `containment` selects; for a root that runs
/// as a process, its cgroups are made there too.
pub fn probe(containment: &Containment, process: bool) -> Probing {
    let containment = containment.clone();
    Probing(Some(std::thread::spawn(move || {
        let envelope = Envelope::select(&containment)?;
        if process {
            envelope.sandbox.prepare(Limits::FLOW);
        }
        Ok(envelope)
    })))
}

impl Probing {
    /// The probed envelope, or why there is none.
    pub fn join(mut self) -> Result<Envelope, Error> {
        let thread = self.0.take().expect("joined once");
        thread.join().unwrap_or_else(|_| {
            Err(jig_sandbox::Error::Unavailable("probing the envelope failed".into()).into())
        })
    }
}

impl Drop for Probing {
    fn drop(&mut self) {
        if let Some(thread) = self.0.take() {
            let _ = thread.join();
        }
    }
}

/// What this host offers for containment, as `jig doctor` reports it.
pub struct Report {
    /// The envelope in use, in words, or why there is none.
    pub envelope: Result<String, String>,
    /// Bubblewrap: where, and its version line.
    pub bwrap: Result<(PathBuf, String), String>,
    /// The oldest bubblewrap this host runs with, and the one the
    /// reference host asks for.
    pub bwrap_min: String,
    pub bwrap_reference: String,
    pub user_namespaces: Result<(), String>,
    /// `v2` or `v1` with the controllers found, or `None`: no cgroup.
    pub cgroup: Option<(&'static str, Vec<String>)>,
}

/// Probe the containment `[containment]` asks for, running nothing.
pub fn report(containment: &Containment) -> Report {
    let probe = jig_sandbox::Probe::run(containment.bwrap.as_deref());
    Report {
        envelope: jig_sandbox::describe(containment).map_err(|e| e.to_string()),
        bwrap: probe.bwrap,
        bwrap_min: jig_sandbox::version_text(jig_sandbox::BWRAP_MIN_VERSION),
        bwrap_reference: jig_sandbox::version_text(jig_sandbox::BWRAP_REFERENCE_VERSION),
        user_namespaces: probe.user_namespaces,
        cgroup: match probe.cgroup {
            jig_sandbox::Cgroup::V2 { controllers } => Some(("v2", controllers)),
            jig_sandbox::Cgroup::V1 { controllers } => Some(("v1", controllers)),
            jig_sandbox::Cgroup::None => None,
        },
    }
}

/// Prove the runtime view of the runtime `name` at `path` the way a Run
/// does (reusing a kept proof, keeping none).
pub fn runtime_view(name: &str, path: &Path) -> Result<(), String> {
    use jig_sandbox::closure::{self, Stdlib};
    let digest = jig_verify::current()
        .digest(path)
        .map_err(|e| format!("{} cannot be read: {e}", path.display()))?;
    let stdlib = if name == "python3" {
        Stdlib::Python
    } else {
        Stdlib::None
    };
    closure::runtime(path, &digest, stdlib)
        .map(drop)
        .map_err(|why| {
            format!(
                "{}: its runtime view cannot be proved ({why}); a Run of it fails \
             UNAVAILABLE (RUNTIME_VIEW_UNPROVABLE)",
                path.display()
            )
        })
}
