//! The content-addressed store: every admitted package's exact bytes, kept by
//! content digest so that Runs never reopen visible source.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{digest_hex, sha256_digest, write_atomic, StateError};

/// Per-artifact and per-project ceilings of seed 002 §4.
pub const MAX_ARTIFACT_BYTES: u64 = 64 * 1024 * 1024;
pub const MAX_STORE_BYTES: u64 = 1024 * 1024 * 1024;

pub struct Store {
    dir: PathBuf,
    /// A project's store survives crashes (fsync and rename); a throwaway
    /// store for `jig exec` lives only as long as one command and skips that.
    durable: bool,
}

impl Store {
    pub fn new(dir: PathBuf) -> Store {
        Store { dir, durable: true }
    }

    /// A store that lives only as long as one command (`jig exec`).
    pub fn throwaway(dir: PathBuf) -> Store {
        Store {
            dir,
            durable: false,
        }
    }

    fn write(&self, path: &Path, bytes: &[u8]) -> Result<(), StateError> {
        if self.durable {
            write_atomic(path, bytes)
        } else {
            std::fs::write(path, bytes)
                .map_err(StateError::io(format!("writing {}", path.display())))
        }
    }

    fn blob_path(&self, digest: &str) -> PathBuf {
        self.dir.join("blobs").join(digest_hex(digest))
    }

    fn package_path(&self, digest: &str) -> PathBuf {
        self.dir.join("packages").join(digest_hex(digest))
    }

    /// Retain a staged package's files under its Package/1 digest.
    pub fn put_package(&self, package: &flow::package::Package) -> Result<(), StateError> {
        let manifest_path = self.package_path(package.digest());
        if manifest_path.exists() {
            return Ok(());
        }
        let total: u64 = package.files().values().map(|c| c.len() as u64).sum();
        if total > MAX_ARTIFACT_BYTES {
            return Err(StateError::Invalid {
                message: format!(
                    "package {} exceeds the 64 MiB artifact ceiling",
                    package.digest()
                ),
            });
        }
        if self.used_bytes() + total > MAX_STORE_BYTES {
            return Err(StateError::Invalid {
                message: "the project store reached its 1 GiB ceiling; remove .jig to start over"
                    .into(),
            });
        }
        std::fs::create_dir_all(self.dir.join("blobs"))
            .map_err(StateError::io("creating the store"))?;
        std::fs::create_dir_all(self.dir.join("packages"))
            .map_err(StateError::io("creating the store"))?;
        let mut manifest = serde_json::Map::new();
        for (path, content) in package.files() {
            let digest = sha256_digest(content);
            let blob = self.blob_path(&digest);
            if !blob.exists() {
                self.write(&blob, content)?;
            }
            manifest.insert(path.clone(), serde_json::Value::String(digest));
        }
        let manifest = serde_json::json!({ "digest": package.digest(), "files": manifest });
        self.write(&manifest_path, &flow::json::canonical(&manifest))
    }

    /// Read back exactly the files of an admitted package, verified by
    /// its Package/1 digest (which covers every path and byte, so the
    /// blobs are not hashed a second time one by one).
    pub fn get_package(&self, digest: &str) -> Result<BTreeMap<String, Vec<u8>>, StateError> {
        let files = self.read_files(digest)?;
        if flow::package::digest_files(&files) != digest {
            return Err(corrupt(digest, "digest mismatch"));
        }
        Ok(files)
    }

    /// The admitted package under `digest`, parsed and verified with one
    /// pass over its bytes: [`Package::from_files`] computes the Package/1
    /// digest, which must be the admitted one. A Run reads its package
    /// once this way and writes its private tree from the same bytes.
    ///
    /// [`Package::from_files`]: flow::package::Package::from_files
    pub fn load_package(&self, digest: &str) -> Result<flow::package::Package, StateError> {
        let files = self.read_files(digest)?;
        let package =
            flow::package::Package::from_files(files).map_err(|e| StateError::Invalid {
                message: format!("admitted package no longer validates: {e}"),
            })?;
        if package.digest() != digest {
            return Err(corrupt(digest, "digest mismatch"));
        }
        Ok(package)
    }

    /// The files the manifest of `digest` names, read as stored (not yet
    /// verified).
    fn read_files(&self, digest: &str) -> Result<BTreeMap<String, Vec<u8>>, StateError> {
        let bytes = std::fs::read(self.package_path(digest))
            .map_err(|_| corrupt(digest, "not retained"))?;
        let manifest =
            flow::json::parse(&bytes).map_err(|_| corrupt(digest, "manifest is not JSON/1"))?;
        let files = manifest
            .get("files")
            .and_then(|f| f.as_object())
            .ok_or_else(|| corrupt(digest, "manifest shape"))?;
        let mut out = BTreeMap::new();
        for (path, blob) in files {
            let blob = blob
                .as_str()
                .ok_or_else(|| corrupt(digest, "manifest shape"))?;
            let content =
                std::fs::read(self.blob_path(blob)).map_err(|_| corrupt(digest, "missing blob"))?;
            out.insert(path.clone(), content);
        }
        Ok(out)
    }

    /// Retain private evidence bytes beside the packages (a workspace
    /// preparation's layout), counted against the project cap; returns
    /// their digest.
    pub fn put_blob(&self, bytes: &[u8]) -> Result<String, StateError> {
        let digest = sha256_digest(bytes);
        let blob = self.blob_path(&digest);
        if blob.exists() {
            return Ok(digest);
        }
        if self.used_bytes() + bytes.len() as u64 > MAX_STORE_BYTES {
            return Err(StateError::Invalid {
                message: "the project store reached its 1 GiB ceiling; remove .jig to start over"
                    .into(),
            });
        }
        std::fs::create_dir_all(self.dir.join("blobs"))
            .map_err(StateError::io("creating the store"))?;
        self.write(&blob, bytes)?;
        Ok(digest)
    }

    /// Read back bytes retained by [`Store::put_blob`], verified.
    pub fn get_blob(&self, digest: &str) -> Result<Vec<u8>, StateError> {
        let hex = digest.strip_prefix("sha256:").unwrap_or_default();
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(corrupt_blob(digest, "not a digest"));
        }
        let bytes = std::fs::read(self.blob_path(digest))
            .map_err(|_| corrupt_blob(digest, "not retained"))?;
        if sha256_digest(&bytes) != digest {
            return Err(corrupt_blob(digest, "digest mismatch"));
        }
        Ok(bytes)
    }

    /// Write an admitted package as a read-only tree at `dest`.
    pub fn materialize(&self, digest: &str, dest: &Path) -> Result<(), StateError> {
        Store::write_tree(&self.get_package(digest)?, dest)
    }

    fn used_bytes(&self) -> u64 {
        std::fs::read_dir(self.dir.join("blobs"))
            .map(|entries| {
                entries
                    .flatten()
                    .filter_map(|e| e.metadata().ok())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0)
    }
}

fn corrupt_blob(digest: &str, what: &str) -> StateError {
    StateError::Invalid {
        message: format!("retained evidence {digest}: {what}"),
    }
}

fn corrupt(digest: &str, what: &str) -> StateError {
    StateError::Invalid {
        message: format!("admitted package {digest}: {what}"),
    }
}

impl Store {
    /// Write verified package files as a read-only tree at `dest`: the
    /// entrypoints (`flow.*`) executable, nothing writable.
    pub fn write_tree(files: &BTreeMap<String, Vec<u8>>, dest: &Path) -> Result<(), StateError> {
        use std::os::unix::fs::PermissionsExt;
        for (path, content) in files {
            let target = dest.join(path);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(StateError::io("materializing a package"))?;
            }
            std::fs::write(&target, content).map_err(StateError::io("materializing a package"))?;
            // Entrypoints of the native recipe must be executable; nothing is writable.
            let mode = if path.starts_with("flow.") {
                0o555
            } else {
                0o444
            };
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(mode))
                .map_err(StateError::io("materializing a package"))?;
        }
        Ok(())
    }
}
