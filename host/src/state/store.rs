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

    /// Does this store outlive the command (a project's), or not (`jig exec`)?
    pub fn is_durable(&self) -> bool {
        self.durable
    }

    /// Where the bundled runtime support (the compiled Python SDK) is kept
    /// for this project's Runs, one read-only tree per jig build and runtime.
    pub fn support_dir(&self) -> PathBuf {
        self.dir.join(SUPPORT)
    }

    /// Where the shared read-only tree of `digest` lives.
    pub fn tree_path(&self, digest: &str) -> PathBuf {
        self.dir.join(TREES).join(digest_hex(digest))
    }

    /// The admitted `package` (already verified by its digest, as
    /// [`Store::load_package`] returns it) as one read-only tree shared by
    /// every Run of it, instead of a private copy per Run. Made once per
    /// digest from these bytes: written into a private temporary directory,
    /// its files made read-only, synced, compared with the bytes once more, and
    /// renamed into place. Every later use compares the tree with the
    /// verified bytes again (contents, modes, no extra entries); a tree that
    /// differs fails closed (`PROJECT_STATE_INVALID`) and is never repaired
    /// behind the caller's back.
    pub fn package_tree(&self, package: &flow::package::Package) -> Result<PathBuf, StateError> {
        let path = self.tree_path(package.digest());
        match std::fs::symlink_metadata(&path) {
            Ok(_) => {
                check_tree(package.files(), &path).map_err(|what| changed_tree(&path, &what))?;
                return Ok(path);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StateError::io(format!("reading {}", path.display()))(e)),
        }
        let trees = self.dir.join(TREES);
        super::create_private_dir(&trees)?;
        let temp = tempfile::Builder::new()
            .prefix(".jig-tree-")
            .tempdir_in(&trees)
            .map_err(StateError::io("materializing a package"))?;
        let staged = temp.path().join("tree");
        let made = Store::write_tree(package.files(), &staged)
            .and_then(|()| {
                seal_tree(&staged, self.durable).map_err(StateError::io("materializing a package"))
            })
            .and_then(|()| {
                check_tree(package.files(), &staged).map_err(|what| changed_tree(&staged, &what))
            });
        if let Err(e) = made {
            let _ = std::fs::remove_dir_all(&staged);
            return Err(e);
        }
        match std::fs::rename(&staged, &path) {
            Ok(()) => {
                if self.durable {
                    if let Ok(d) = std::fs::File::open(&trees) {
                        let _ = d.sync_all();
                    }
                }
            }
            // Made meanwhile by another Run of this host: use that one,
            // checked like any existing tree.
            Err(_) if path.is_dir() => {
                let _ = std::fs::remove_dir_all(&staged);
                check_tree(package.files(), &path).map_err(|what| changed_tree(&path, &what))?;
            }
            Err(e) => {
                let _ = std::fs::remove_dir_all(&staged);
                return Err(StateError::io(format!("publishing {}", path.display()))(e));
            }
        }
        Ok(path)
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

/// The shared package trees, below the store directory.
const TREES: &str = "trees";
/// The bundled runtime support, below the store directory.
const SUPPORT: &str = "support";

/// The mode of every directory of a shared package tree: owner-private
/// but writable by the owner, so the owner can still remove `.jig` (a
/// read-only directory cannot be emptied by anyone but root). Nothing
/// written there goes unnoticed: every use checks the whole tree.
const TREE_DIR_MODE: u32 = 0o700;

fn changed_tree(path: &Path, what: &str) -> StateError {
    StateError::Invalid {
        message: format!(
            "the admitted package tree {} was changed after it was made ({what}); remove it to \
             have it made again from the store",
            path.display()
        ),
    }
}

/// The mode `write_tree` gives the file at `path` of a package.
fn file_mode(path: &str) -> u32 {
    // Entrypoints of the native recipe must be executable; nothing is writable.
    if path.starts_with("flow.") {
        0o555
    } else {
        0o444
    }
}

/// Give every directory of a freshly written tree its mode (deepest
/// first) and, for a durable store, sync every file and directory.
fn seal_tree(dir: &Path, durable: bool) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            seal_tree(&entry.path(), durable)?;
        } else if durable {
            std::fs::File::open(entry.path())?.sync_all()?;
        }
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(TREE_DIR_MODE))?;
    if durable {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Does the tree at `root` hold exactly `files` (bytes and modes), read
/// through no link, with owner-private directories and nothing else? `Err`
/// says the first difference.
fn check_tree(files: &BTreeMap<String, Vec<u8>>, root: &Path) -> Result<(), String> {
    use std::io::Read;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut seen = 0usize;
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let meta =
            std::fs::symlink_metadata(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        if !meta.is_dir() || meta.permissions().mode() & 0o7777 != TREE_DIR_MODE {
            return Err(format!(
                "{} is not an owner-private directory",
                dir.display()
            ));
        }
        for entry in std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
            let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
            let path = entry.path();
            let kind = entry
                .file_type()
                .map_err(|e| format!("{}: {e}", path.display()))?;
            if kind.is_dir() {
                dirs.push(path);
                continue;
            }
            let name = path
                .strip_prefix(root)
                .ok()
                .and_then(Path::to_str)
                .ok_or_else(|| format!("{} is not a package path", path.display()))?;
            let Some(expected) = files.get(name) else {
                return Err(format!("{name} is not part of the package"));
            };
            if !kind.is_file() {
                return Err(format!("{name} is not a regular file"));
            }
            let mut file = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(nix::libc::O_NOFOLLOW)
                .open(&path)
                .map_err(|e| format!("{name}: {e}"))?;
            let meta = file.metadata().map_err(|e| format!("{name}: {e}"))?;
            if meta.permissions().mode() & 0o7777 != file_mode(name) {
                return Err(format!(
                    "{name} has mode {:o}",
                    meta.permissions().mode() & 0o7777
                ));
            }
            if meta.len() != expected.len() as u64 {
                return Err(format!("{name} has a different size"));
            }
            let mut bytes = Vec::with_capacity(expected.len());
            file.read_to_end(&mut bytes)
                .map_err(|e| format!("{name}: {e}"))?;
            if bytes != *expected {
                return Err(format!("{name} has different bytes"));
            }
            seen += 1;
        }
    }
    if seen != files.len() {
        return Err("a package file is missing".into());
    }
    Ok(())
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
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(file_mode(path)))
                .map_err(StateError::io("materializing a package"))?;
        }
        Ok(())
    }
}
