//! The content-addressed store: every admitted package's exact bytes, kept by
//! content digest so that Runs never reopen visible source.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use flow::digest::sha256_digest;

use super::{digest_hex, write_atomic, StateError};

/// Per-artifact and per-project ceilings of seed 002 §4.
pub(crate) const MAX_ARTIFACT_BYTES: u64 = 64 * 1024 * 1024;
pub(crate) const MAX_STORE_BYTES: u64 = 1024 * 1024 * 1024;

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
    pub(crate) fn is_durable(&self) -> bool {
        self.durable
    }

    /// Where the bundled runtime support (the compiled Python SDK) is kept
    /// for this project's Runs, one read-only tree per jig build and runtime.
    pub(crate) fn support_dir(&self) -> PathBuf {
        self.dir.join(SUPPORT)
    }

    /// Where the shared read-only tree of `digest` lives.
    pub fn tree_path(&self, digest: &str) -> PathBuf {
        self.dir.join(TREES).join(digest_hex(digest))
    }

    /// Remove the shared package trees, their seals and any half-made tree
    /// a crash left, except those of the digests in `keep`: called once a
    /// generation is admitted, by the command that holds the project, so
    /// no Run is using a tree. A tree is only a copy of a retained package:
    /// one needed again is made again from it. Returns how many went.
    pub(crate) fn prune_trees(&self, keep: &std::collections::BTreeSet<&str>) -> usize {
        let Ok(entries) = std::fs::read_dir(self.dir.join(TREES)) else {
            return 0;
        };
        let mut removed = 0;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if keep.contains(format!("sha256:{name}").as_str()) {
                continue;
            }
            if crate::files::remove_tree(&entry.path()).is_ok() {
                let _ = std::fs::remove_file(self.dir.join(SEALS).join(format!("{name}.json")));
                removed += 1;
            }
        }
        removed
    }

    /// The admitted `package` (already verified by its digest, as
    /// [`Store::load_package`] returns it) as one read-only tree shared by
    /// every Run of it, instead of a private copy per Run. Made once per
    /// digest from these bytes: written into a private temporary directory,
    /// its files made read-only, synced, compared with the bytes once more, and
    /// renamed into place. Every later use checks the tree against its seal
    /// (see [`Store::check_shared_tree`]); a tree that differs from the
    /// verified bytes fails closed (`PROJECT_STATE_INVALID`) and is never
    /// repaired behind the caller's back.
    pub fn package_tree(&self, package: &flow::package::Package) -> Result<PathBuf, StateError> {
        let path = self.tree_path(package.digest());
        match std::fs::symlink_metadata(&path) {
            Ok(_) => {
                self.check_shared_tree(package.digest(), package.files(), &path)?;
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
                    super::sync_dir(&trees)?;
                }
                // Sealed where it now lives (the rename changed the root's
                // own stamp).
                self.check_shared_tree(package.digest(), package.files(), &path)?;
            }
            // Made meanwhile by another Run of this host: use that one,
            // checked like any existing tree.
            Err(_) if path.is_dir() => {
                let _ = std::fs::remove_dir_all(&staged);
                self.check_shared_tree(package.digest(), package.files(), &path)?;
            }
            Err(e) => {
                let _ = std::fs::remove_dir_all(&staged);
                return Err(StateError::io(format!("publishing {}", path.display()))(e));
            }
        }
        Ok(path)
    }

    /// Is the shared tree at `path` still exactly `files`? When its seal
    /// (what `lstat` said of every directory and file of it just after its
    /// bytes were last compared) still matches, without reading a byte;
    /// otherwise by comparing every byte, mode and entry with `files`, and
    /// sealing it again when that passes and nothing moved meanwhile.
    ///
    /// What the seal trusts: the kernel stamps a new ctime (which no
    /// unprivileged call can set back) on every change of a file's bytes,
    /// mode, owner, links or name, and a directory's mtime and ctime on
    /// every entry made or removed in it; the inode and device show a
    /// replaced file. So an edit in place with its mtime restored, an
    /// added or removed file, a chmod undone, are all a different stamp,
    /// and then the bytes decide. The files are read-only and their
    /// directories and `.jig` owner-private, so only this user (or root)
    /// can make such an edit at all; someone who can also rewrite the seal
    /// can equally rewrite the admission itself.
    fn check_shared_tree(
        &self,
        digest: &str,
        files: &BTreeMap<String, Vec<u8>>,
        path: &Path,
    ) -> Result<(), StateError> {
        let seal = self.seal_path(digest);
        if self.durable && read_seal(&seal).is_some_and(|s| seal_holds(&s, files, path)) {
            return Ok(());
        }
        let changed = |what: String| changed_tree(path, &what);
        let before = stamp_tree(path).map_err(changed)?;
        check_tree(files, path).map_err(changed)?;
        let after = stamp_tree(path).map_err(changed)?;
        if self.durable && before == after {
            // Without a seal the next use compares the bytes again.
            let _ = super::create_private_dir(&self.dir.join(SEALS))
                .and_then(|()| write_atomic(&seal, &seal_bytes(digest, &after)));
        }
        Ok(())
    }

    fn seal_path(&self, digest: &str) -> PathBuf {
        self.dir
            .join(SEALS)
            .join(format!("{}.json", digest_hex(digest)))
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

    /// The digests of the retained packages and of the blobs, as their
    /// file names say (temporary files of an unfinished write skipped).
    pub(super) fn contents(&self) -> (Vec<String>, Vec<String>) {
        let names = |sub: &str| -> Vec<String> {
            std::fs::read_dir(self.dir.join(sub))
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    (!name.starts_with('.')).then(|| format!("sha256:{name}"))
                })
                .collect()
        };
        (names("packages"), names("blobs"))
    }

    /// The blobs the manifest of package `digest` names; `None` when the
    /// manifest cannot be read as one.
    fn manifest_blobs(&self, digest: &str) -> Option<Vec<String>> {
        let bytes = std::fs::read(self.package_path(digest)).ok()?;
        let manifest = flow::json::parse(&bytes).ok()?;
        manifest
            .get("files")?
            .as_object()?
            .values()
            .map(|blob| blob.as_str().map(str::to_string))
            .collect()
    }

    /// Remove what `named` does not name: every package whose digest it
    /// does not hold, then every blob neither it nor a kept package's
    /// manifest names, then the shared trees a crash left renamed aside.
    /// Each removal is one unlink (a package's manifest first, its shared
    /// tree renamed aside before it is removed), from what names down to
    /// what is named, so a crash leaves only unnamed entries: a reader
    /// finds a package whole or not at all, and the next collection
    /// removes the rest. With `dry_run` nothing changes.
    pub fn collect(
        &self,
        named: &std::collections::BTreeSet<String>,
        dry_run: bool,
    ) -> Result<super::retention::Unnamed, StateError> {
        let mut named = named.clone();
        let (packages, blobs) = self.contents();
        let mut unnamed = super::retention::Unnamed::default();
        let mut unnamed_packages = Vec::new();
        for digest in packages {
            if !named.contains(&digest) {
                unnamed_packages.push(digest);
                continue;
            }
            match self.manifest_blobs(&digest) {
                Some(files) => named.extend(files),
                // A kept package whose manifest cannot be read: which blobs
                // it needs is unknown, so none is removed.
                None => named.extend(blobs.iter().cloned()),
            }
        }
        for digest in &unnamed_packages {
            unnamed.freed_bytes += self.remove_package(digest, dry_run)?;
        }
        // A shared tree whose package went before it (a crash between the
        // two): nothing can name it any more.
        for entry in std::fs::read_dir(self.dir.join(TREES))
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = entry.file_name().to_string_lossy().into_owned();
            let digest = format!("sha256:{name}");
            if name.starts_with('.')
                || unnamed_packages.contains(&digest)
                || self.package_path(&digest).exists()
            {
                continue;
            }
            unnamed.freed_bytes += self.remove_tree_of(&digest, dry_run)?;
        }
        unnamed.packages = unnamed_packages;
        for digest in blobs.iter().filter(|d| !named.contains(*d)) {
            unnamed.freed_bytes += self.remove_blob(digest, dry_run)?;
            unnamed.blobs += 1;
        }
        if !dry_run {
            unnamed.freed_bytes += self.remove_trees_aside()?;
        }
        Ok(unnamed)
    }

    /// Remove package `digest`: its manifest (one unlink: a reader finds
    /// the package whole or not at all), then its shared tree, renamed
    /// aside first so no half-removed tree is ever under its name, and its
    /// seal. Its blobs are the caller's to remove, after. Returns the bytes
    /// freed (with `dry_run`, that would be).
    fn remove_package(&self, digest: &str, dry_run: bool) -> Result<u64, StateError> {
        let io = StateError::io("removing a package from the store");
        let manifest = self.package_path(digest);
        let tree = self.tree_path(digest);
        let seal = self.seal_path(digest);
        let bytes = super::retention::tree_bytes(&manifest)
            + super::retention::tree_bytes(&tree)
            + super::retention::tree_bytes(&seal);
        if dry_run {
            return Ok(bytes);
        }
        remove_existing(&manifest).map_err(io)?;
        super::crash_point("retention:store-package-removed");
        self.remove_tree_of(digest, false)?;
        Ok(bytes)
    }

    /// Remove the shared tree of package `digest`, renamed aside first so
    /// no half-removed tree is ever under its name, and its seal. Returns
    /// the bytes freed (with `dry_run`, that would be).
    fn remove_tree_of(&self, digest: &str, dry_run: bool) -> Result<u64, StateError> {
        let tree = self.tree_path(digest);
        let seal = self.seal_path(digest);
        let bytes = super::retention::tree_bytes(&tree) + super::retention::tree_bytes(&seal);
        if dry_run {
            return Ok(bytes);
        }
        if tree.exists() {
            let aside = self.dir.join(TREES).join(format!(
                "{}{}",
                super::retention::REMOVING_PREFIX,
                digest_hex(digest)
            ));
            std::fs::rename(&tree, &aside).map_err(StateError::io("removing a package tree"))?;
            crate::files::remove_tree(&aside).map_err(StateError::io("removing a package tree"))?;
        }
        remove_existing(&seal).map_err(StateError::io("removing a package tree"))?;
        Ok(bytes)
    }

    /// Remove blob `digest` (one unlink); returns its bytes.
    fn remove_blob(&self, digest: &str, dry_run: bool) -> Result<u64, StateError> {
        let path = self.blob_path(digest);
        let bytes = super::retention::tree_bytes(&path);
        if !dry_run {
            remove_existing(&path).map_err(StateError::io("removing a blob from the store"))?;
        }
        Ok(bytes)
    }

    /// Remove the shared trees a crash left renamed aside; returns the
    /// bytes freed.
    fn remove_trees_aside(&self) -> Result<u64, StateError> {
        let mut freed = 0;
        for entry in std::fs::read_dir(self.dir.join(TREES))
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with(super::retention::REMOVING_PREFIX) {
                freed += super::retention::tree_bytes(&entry.path());
                crate::files::remove_tree(&entry.path())
                    .map_err(StateError::io("removing a package tree"))?;
            }
        }
        Ok(freed)
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

/// Remove the file at `path`; one already gone is no error.
fn remove_existing(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

fn corrupt_blob(digest: &str, what: &str) -> StateError {
    StateError::Invalid {
        message: format!("retained evidence {digest}: {what}"),
    }
}

/// The shared package trees, below the store directory.
const TREES: &str = "trees";
/// The seals of the shared package trees, below the store directory.
const SEALS: &str = "tree-seals";
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

/// What `lstat` says of one entry of a shared tree, as its seal records
/// it: device, inode, mode, links, owner, size, mtime and ctime (seconds,
/// nanoseconds).
type Stamp = [i64; 10];

fn stamp(meta: &std::fs::Metadata) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    [
        meta.dev() as i64,
        meta.ino() as i64,
        i64::from(meta.mode()),
        meta.nlink() as i64,
        i64::from(meta.uid()),
        meta.size() as i64,
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec(),
    ]
}

/// The stamp of every directory (with a trailing `/`; the root is `/`) and
/// file below `root`, read through no link.
fn stamp_tree(root: &Path) -> Result<BTreeMap<String, Stamp>, String> {
    let mut stamps = BTreeMap::new();
    let mut dirs = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, name)) = dirs.pop() {
        let meta =
            std::fs::symlink_metadata(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        stamps.insert(format!("{name}/"), stamp(&meta));
        for entry in std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
            let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
            let file = entry.file_name();
            let file = file
                .to_str()
                .ok_or_else(|| format!("{} is not a package path", entry.path().display()))?;
            let rel = if name.is_empty() {
                file.to_string()
            } else {
                format!("{name}/{file}")
            };
            let meta =
                std::fs::symlink_metadata(entry.path()).map_err(|e| format!("{rel}: {e}"))?;
            if meta.is_dir() {
                dirs.push((entry.path(), rel));
            } else {
                stamps.insert(rel, stamp(&meta));
            }
        }
    }
    Ok(stamps)
}

fn seal_bytes(digest: &str, stamps: &BTreeMap<String, Stamp>) -> Vec<u8> {
    // serde_json, not the JSON/1 canonical form: stamps are integers
    // beyond 2^53 (devices, nanoseconds) that must round-trip exactly.
    serde_json::to_vec(&serde_json::json!({ "digest": digest, "stamps": stamps }))
        .unwrap_or_default()
}

/// The stamps of a seal: an owner-private regular file of this user, read
/// through no link, that names `digest`-shaped content; `None` otherwise.
fn read_seal(path: &Path) -> Option<BTreeMap<String, Stamp>> {
    let bytes = jig_verify::read_own(path, u64::MAX, true)?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let stamps = value.get("stamps")?.as_object()?;
    let digest = value.get("digest")?.as_str()?;
    if path.file_stem()?.to_str()? != digest_hex(digest) {
        return None;
    }
    stamps
        .iter()
        .map(|(name, stamp)| Some((name.clone(), serde_json::from_value(stamp.clone()).ok()?)))
        .collect()
}

/// Does the tree at `root` still carry exactly the sealed stamps, and do
/// they describe `files` (every path and size, nothing else)?
fn seal_holds(
    stamps: &BTreeMap<String, Stamp>,
    files: &BTreeMap<String, Vec<u8>>,
    root: &Path,
) -> bool {
    let sealed_files = stamps.iter().filter(|(name, _)| !name.ends_with('/'));
    if sealed_files.clone().count() != files.len() {
        return false;
    }
    let described = sealed_files.into_iter().all(|(name, stamp)| {
        files
            .get(name)
            .is_some_and(|bytes| stamp[5] == bytes.len() as i64)
    });
    described
        && stamps.iter().all(|(name, sealed)| {
            let path = match name.strip_suffix('/') {
                Some("") => root.to_path_buf(),
                Some(dir) => root.join(dir),
                None => root.join(name),
            };
            std::fs::symlink_metadata(path).is_ok_and(|meta| stamp(&meta) == *sealed)
        })
}

fn corrupt(digest: &str, what: &str) -> StateError {
    StateError::Invalid {
        message: format!("admitted package {digest}: {what}"),
    }
}

impl Store {
    /// Write verified package files as a read-only tree at `dest`: the
    /// entrypoints (`flow.*`) executable, nothing writable.
    pub(crate) fn write_tree(
        files: &BTreeMap<String, Vec<u8>>,
        dest: &Path,
    ) -> Result<(), StateError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// Bytes this thread has read so far (`rchar` of /proc/thread-self/io).
    fn read_by_this_thread() -> u64 {
        let io = std::fs::read_to_string("/proc/thread-self/io").unwrap();
        io.lines()
            .find_map(|l| l.strip_prefix("rchar: "))
            .unwrap()
            .parse()
            .unwrap()
    }

    const ENTRY_BYTES: usize = 4 << 20;

    fn fixture() -> (tempfile::TempDir, Store, flow::package::Package) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let files = BTreeMap::from([
            (
                "FLOW.md".to_string(),
                b"---\nname: big\ndescription: A large entrypoint.\n---\n".to_vec(),
            ),
            ("flow.bin".to_string(), vec![7u8; ENTRY_BYTES]),
        ]);
        let package = flow::package::Package::from_files(files).unwrap();
        let store = Store::new(dir.path().join("store"));
        (dir, store, package)
    }

    /// Set `path`'s mtime back to `like`'s, as `touch -r` would.
    fn restore_mtime(path: &Path, like: &std::fs::Metadata) {
        use std::os::unix::fs::MetadataExt;
        let spec = nix::sys::time::TimeSpec::new(like.mtime(), like.mtime_nsec());
        nix::sys::stat::utimensat(
            nix::fcntl::AT_FDCWD,
            path,
            &spec,
            &spec,
            nix::sys::stat::UtimensatFlags::NoFollowSymlink,
        )
        .unwrap();
    }

    /// A crash between removing a package's manifest and its shared tree
    /// leaves the tree without its package: the next collection removes
    /// it (and its seal); a named package keeps its tree.
    #[test]
    fn a_tree_whose_package_went_goes_with_the_next_collection() {
        let (_dir, store, package) = fixture();
        store.put_package(&package).unwrap();
        let tree = store.package_tree(&package).unwrap();
        let named = std::collections::BTreeSet::from([package.digest().to_string()]);
        assert_eq!(store.collect(&named, false).unwrap().freed_bytes, 0);
        assert!(tree.exists());
        std::fs::remove_file(store.package_path(package.digest())).unwrap();
        let dry = store.collect(&named, true).unwrap();
        assert!(dry.freed_bytes >= ENTRY_BYTES as u64, "{dry:?}");
        assert!(tree.exists(), "a dry run changes nothing");
        let collected = store.collect(&named, false).unwrap();
        assert_eq!(collected.freed_bytes, dry.freed_bytes);
        assert!(!tree.exists());
        assert!(!store.seal_path(package.digest()).exists());
    }

    #[test]
    fn an_unchanged_sealed_tree_is_used_without_reading_its_bytes() {
        let (_dir, store, package) = fixture();
        let tree = store.package_tree(&package).unwrap();
        let seal = store.seal_path(package.digest());
        let mode = std::fs::metadata(&seal).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "the seal is owner-private");
        let before = read_by_this_thread();
        assert_eq!(store.package_tree(&package).unwrap(), tree);
        let read = read_by_this_thread() - before;
        assert!(read < ENTRY_BYTES as u64 / 4, "read {read} bytes");
        // Without its seal, the same use compares every byte.
        std::fs::remove_file(&seal).unwrap();
        let before = read_by_this_thread();
        store.package_tree(&package).unwrap();
        assert!(read_by_this_thread() - before >= ENTRY_BYTES as u64);
        assert!(seal.exists(), "sealed again");
    }

    #[test]
    fn an_edit_in_place_with_its_mtime_restored_fails_closed() {
        let (_dir, store, package) = fixture();
        let tree = store.package_tree(&package).unwrap();
        let entry = tree.join("flow.bin");
        let original = std::fs::metadata(&entry).unwrap();
        let mut bytes = std::fs::read(&entry).unwrap();
        bytes[ENTRY_BYTES / 2] ^= 0xff;
        std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(&entry, &bytes).unwrap();
        std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o555)).unwrap();
        restore_mtime(&entry, &original);
        for _ in 0..2 {
            let err = store.package_tree(&package).unwrap_err();
            assert_eq!(err.code(), "PROJECT_STATE_INVALID", "{err}");
        }
        assert_eq!(std::fs::read(&entry).unwrap(), bytes, "never repaired");
    }

    #[test]
    fn a_changed_stamp_over_the_same_bytes_is_compared_and_sealed_again() {
        let (_dir, store, package) = fixture();
        let tree = store.package_tree(&package).unwrap();
        let entry = tree.join("flow.bin");
        std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o555)).unwrap();
        let before = read_by_this_thread();
        store.package_tree(&package).unwrap();
        assert!(
            read_by_this_thread() - before >= ENTRY_BYTES as u64,
            "compared"
        );
        let before = read_by_this_thread();
        store.package_tree(&package).unwrap();
        assert!(
            read_by_this_thread() - before < ENTRY_BYTES as u64 / 4,
            "sealed"
        );
    }

    #[test]
    fn an_extra_file_or_a_corrupt_seal_is_not_trusted() {
        let (_dir, store, package) = fixture();
        let tree = store.package_tree(&package).unwrap();
        let seal = store.seal_path(package.digest());
        // A seal that is not one: the bytes are compared, then it is made again.
        std::fs::write(&seal, b"{\"stamps\": 1}").unwrap();
        let before = read_by_this_thread();
        store.package_tree(&package).unwrap();
        assert!(read_by_this_thread() - before >= ENTRY_BYTES as u64);
        // A seal another user could have written is not read.
        std::fs::set_permissions(&seal, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(read_seal(&seal).is_none());
        std::fs::set_permissions(&seal, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(read_seal(&seal).is_some());
        // An added entry changes the directory's stamp, and the package.
        std::fs::write(tree.join("extra.txt"), "x").unwrap();
        let err = store.package_tree(&package).unwrap_err();
        assert_eq!(err.code(), "PROJECT_STATE_INVALID", "{err}");
    }
}
