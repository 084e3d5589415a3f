//! What a worker's cache keeps, and the collection of the rest.
//!
//! The cache (`--cache DIR`, [`Cache`]) is only a copy of what the
//! database holds, fetched and verified by digest. A worker collects it at
//! start and every `--cache-interval` (default [`CACHE_INTERVAL`]). Kept:
//! - what a Run this worker executes uses: the generation it runs (its
//!   Plan, packages, layouts, provider files) and its work root;
//! - what the database's current generations name: each project's newest
//!   published generation and every generation a queued, claimed or
//!   running Run names ([`Queue::current_generations`]).
//!
//! Names decide, not an idle time: a generation that is not its project's
//! newest and that no waiting Run names is never claimed again, so the
//! cache holds at most each project's newest generation and those of the
//! Runs still to run. Everything else goes: the Plans, packages (with their shared trees),
//! blobs and provider files of older generations, the work roots of Runs
//! not executing here (a crashed worker's leftovers), and the bundled SDK
//! trees of other jig builds idle past their grace
//! ([`jig_engine::exec::sdk::collect_support`]). A Run that wants a removed entry
//! again fetches it again and verifies it by digest, as on a first use.
//!
//! A claim cannot start using an entry while it is being removed, nor
//! write one while a collection lists the cache: the collection holds the
//! worker's cache gate whole from reading the Runs in flight to its last
//! removal, and a Run shares the gate from joining the in-flight set until
//! its generation is whole in the cache (a collection that listed the
//! cache while a package was half written would see blobs no manifest
//! names yet, and remove those the new package shares with an older one). Each removal is one unlink or one
//! rename aside (a package's manifest first, a work root or shared tree
//! renamed aside before its files go), so a crash leaves only entries a
//! later fetch verifies or makes again, and what was renamed aside, which
//! the next collection removes.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;
use std::time::Duration;

use flow::digest::sha256_digest;
use serde_json::Value;

use super::blobs::{plan_layouts, Cache};
use super::Queue;
use crate::Error;
use jig_engine::state::digest_hex;
use jig_engine::state::retention::REMOVING_PREFIX;

/// How often a worker collects its cache when `--cache-interval` is not
/// given.
pub const CACHE_INTERVAL: Duration = Duration::from_secs(10 * 60);
/// A temporary file of an unfinished write (`.` first) is removed once
/// this old: a write in progress is younger.
const TEMPORARY_GRACE: Duration = Duration::from_secs(3600);

/// One published generation the cache keeps, as the database has it.
#[derive(Debug, Clone)]
pub struct Published {
    pub project: String,
    pub generation: i64,
    pub plan_digest: String,
    /// Package digest to manifest blob digest.
    pub packages: BTreeMap<String, String>,
    /// The published providers (JSON text), each naming a file blob.
    pub providers: Option<String>,
}

impl Queue {
    /// The published generations a worker's cache keeps: each project's
    /// newest, every one a queued, claimed or running Run names, and the
    /// `executing` ones (project, generation) of this worker's own Runs.
    pub async fn current_generations(
        &self,
        executing: &[(String, i64)],
    ) -> Result<Vec<Published>, Error> {
        let (projects, numbers): (Vec<String>, Vec<i64>) = executing.iter().cloned().unzip();
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT g.project, g.generation, g.plan_digest, g.packages, g.providers
                 FROM jig_generations g
                 WHERE g.generation = (SELECT max(m.generation) FROM jig_generations m
                                       WHERE m.project = g.project)
                    OR EXISTS (SELECT 1 FROM jig_runs r
                               WHERE r.project = g.project AND r.generation = g.generation
                                 AND r.status IN ('queued', 'claimed', 'running'))
                    OR (g.project, g.generation) IN
                       (SELECT * FROM unnest($1::text[], $2::bigint[]))",
                &[&projects, &numbers],
            )
            .await
            .map_err(Error::db("reading the current generations"))?;
        rows.iter()
            .map(|row| {
                let packages: String = row.get(3);
                Ok(Published {
                    project: row.get(0),
                    generation: row.get(1),
                    plan_digest: row.get(2),
                    packages: serde_json::from_str(&packages)
                        .map_err(|e| Error::BlobMismatch(format!("generation manifest: {e}")))?,
                    providers: row.get(4),
                })
            })
            .collect()
    }
}

/// What a cache collection removed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CacheCollected {
    pub plans: usize,
    /// Package digests.
    pub packages: Vec<String>,
    pub blobs: usize,
    pub providers: usize,
    /// The bundled SDK trees (`python-…`).
    pub sdk_trees: Vec<String>,
    /// The Run IDs whose work roots went.
    pub work_roots: Vec<String>,
    pub freed_bytes: u64,
}

impl CacheCollected {
    pub fn is_empty(&self) -> bool {
        self == &CacheCollected::default()
    }
}

/// What the cache keeps: Plan, package and layout, and provider file
/// digests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Kept {
    pub plans: BTreeSet<String>,
    /// Packages and layouts (what the cache's store holds by digest).
    pub store: BTreeSet<String>,
    pub providers: BTreeSet<String>,
}

impl Kept {
    /// What `generations` name; `plan` reads a cached Plan by digest (a
    /// Plan not cached names no layout here: none of its layouts was
    /// fetched for it).
    pub fn of(generations: &[Published], plan: impl Fn(&str) -> Option<Value>) -> Kept {
        let mut kept = Kept::default();
        for generation in generations {
            kept.plans.insert(generation.plan_digest.clone());
            kept.store.extend(generation.packages.keys().cloned());
            if let Some(plan) = plan(&generation.plan_digest) {
                kept.store.extend(plan_layouts(&plan));
            }
            let providers: serde_json::Map<String, Value> = generation
                .providers
                .as_deref()
                .and_then(|p| serde_json::from_str(p).ok())
                .unwrap_or_default();
            kept.providers.extend(
                providers
                    .values()
                    .filter_map(|p| p["blob"].as_str().map(str::to_string)),
            );
        }
        kept
    }
}

impl Cache {
    /// The cached Plan of `digest`, verified by it.
    pub fn cached_plan(&self, digest: &str) -> Option<Value> {
        let bytes = std::fs::read(self.root().join("plans").join(digest_hex(digest))).ok()?;
        (sha256_digest(&bytes) == digest)
            .then(|| flow::json::parse(&bytes).ok())
            .flatten()
    }

    /// Remove what `kept` does not name, and the work roots of every Run
    /// not in `executing` (Run IDs). The caller holds the worker's cache
    /// gate, so no Run starts using an entry meanwhile.
    pub fn collect(
        &self,
        kept: &Kept,
        executing: &HashSet<String>,
    ) -> Result<CacheCollected, Error> {
        let io = |what: &'static str| {
            move |e: std::io::Error| Error::Internal(format!("worker cache: {what}: {e}"))
        };
        let tree_bytes = jig_engine::state::retention::tree_bytes;
        let mut collected = CacheCollected::default();
        // Plans and provider files: one unlink each; a later read checks
        // the bytes against the digest and fetches again when they are not
        // there.
        let kept_plans: HashSet<String> = kept
            .plans
            .iter()
            .map(|d| digest_hex(d).to_string())
            .collect();
        let kept_providers: HashSet<String> = kept
            .providers
            .iter()
            .map(|d| digest_hex(d).to_string())
            .collect();
        for (dir, keep, count) in [
            ("plans", &kept_plans, &mut collected.plans),
            ("providers", &kept_providers, &mut collected.providers),
        ] {
            for (name, path) in entries(&self.root().join(dir)) {
                let unfinished = name.starts_with('.');
                if (unfinished && !older_than(&path, TEMPORARY_GRACE))
                    || (!unfinished && keep.contains(&name))
                {
                    continue;
                }
                collected.freed_bytes += tree_bytes(&path);
                jig_engine::files::remove_tree(&path).map_err(io("removing a cached file"))?;
                if !unfinished {
                    *count += 1;
                }
            }
        }
        // The store: packages (manifest first, then the shared tree renamed
        // aside), then blobs no kept package names.
        let store = self.store();
        let unnamed = store.collect(&kept.store, false).map_err(Error::from)?;
        collected.packages = unnamed.packages;
        collected.blobs = unnamed.blobs;
        collected.freed_bytes += unnamed.freed_bytes;
        let sdk = jig_engine::exec::sdk::collect_support(&store, false).map_err(Error::from)?;
        collected.sdk_trees = sdk.trees;
        collected.freed_bytes += sdk.freed_bytes;
        // Work roots of Runs not executing here: renamed aside, then
        // removed, so no half-removed root is ever under a Run's ID.
        let runs = self.root().join("runs");
        for (name, path) in entries(&runs) {
            if executing.contains(&name) {
                continue;
            }
            collected.freed_bytes += tree_bytes(&path);
            let aside = if name.starts_with(REMOVING_PREFIX) {
                path
            } else {
                let aside = runs.join(format!("{REMOVING_PREFIX}{name}"));
                std::fs::rename(&path, &aside).map_err(io("removing a work root"))?;
                jig_engine::state::crash_point("worker-cache:work-root-aside");
                collected.work_roots.push(name);
                aside
            };
            jig_engine::files::remove_tree(&aside).map_err(io("removing a work root"))?;
        }
        Ok(collected)
    }
}

/// The (name, path) of every entry of `dir`; none when it cannot be read.
fn entries(dir: &Path) -> Vec<(String, std::path::PathBuf)> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .collect();
    entries.sort();
    entries
}

fn older_than(path: &Path, age: Duration) -> bool {
    std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .is_ok_and(|at| at.elapsed().unwrap_or_default() > age)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn package(name: &str) -> flow::package::Package {
        let files = BTreeMap::from([
            (
                "FLOW.md".to_string(),
                format!("---\nname: {name}\ndescription: A Flow.\n---\n").into_bytes(),
            ),
            ("flow.py".to_string(), format!("# {name}\n").into_bytes()),
        ]);
        flow::package::Package::from_files(files).unwrap()
    }

    fn published(plan: &str, packages: &[&str], provider: Option<&str>) -> Published {
        Published {
            project: "p".into(),
            generation: 1,
            plan_digest: plan.into(),
            packages: packages
                .iter()
                .map(|d| (d.to_string(), format!("manifest of {d}")))
                .collect(),
            providers: provider
                .map(|blob| json!({"x": {"kind": "wasm", "blob": blob}}).to_string()),
        }
    }

    #[test]
    fn the_kept_set_is_what_the_generations_and_their_cached_plans_name() {
        let layout = format!("sha256:{}", "c".repeat(64));
        let plan = json!({"execution": {"flows/a": {"prepared": {"digest": "sha256:p", "layout": layout}}}});
        let generations = [
            published("sha256:plan1", &["sha256:a"], Some("sha256:prov")),
            published("sha256:plan2", &["sha256:b"], None),
        ];
        let kept = Kept::of(&generations, |digest| {
            (digest == "sha256:plan1").then(|| plan.clone())
        });
        assert_eq!(
            kept.plans,
            BTreeSet::from(["sha256:plan1".into(), "sha256:plan2".into()])
        );
        assert_eq!(
            kept.store,
            BTreeSet::from(["sha256:a".into(), "sha256:b".into(), layout])
        );
        assert_eq!(kept.providers, BTreeSet::from(["sha256:prov".into()]));
    }

    fn names(dir: &Path) -> Vec<String> {
        entries(dir).into_iter().map(|(name, _)| name).collect()
    }

    /// One of each kind of entry kept and one not: what is not named, and
    /// the work roots of Runs not executing, go; a second collection finds
    /// nothing; a removed package is simply not cached any more.
    #[test]
    fn a_collection_removes_what_is_not_kept_and_keeps_the_executing_runs_roots() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let store = cache.store();
        let (old, new) = (package("old"), package("new"));
        for p in [&old, &new] {
            store.put_package(p).unwrap();
            store.package_tree(p).unwrap();
        }
        let write = |rel: &str, bytes: &[u8]| {
            let path = dir.path().join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, bytes).unwrap();
        };
        let (plan_old, plan_new) = (b"{\"old\":1}".as_slice(), b"{\"new\":1}".as_slice());
        let (prov_old, prov_new) = (b"old provider".as_slice(), b"new provider".as_slice());
        for bytes in [plan_old, plan_new] {
            write(
                &format!("plans/{}", digest_hex(&sha256_digest(bytes))),
                bytes,
            );
        }
        for bytes in [prov_old, prov_new] {
            write(
                &format!("providers/{}", digest_hex(&sha256_digest(bytes))),
                bytes,
            );
        }
        write("runs/run_here/scratch/a", b"in use");
        write("runs/run_gone/scratch/a", b"left by a crash");
        write("runs/.removing-run_older/a", b"half removed");
        let kept = Kept {
            plans: BTreeSet::from([sha256_digest(plan_new)]),
            store: BTreeSet::from([new.digest().to_string()]),
            providers: BTreeSet::from([sha256_digest(prov_new)]),
        };
        let executing = HashSet::from(["run_here".to_string()]);
        let collected = cache.collect(&kept, &executing).unwrap();
        assert_eq!(collected.plans, 1);
        assert_eq!(collected.packages, [old.digest().to_string()]);
        assert_eq!(collected.blobs, 2, "the old FLOW.md and flow.py");
        assert_eq!(collected.providers, 1);
        assert_eq!(collected.work_roots, ["run_gone"]);
        assert!(collected.freed_bytes > 0);
        assert_eq!(
            names(&dir.path().join("plans")),
            [digest_hex(&sha256_digest(plan_new))]
        );
        assert_eq!(
            names(&dir.path().join("providers")),
            [digest_hex(&sha256_digest(prov_new))]
        );
        assert_eq!(names(&dir.path().join("runs")), ["run_here"]);
        assert!(store.load_package(new.digest()).is_ok());
        assert!(store.load_package(old.digest()).is_err());
        assert!(!store.tree_path(old.digest()).exists());
        assert!(store.package_tree(&new).is_ok());
        assert!(cache
            .cached_plan(&sha256_digest(plan_new))
            .is_some_and(|p| p == json!({"new": 1})));
        assert!(cache.collect(&kept, &executing).unwrap().is_empty());
    }

    #[test]
    fn a_second_worker_is_refused_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let held = cache.lock().unwrap();
        let refused = Cache::open(dir.path()).unwrap().lock().unwrap_err();
        assert_eq!(refused.code(), "PROJECT_BUSY", "{refused}");
        drop(held);
        assert!(cache.lock().is_ok());
    }
}
