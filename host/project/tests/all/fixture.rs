//! A scratch project directory and small helpers to fill it.

use std::fs;
use std::path::PathBuf;

use jig_project::{capture, Declarations, ProjectError};

pub struct Project {
    _tmp: tempfile::TempDir,
    pub root: PathBuf,
}

impl Project {
    /// An empty project directory with the given `jig.ts`.
    pub fn with_jig(jig_ts: &str) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("project");
        fs::create_dir(&root).unwrap();
        let p = Project { _tmp: tmp, root };
        p.write("jig.ts", jig_ts);
        p
    }

    /// A project made by `jig init` (greeting unless `bare`).
    pub fn init(bare: bool) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("project");
        let template = if bare {
            jig_project::Template::Bare
        } else {
            jig_project::Template::Python
        };
        jig_project::init(&root, template).unwrap();
        Project { _tmp: tmp, root }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    pub fn write(&self, rel: &str, text: &str) {
        let path = self.path(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    /// A Flow directory with a minimal FLOW.md.
    pub fn flow(&self, rel: &str) {
        let name = rel.rsplit('/').next().unwrap().to_lowercase();
        self.write(
            &format!("{rel}/FLOW.md"),
            &format!("---\nname: {name}\ndescription: A test Flow.\n---\n"),
        );
    }

    pub fn mkdir(&self, rel: &str) {
        fs::create_dir_all(self.path(rel)).unwrap();
    }

    pub fn symlink(&self, target: &str, rel: &str) {
        let path = self.path(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, path).unwrap();
    }

    pub fn capture(&self) -> Result<Declarations, ProjectError> {
        capture(&self.root)
    }

    /// Captures and expects failure; returns the error.
    pub fn refused(&self) -> ProjectError {
        match self.capture() {
            Ok(d) => panic!("capture unexpectedly succeeded: {d:?}"),
            Err(e) => e,
        }
    }
}

/// `(code, path, pointer)` of an error, for compact assertions.
pub fn located(e: &ProjectError) -> (&'static str, Option<&str>, Option<&str>) {
    (e.code.as_str(), e.path.as_deref(), e.pointer.as_deref())
}

/// A `jig.ts` selecting flows and bindings by discovery of the conventional roots.
pub const CONVENTIONAL: &str = jig_project::JIG_TS;
