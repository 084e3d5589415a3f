//! What the admitted sources looked like on disk, so that `jig run` can
//! say when the live source of what it runs differs from the admitted
//! bytes (it still runs the admitted bytes; nothing here decides what
//! runs).
//!
//! Review records, for the generation it admits (or finds unchanged), each
//! captured file's metadata (size, inode, modification and change times)
//! and digest: the author modules of `jig.ts`, and every file of every
//! selected Flow. A Run compares the files of what it uses, its target's
//! packages and the modules, by metadata first, as the verification cache
//! does; only a file whose metadata moved is read and hashed, so a file
//! touched but not changed is not reported. A file added to a package
//! directory, or removed from it, is a change.
//!
//! The record is advisory: kept in `.jig/admission/sources.json`, written
//! without a sync, and ignored when it is missing, unreadable or of
//! another generation.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use flow::digest::sha256_digest;

/// What one file was when its bytes were captured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seen {
    size: u64,
    ino: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    sha256: String,
}

impl Seen {
    /// `bytes` as captured from `path`; `None` when `path` cannot be read
    /// or no longer has their size (changed since: it is reported).
    fn of(path: &Path, bytes: &[u8]) -> Option<Seen> {
        let meta = std::fs::symlink_metadata(path).ok()?;
        (meta.len() == bytes.len() as u64).then(|| Seen {
            size: meta.len(),
            ino: meta.ino(),
            mtime_ns: nanos(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: nanos(meta.ctime(), meta.ctime_nsec()),
            sha256: sha256_digest(bytes),
        })
    }

    /// Whether the file at `path` still holds these bytes: by metadata,
    /// or, where it moved, by digest.
    fn holds(&self, path: &Path) -> bool {
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            return false;
        };
        if !meta.is_file() || meta.len() != self.size {
            return false;
        }
        let same = meta.ino() == self.ino
            && nanos(meta.mtime(), meta.mtime_nsec()) == self.mtime_ns
            && nanos(meta.ctime(), meta.ctime_nsec()) == self.ctime_ns;
        same || std::fs::read(path).is_ok_and(|bytes| sha256_digest(&bytes) == self.sha256)
    }
}

fn nanos(seconds: i64, nanoseconds: i64) -> i128 {
    i128::from(seconds) * 1_000_000_000 + i128::from(nanoseconds)
}

/// The captured sources of one admitted generation, by project path.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sources {
    generation: u64,
    /// The author modules (`jig.ts`, Bindings, what they import).
    modules: BTreeMap<String, Seen>,
    /// Each selected Flow directory: its files, by path inside it.
    packages: BTreeMap<String, BTreeMap<String, Seen>>,
    /// Each Binding: the Flow directories its Run uses (its package and
    /// its slots' targets).
    bindings: BTreeMap<String, Vec<String>>,
}

impl Sources {
    /// What the candidate captured under `root` was: its module bytes and
    /// its packages' files, and what each Binding uses.
    pub fn seen(root: &Path, candidate: &crate::plan::Candidate) -> Sources {
        let declarations = &candidate.declarations;
        let modules = declarations
            .sources
            .iter()
            .filter_map(|(path, bytes)| Some((path.clone(), Seen::of(&root.join(path), bytes)?)))
            .collect();
        let packages = candidate
            .packages
            .iter()
            .map(|(dir, package)| {
                let files = package
                    .files()
                    .iter()
                    .filter_map(|(path, bytes)| {
                        Some((path.clone(), Seen::of(&root.join(dir).join(path), bytes)?))
                    })
                    .collect();
                (dir.clone(), files)
            })
            .collect();
        let bindings = declarations
            .bindings
            .iter()
            .map(|(id, binding)| {
                let mut uses = vec![binding.package.clone()];
                for slot in binding.slots.values() {
                    match slot {
                        jig_project::SlotTarget::Flow(path) => uses.push(path.clone()),
                        jig_project::SlotTarget::Binding(other) => {
                            if let Some(b) = declarations.bindings.get(other) {
                                uses.push(b.package.clone());
                            }
                        }
                    }
                }
                (id.clone(), uses)
            })
            .collect();
        Sources {
            generation: 0,
            modules,
            packages,
            bindings,
        }
    }

    /// These sources as those of admitted generation `generation`.
    pub(crate) fn of_generation(mut self, generation: u64) -> Sources {
        self.generation = generation;
        self
    }

    /// The project paths (a file, or a Flow directory's file) of what a
    /// Run of `target` uses whose live source under `root` differs from
    /// what was admitted: changed, added or removed; sorted.
    pub fn changed(&self, root: &Path, target: &crate::exec::TargetRef) -> Vec<String> {
        let dirs: Vec<&String> = match target {
            crate::exec::TargetRef::Flow(path) => self
                .packages
                .get_key_value(path)
                .map(|(k, _)| k)
                .into_iter()
                .collect(),
            crate::exec::TargetRef::Binding(id) => {
                self.bindings.get(id).into_iter().flatten().collect()
            }
        };
        self.changed_in(root, dirs)
    }

    /// As [`Sources::changed`], for every admitted Flow of the project
    /// (what the console's banner says).
    pub fn changed_anywhere(&self, root: &Path) -> Vec<String> {
        self.changed_in(root, self.packages.keys().collect())
    }

    fn changed_in(&self, root: &Path, dirs: Vec<&String>) -> Vec<String> {
        let mut changed = BTreeSet::new();
        for (path, seen) in &self.modules {
            if !seen.holds(&root.join(path)) {
                changed.insert(path.clone());
            }
        }
        for dir in dirs {
            let Some(files) = self.packages.get(dir) else {
                continue;
            };
            for (path, seen) in files {
                if !seen.holds(&root.join(dir).join(path)) {
                    changed.insert(format!("{dir}/{path}"));
                }
            }
            for path in listed(&root.join(dir)) {
                if !files.contains_key(&path) {
                    changed.insert(format!("{dir}/{path}"));
                }
            }
        }
        changed.into_iter().collect()
    }
}

/// The files below `dir` as staging takes them (its `node_modules` left
/// out), by path inside it; unreadable directories list nothing.
fn listed(dir: &Path) -> Vec<String> {
    let mut files = Vec::new();
    let mut pending = vec![String::new()];
    while let Some(prefix) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(dir.join(&prefix)) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = match prefix.is_empty() {
                true => name,
                false => format!("{prefix}/{name}"),
            };
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => {
                    if path != "node_modules" {
                        pending.push(path);
                    }
                }
                Ok(_) => files.push(path),
                Err(_) => {}
            }
        }
    }
    files
}

impl super::ProjectState {
    fn sources_path(&self) -> std::path::PathBuf {
        self.dir.join("admission").join("sources.json")
    }

    /// Keep `sources` as what the admitted generation's sources were
    /// (advisory: a failure to write it only loses the notice).
    pub(crate) fn keep_sources(&self, sources: &Sources) {
        if let Ok(bytes) = serde_json::to_vec(sources) {
            let _ = super::write_unsynced(&self.sources_path(), &bytes);
        }
    }

    /// The admitted generation's sources, when they were kept for it.
    pub fn admitted_sources(&self) -> Option<Sources> {
        let bytes = std::fs::read(self.sources_path()).ok()?;
        let sources: Sources = serde_json::from_slice(&bytes).ok()?;
        let (number, _) = self.admitted().ok().flatten()?;
        (sources.generation == number).then_some(sources)
    }
}
