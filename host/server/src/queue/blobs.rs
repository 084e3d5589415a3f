//! Admitted bytes by digest: an admission's generation (its Plan, lock and
//! every package the Plan names, source and prepared) is published as
//! content-addressed blobs; a worker fetches them, checks every digest,
//! and keeps them in its own owner-private cache, from which its Runs
//! execute. The project directory is never read by a worker.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use flow::digest::sha256_digest;
use serde_json::{json, Value};

use super::Queue;
use crate::Error;
use jig_provider_api::ProviderDecl;

use jig_engine::files::{Captured, CapturedFile, CapturedRoot};
use jig_engine::state::{Generation, ProjectState, Store};

/// Every package digest a Plan can execute: each source package the lock
/// names and each prepared package that runs in its place.
pub fn plan_packages(plan: &Value) -> Vec<String> {
    let mut digests = Vec::new();
    if let Some(packages) = plan["lock"]["packages"].as_object() {
        for entry in packages.values() {
            if let Some(d) = entry["digest"].as_str() {
                digests.push(d.to_string());
            }
        }
    }
    if let Some(execution) = plan["execution"].as_object() {
        for entry in execution.values() {
            if let Some(d) = entry["prepared"]["digest"].as_str() {
                digests.push(d.to_string());
            }
        }
    }
    digests.sort();
    digests.dedup();
    digests
}

/// The workspace layout digest of each prepared package a Plan can
/// execute: private layout JSON retained beside the prepared package
/// (seed 002 §4), which a Run of that package needs as much as its files.
pub fn plan_layouts(plan: &Value) -> Vec<String> {
    let mut digests: Vec<String> = plan["execution"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.values())
        .filter_map(|entry| entry["prepared"]["layout"].as_str().map(str::to_string))
        .collect();
    digests.sort();
    digests.dedup();
    digests
}

impl Queue {
    pub(crate) async fn put_blob(&self, bytes: &[u8]) -> Result<String, Error> {
        let digest = sha256_digest(bytes);
        let client = self.client().await?;
        client
            .execute(
                // Stored again: its grace starts again (see
                // `retention::STORE_GRACE`), refreshed at most each minute.
                "INSERT INTO jig_blobs (digest, bytes) VALUES ($1, $2) ON CONFLICT (digest)
                 DO UPDATE SET stored_at = now() WHERE jig_blobs.stored_at < now() - interval '1 minute'",
                &[&digest, &bytes],
            )
            .await
            .map_err(Error::db("publishing a blob"))?;
        Ok(digest)
    }

    /// A blob's bytes, checked against the digest they are stored under.
    pub async fn get_blob(&self, digest: &str) -> Result<Vec<u8>, Error> {
        let client = self.client().await?;
        let row = client
            .query_opt("SELECT bytes FROM jig_blobs WHERE digest = $1", &[&digest])
            .await
            .map_err(Error::db("fetching a blob"))?
            .ok_or_else(|| Error::BlobMismatch(format!("blob {digest} is not published")))?;
        let bytes: Vec<u8> = row.get(0);
        if sha256_digest(&bytes) != digest {
            return Err(Error::BlobMismatch(format!(
                "blob {digest}: its bytes do not match its digest; nothing runs"
            )));
        }
        Ok(bytes)
    }

    /// Publish `generation` of `project` (idempotent), with the provider
    /// files its pins name, as `providers` (this host's configuration)
    /// has them.
    pub async fn publish(
        &self,
        project: &str,
        state: &ProjectState,
        generation: &Generation,
        providers: &[ProviderDecl],
    ) -> Result<(), Error> {
        let number = generation.number as i64;
        let client = self.client().await?;
        // Published already: touched, so the store's collection (which
        // spares what was published within its grace) leaves it to the
        // Run about to name it.
        let known = client
            .query_opt(
                "UPDATE jig_generations SET published = now() WHERE project = $1 AND generation = $2 RETURNING 1",
                &[&project, &number],
            )
            .await
            .map_err(Error::db("reading the published generations"))?;
        drop(client);
        if known.is_some() {
            return Ok(());
        }
        let store = state.store();
        let mut packages = BTreeMap::new();
        for digest in plan_packages(&generation.plan) {
            let files = store.get_package(&digest).map_err(Error::from)?;
            let mut manifest = serde_json::Map::new();
            for (path, bytes) in &files {
                manifest.insert(path.clone(), json!(self.put_blob(bytes).await?));
            }
            let manifest = json!({"digest": digest, "files": manifest});
            let manifest_digest = self.put_blob(&flow::json::canonical(&manifest)).await?;
            packages.insert(digest, manifest_digest);
        }
        for digest in plan_layouts(&generation.plan) {
            let bytes = store.get_blob(&digest).map_err(Error::from)?;
            self.put_blob(&bytes).await?;
        }
        let plan_digest = self
            .put_blob(&flow::json::canonical(&generation.plan))
            .await?;
        let lock_digest = match state.read_lock() {
            Some(lock) => Some(self.put_blob(&lock).await?),
            None => None,
        };
        let packages = serde_json::to_string(&packages).expect("strings serialise");
        let mut published = serde_json::Map::new();
        for (name, pin) in plan_provider_pins(&generation.plan) {
            let Some(decl) = providers.iter().find(|d| d.name == name) else {
                continue;
            };
            let Some(bytes) = decl.path.as_ref().and_then(|p| std::fs::read(p).ok()) else {
                continue;
            };
            // Only the reviewed bytes travel; a changed file is left to
            // the worker's own check (it fails as locally).
            if sha256_digest(&bytes) != pin {
                continue;
            }
            let blob = self.put_blob(&bytes).await?;
            published.insert(
                name,
                json!({"kind": decl.kind, "settings": decl.settings, "grants": decl.grants, "blob": blob}),
            );
        }
        let published = serde_json::to_string(&published).expect("JSON serialises");
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO jig_generations (project, generation, plan_digest, lock_digest, packages, providers)
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
                &[&project, &number, &plan_digest, &lock_digest, &packages, &published],
            )
            .await
            .map_err(Error::db("publishing a generation"))?;
        Ok(())
    }
}

/// The provider pins of a Plan that name a file: (provider name, file
/// digest), each name once.
pub fn plan_provider_pins(plan: &Value) -> BTreeMap<String, String> {
    let mut pins = BTreeMap::new();
    for entry in plan["execution"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.values())
    {
        for pin in entry["providers"]
            .as_object()
            .into_iter()
            .flat_map(|m| m.values())
        {
            if let (Some(name), Some(digest)) = (pin["name"].as_str(), pin["fileDigest"].as_str()) {
                pins.insert(name.to_string(), digest.to_string());
            }
        }
    }
    pins
}

/// A file Run as it travels from `jig serve` to a worker: every captured
/// attachment file as a blob by digest, the writable attachment's name,
/// whether a packet is wanted, and what the terminal names (method and
/// input identity; docs/src/runs.md, Files).
#[derive(Debug, Clone)]
pub struct FileRun {
    pub captured: Captured,
    pub writable: Option<String>,
    pub out: bool,
    pub method: Value,
    pub input: Value,
    /// A target keeping Run Checkpoints: the admitted configuration its
    /// checkpoint identity names (`{generation, plan}`); null otherwise.
    pub configuration: Value,
}

impl Queue {
    /// Publish a file Run's attachments and its description; returns the
    /// description's digest (recorded with the Run).
    pub async fn publish_files(&self, run: &FileRun) -> Result<String, Error> {
        let mut roots = serde_json::Map::new();
        for (name, root) in &run.captured.roots {
            let mut files = Vec::new();
            for file in &root.files {
                let blob = self.put_blob(&file.bytes).await?;
                files.push(json!({"path": file.path, "blob": blob}));
            }
            roots.insert(name.clone(), Value::Array(files));
        }
        let description = json!({
            "roots": roots,
            "writable": run.writable,
            "out": run.out,
            "method": run.method,
            "input": run.input,
            "configuration": run.configuration,
        });
        self.put_blob(&flow::json::canonical(&description)).await
    }

    /// A file Run's description and attachments, every blob checked
    /// against its digest after fetching.
    pub async fn fetch_files(&self, digest: &str) -> Result<FileRun, Error> {
        let invalid = |m: String| Error::BlobMismatch(m);
        let description = flow::json::parse(&self.get_blob(digest).await?)
            .map_err(|e| invalid(format!("file Run {digest}: {e}")))?;
        let mut captured = Captured::default();
        for (name, files) in description["roots"].as_object().into_iter().flatten() {
            let mut root = CapturedRoot {
                real: PathBuf::new(),
                files: Vec::new(),
            };
            for file in files.as_array().into_iter().flatten() {
                let (Some(path), Some(blob)) = (file["path"].as_str(), file["blob"].as_str())
                else {
                    return Err(invalid(format!("file Run {digest}: a malformed entry")));
                };
                jig_engine::files::check_relative(path)
                    .map_err(|m| invalid(format!("file Run {digest}: {m}")))?;
                let bytes = self.get_blob(blob).await?;
                root.files.push(CapturedFile {
                    path: path.to_string(),
                    sha256: flow::digest::sha256_hex(&bytes),
                    bytes,
                });
            }
            captured.roots.insert(name.clone(), root);
        }
        Ok(FileRun {
            captured,
            writable: description["writable"].as_str().map(str::to_string),
            out: description["out"].as_bool().unwrap_or(false),
            method: description["method"].clone(),
            input: description["input"].clone(),
            configuration: description["configuration"].clone(),
        })
    }
}

impl Queue {
    /// Keep a Run's latest accepted checkpoint aggregate, replacing the
    /// previous one, only while `claim` owns the dispatched Run (as for a
    /// heartbeat, until a sweep takes it): a fenced worker's save is
    /// refused.
    pub async fn save_checkpoint(
        &self,
        claim: &super::Claim,
        sequence: i64,
        aggregate: &Value,
    ) -> Result<super::Write, Error> {
        let text = String::from_utf8(flow::json::canonical(aggregate)).expect("UTF-8");
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(Error::db("saving a checkpoint"))?;
        let owned = tx
            .query_opt(
                "SELECT 1 FROM jig_runs WHERE id = $1 AND epoch = $2 AND status = 'running'
                 FOR UPDATE",
                &[&claim.id, &claim.epoch],
            )
            .await
            .map_err(Error::db("saving a checkpoint"))?;
        if owned.is_none() {
            return Ok(super::Write::Refused);
        }
        let sequence = sequence as i32;
        tx.execute(
            "DELETE FROM jig_checkpoints WHERE run_id = $1",
            &[&claim.id],
        )
        .await
        .map_err(Error::db("saving a checkpoint"))?;
        tx.execute(
            "INSERT INTO jig_checkpoints (run_id, sequence, packet) VALUES ($1, $2, $3)",
            &[&claim.id, &sequence, &text],
        )
        .await
        .map_err(Error::db("saving a checkpoint"))?;
        tx.commit()
            .await
            .map_err(Error::db("saving a checkpoint"))?;
        Ok(super::Write::Accepted)
    }
}

/// A worker's local cache of verified admitted bytes, by digest (what it
/// keeps: [`super::cache`]).
#[derive(Clone)]
pub struct Cache {
    root: PathBuf,
}

impl Cache {
    /// Open (creating, owner-private) the cache at `root`.
    pub fn open(root: &Path) -> Result<Cache, Error> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        let io =
            |e: std::io::Error| Error::Internal(format!("worker cache {}: {e}", root.display()));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(root.join("plans"))
            .map_err(io)?;
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o700)).map_err(io)?;
        Ok(Cache {
            root: root.to_path_buf(),
        })
    }

    /// Hold the cache for this process alone, until the returned file is
    /// dropped: a worker removes from its cache what its own Runs do not
    /// use, so two workers cannot share one.
    pub fn lock(&self) -> Result<std::fs::File, Error> {
        let path = self.root.join(".lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::Internal(format!("worker cache {}: {e}", path.display())))?;
        match file.try_lock() {
            Ok(()) => Ok(file),
            Err(std::fs::TryLockError::WouldBlock) => Err(Error::Busy(format!(
                "another jig worker uses the cache {}; give each worker its own --cache",
                self.root.display()
            ))),
            Err(std::fs::TryLockError::Error(e)) => Err(Error::Internal(format!(
                "worker cache {}: {e}",
                path.display()
            ))),
        }
    }

    pub fn store(&self) -> Store {
        Store::new(self.root.join("store"))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The Plan of `generation` of `project`, with every package it names
    /// fetched, verified and cached, and the providers published with it
    /// (each file fetched by digest, checked, cached here).
    pub async fn generation(
        &self,
        queue: &Queue,
        project: &str,
        generation: i64,
    ) -> Result<(Value, Vec<ProviderDecl>), Error> {
        let client = queue.client().await?;
        let row = client
            .query_opt(
                "SELECT plan_digest, packages, providers FROM jig_generations WHERE project = $1 AND generation = $2",
                &[&project, &generation],
            )
            .await
            .map_err(Error::db("reading a published generation"))?
            .ok_or_else(|| {
                Error::NotPublished(
                    format!("project {project} generation {generation} is not published"),
                )
            })?;
        drop(client);
        let plan_digest: String = row.get(0);
        let packages: String = row.get(1);
        let providers: Option<String> = row.get(2);
        let packages: BTreeMap<String, String> = serde_json::from_str(&packages)
            .map_err(|e| Error::BlobMismatch(format!("generation manifest: {e}")))?;
        let plan_path = self
            .root
            .join("plans")
            .join(jig_engine::state::digest_hex(&plan_digest));
        let plan_bytes = match std::fs::read(&plan_path) {
            Ok(bytes) if sha256_digest(&bytes) == plan_digest => bytes,
            _ => {
                let bytes = queue.get_blob(&plan_digest).await?;
                jig_engine::state::write_atomic(&plan_path, &bytes).map_err(Error::from)?;
                bytes
            }
        };
        let plan = flow::json::parse(&plan_bytes)
            .map_err(|e| Error::BlobMismatch(format!("plan {plan_digest}: {e}")))?;
        let store = self.store();
        for (digest, manifest_digest) in &packages {
            if store.load_package(digest).is_ok() {
                continue;
            }
            let manifest = flow::json::parse(&queue.get_blob(manifest_digest).await?)
                .map_err(|e| Error::BlobMismatch(format!("manifest: {e}")))?;
            let mut files = BTreeMap::new();
            for (path, blob) in manifest["files"].as_object().into_iter().flatten() {
                let blob = blob.as_str().unwrap_or_default();
                files.insert(path.clone(), queue.get_blob(blob).await?);
            }
            let package = flow::package::Package::from_files(files)
                .map_err(|e| Error::BlobMismatch(format!("package {digest}: {e}")))?;
            if package.digest() != digest {
                return Err(Error::BlobMismatch(format!(
                    "package {digest}: the fetched files digest to {}",
                    package.digest()
                )));
            }
            store.put_package(&package).map_err(Error::from)?;
        }
        for digest in plan_layouts(&plan) {
            if store.get_blob(&digest).is_ok() {
                continue;
            }
            // `get_blob` checked the bytes against the digest; the store
            // keeps them under the digest they hash to.
            let bytes = queue.get_blob(&digest).await?;
            store.put_blob(&bytes).map_err(Error::from)?;
        }
        let providers = self.providers(queue, providers.as_deref()).await?;
        Ok((plan, providers))
    }

    /// The published providers as declarations naming cached files.
    async fn providers(
        &self,
        queue: &Queue,
        published: Option<&str>,
    ) -> Result<Vec<ProviderDecl>, Error> {
        let invalid = |m: String| Error::BlobMismatch(m);
        let Some(published) = published else {
            return Ok(Vec::new());
        };
        let published: serde_json::Map<String, Value> = serde_json::from_str(published)
            .map_err(|e| invalid(format!("published providers: {e}")))?;
        let dir = self.root.join("providers");
        std::fs::create_dir_all(&dir).map_err(|e| Error::Internal(format!("worker cache: {e}")))?;
        let mut decls = Vec::new();
        for (name, entry) in published {
            let blob = entry["blob"].as_str().unwrap_or_default().to_string();
            let path = dir.join(jig_engine::state::digest_hex(&blob));
            let cached = std::fs::read(&path).is_ok_and(|b| sha256_digest(&b) == blob);
            if !cached {
                let bytes = queue.get_blob(&blob).await?;
                jig_engine::state::write_atomic(&path, &bytes).map_err(Error::from)?;
            }
            let decl = json!({
                "name": name,
                "kind": entry["kind"],
                "path": path,
                "settings": entry["settings"],
                "grants": entry["grants"],
            });
            decls.push(
                serde_json::from_value(decl)
                    .map_err(|e| invalid(format!("published provider {name:?}: {e}")))?,
            );
        }
        Ok(decls)
    }
}
