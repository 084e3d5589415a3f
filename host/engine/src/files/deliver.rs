//! The Run's side of files: the sealed read-only projection of captured
//! bytes, the validation of the writable attachment after the Run is
//! fenced, and the packet published with one no-replace rename.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use flow::digest::sha256_hex;
use flow::json::{ascii_quote, Value};
use nix::fcntl::{renameat2, AtFlags, OFlag, RenameFlags};
use nix::sys::stat::{fstatat, Mode};

use super::capture::{fd_path, open_dir_at, open_file_at};
use super::{
    check_relative, is_protected, utf8_name, Captured, CapturedFile, FilesError, MAX_COMPONENTS,
    MAX_ENTRIES, MAX_OUTPUT_BYTES, MAX_OUTPUT_FILES,
};

/// A delivered file: same shape as a captured one.
pub type OutputFile = CapturedFile;

/// Write each captured root under `dir/<name>` and make the trees read-only.
/// Returns the sealed path of each attachment.
pub fn seal(captured: &Captured, dir: &Path) -> std::io::Result<BTreeMap<String, PathBuf>> {
    let mut sealed = BTreeMap::new();
    for (name, root) in &captured.roots {
        let top = dir.join(name);
        std::fs::create_dir_all(&top)?;
        for file in &root.files {
            let target = top.join(&file.path);
            std::fs::create_dir_all(target.parent().expect("file has a parent"))?;
            std::fs::write(&target, &file.bytes)?;
        }
        set_modes(&top, 0o555, 0o444)?;
        sealed.insert(name.clone(), top);
    }
    Ok(sealed)
}

/// Set every directory under (and including) `top` to `dirs` and every
/// file to `files`, never following links.
fn set_modes(top: &Path, dirs: u32, files: u32) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(top)?;
    if meta.is_dir() {
        // Writable first, so the children can be reached and changed.
        std::fs::set_permissions(top, std::fs::Permissions::from_mode(0o700))?;
        for entry in std::fs::read_dir(top)? {
            set_modes(&entry?.path(), dirs, files)?;
        }
        std::fs::set_permissions(top, std::fs::Permissions::from_mode(dirs))?;
    } else if meta.is_file() {
        std::fs::set_permissions(top, std::fs::Permissions::from_mode(files))?;
    }
    Ok(())
}

/// Remove a tree that may hold read-only directories (sealed attachments,
/// or whatever a Flow left in its writable attachment). Most trees (a
/// Run's scratch and work directories) are writable throughout and go in
/// one pass; only one that refuses is made writable and removed again.
pub fn remove_tree(path: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
        Ok(meta) if !meta.is_dir() => return std::fs::remove_file(path),
        Ok(meta) if std::os::unix::fs::MetadataExt::mode(&meta) & 0o700 != 0o700 => {}
        Ok(_) => match std::fs::remove_dir_all(path) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {}
            Err(e) => return Err(e),
        },
    }
    set_modes(path, 0o700, 0o600)?;
    std::fs::remove_dir_all(path)
}

/// Validate the writable attachment's final tree and read it: at most
/// [`MAX_OUTPUT_FILES`] singly linked regular files, [`MAX_OUTPUT_BYTES`]
/// logical bytes, and capture's entry, depth and path limits.
pub fn read_output(dir: &Path) -> Result<Vec<OutputFile>, FilesError> {
    let fd = nix::fcntl::open(
        dir,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| FilesError::delivery(format!("the writable attachment cannot be opened: {e}")))?;
    read_output_fd(&fd)
}

/// [`read_output`] on the directory a trusted descriptor handoff retained
/// (the writable attachment's tmpfs, detached once the Run's mount
/// namespace is gone). Every step below `dir` is `openat` with
/// `O_NOFOLLOW`, so nothing the Run left can redirect the read.
pub(crate) fn read_output_fd(dir: &OwnedFd) -> Result<Vec<OutputFile>, FilesError> {
    let mut files = Vec::new();
    let mut entries = 0;
    let mut bytes = 0;
    let started = std::time::Instant::now();
    read_output_dir(dir, "", &mut entries, &mut bytes, &mut files, started)
        .map_err(|m| FilesError::delivery(format!("the writable attachment {m}")))?;
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// Read what a [`Handoff`] holds, then release it (which unmounts a
/// detached tmpfs). An empty handoff is a delivery failure: the Run's
/// writable attachment was never retained.
pub(crate) fn read_handoff(handoff: &Handoff) -> Result<Vec<OutputFile>, FilesError> {
    let fd = handoff.take().ok_or_else(|| {
        FilesError::delivery("the writable attachment was not handed back by the envelope")
    })?;
    read_output_fd(&fd)
}

/// The trusted descriptor handoff of the writable attachment: the
/// envelope puts the directory descriptor it retained here, delivery takes
/// it. Clones share the slot. Dropping the last holder of the descriptor
/// releases the bounded filesystem.
#[derive(Debug, Clone, Default)]
pub struct Handoff(std::sync::Arc<std::sync::Mutex<Option<OwnedFd>>>);

impl Handoff {
    pub fn new() -> Handoff {
        Handoff::default()
    }

    /// Keep `fd` (replacing and closing an earlier one).
    pub fn put(&self, fd: OwnedFd) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(fd);
    }

    pub fn take(&self) -> Option<OwnedFd> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    #[cfg(test)]
    fn is_held(&self) -> bool {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }
}

fn read_output_dir(
    dir: &OwnedFd,
    prefix: &str,
    entries: &mut usize,
    bytes: &mut u64,
    files: &mut Vec<OutputFile>,
    started: std::time::Instant,
) -> Result<(), String> {
    use nix::sys::stat::{fstat, SFlag};
    use std::io::Read;
    let mut names = Vec::new();
    let listing = std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd()))
        .map_err(|e| format!("cannot be listed: {e}"))?;
    for entry in listing {
        let entry = entry.map_err(|e| format!("cannot be listed: {e}"))?;
        *entries += 1;
        if *entries > MAX_ENTRIES {
            return Err(format!("has more than {MAX_ENTRIES} entries"));
        }
        if super::over_budget(started, super::DELIVERY_BUDGET) {
            return Err(format!(
                "took longer than {} s to deliver",
                super::DELIVERY_BUDGET.as_secs()
            ));
        }
        names.push(utf8_name(&entry.file_name(), "it")?);
    }
    names.sort();
    let kind = |mode: u32| SFlag::from_bits_truncate(mode & SFlag::S_IFMT.bits());
    for name in names {
        let rel = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        check_relative(&rel).map_err(|m| format!("has {}: {m}", ascii_quote(&rel)))?;
        let meta = fstatat(dir, name.as_str(), AtFlags::AT_SYMLINK_NOFOLLOW)
            .map_err(|e| format!("has {}: {e}", ascii_quote(&rel)))?;
        if kind(meta.st_mode) == SFlag::S_IFDIR {
            if rel.split('/').count() >= MAX_COMPONENTS {
                return Err(format!(
                    "nests {} deeper than {MAX_COMPONENTS} components",
                    ascii_quote(&rel)
                ));
            }
            let child = open_dir_at(dir, name.as_str())
                .map_err(|e| format!("cannot open {}: {e}", ascii_quote(&rel)))?;
            read_output_dir(&child, &rel, entries, bytes, files, started)?;
            continue;
        }
        if kind(meta.st_mode) != SFlag::S_IFREG {
            return Err(format!(
                "has {}, which is not a regular file",
                ascii_quote(&rel)
            ));
        }
        if meta.st_nlink != 1 {
            return Err(format!(
                "has {} with {} hard links",
                ascii_quote(&rel),
                meta.st_nlink
            ));
        }
        if files.len() >= MAX_OUTPUT_FILES {
            return Err(format!("has more than {MAX_OUTPUT_FILES} files"));
        }
        let size = meta.st_size.max(0) as u64;
        *bytes += size;
        if *bytes > MAX_OUTPUT_BYTES {
            return Err(format!("holds more than {MAX_OUTPUT_BYTES} bytes"));
        }
        let fd = open_file_at(dir, name.as_str())
            .map_err(|e| format!("cannot open {}: {e}", ascii_quote(&rel)))?;
        let opened = fstat(&fd).map_err(|e| e.to_string())?;
        if opened.st_ino != meta.st_ino || opened.st_dev != meta.st_dev {
            return Err(format!(
                "has {}, which changed while it was read",
                ascii_quote(&rel)
            ));
        }
        let mut content = Vec::with_capacity(size as usize);
        std::fs::File::from(fd)
            .take(size + 1)
            .read_to_end(&mut content)
            .map_err(|e| format!("cannot read {}: {e}", ascii_quote(&rel)))?;
        if content.len() as u64 != size {
            return Err(format!(
                "has {}, which changed while it was read",
                ascii_quote(&rel)
            ));
        }
        files.push(OutputFile {
            path: rel,
            sha256: sha256_hex(&content),
            bytes: content,
        });
    }
    Ok(())
}

/// A checked `--out` destination: an absent leaf beneath an opened parent.
#[derive(Debug)]
pub struct Destination {
    parent: OwnedFd,
    leaf: String,
    /// The absolute destination, as reported to the operator.
    pub absolute: PathBuf,
}

/// Check `--out` before dispatch: the leaf must be absent beneath an
/// existing parent, outside every selected input root and protected state.
pub fn prepare_destination(out: &Path, input_roots: &[PathBuf]) -> Result<Destination, FilesError> {
    let leaf = match out.file_name().map(|n| utf8_name(n, "--out")) {
        Some(Ok(leaf)) if check_relative(&leaf).is_ok() => leaf,
        _ => {
            return Err(FilesError::output_invalid(
                "--out must end in a new directory name",
            ))
        }
    };
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let parent_fd = nix::fcntl::open(
        &parent,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| {
        FilesError::output_invalid(format!(
            "the parent of --out is not an existing directory ({e})"
        ))
    })?;
    let real_parent = fd_path(&parent_fd).map_err(FilesError::output_invalid)?;
    let absolute = real_parent.join(&leaf);
    match fstatat(&parent_fd, leaf.as_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(_) => {
            return Err(FilesError::output_exists(
                "--out already exists; choose a new directory",
            ))
        }
        Err(nix::errno::Errno::ENOENT) => {}
        Err(e) => {
            return Err(FilesError::output_invalid(format!(
                "cannot inspect --out: {e}"
            )))
        }
    }
    if is_protected(&absolute) {
        return Err(FilesError::output_invalid("--out is in a protected place"));
    }
    if input_roots.iter().any(|r| absolute.starts_with(r)) {
        return Err(FilesError::output_invalid(
            "--out is inside an attached input folder",
        ));
    }
    super::capture::supported_filesystem(&parent_fd)
        .map_err(|m| FilesError::output_invalid(format!("--out: {m}")))?;
    Ok(Destination {
        parent: parent_fd,
        leaf,
        absolute,
    })
}

/// A destination in Jig's own protected state (a daemon's packet store):
/// `leaf` must be absent beneath `parent`, which Jig created. The operator
/// checks of [`prepare_destination`] (protected places, input overlap) do
/// not apply: no operator names this path.
pub fn private_destination(parent: &Path, leaf: &str) -> Result<Destination, FilesError> {
    check_relative(leaf).map_err(|m| {
        FilesError::output_invalid(format!("packet name {}: {m}", ascii_quote(leaf)))
    })?;
    let parent_fd = nix::fcntl::open(
        parent,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| FilesError::delivery(format!("cannot open the packet store: {e}")))?;
    let absolute = fd_path(&parent_fd)
        .map_err(FilesError::delivery)?
        .join(leaf);
    Ok(Destination {
        parent: parent_fd,
        leaf: leaf.to_string(),
        absolute,
    })
}

/// Publish `files/` and `result.json` as the destination, atomically and
/// without replacing anything. On any failure nothing is left behind.
pub fn publish(
    destination: &Destination,
    files: &[OutputFile],
    result: &Value,
) -> Result<(), FilesError> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let staging_name = format!(
        ".{}.jig-staging-{}-{nanos}",
        destination.leaf,
        std::process::id()
    );
    // Descriptor-anchored: the parent opened before dispatch, not its path.
    let parent = PathBuf::from(format!("/proc/self/fd/{}", destination.parent.as_raw_fd()));
    let staging = parent.join(&staging_name);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&staging)
        .map_err(|e| FilesError::delivery(format!("cannot create the staging directory: {e}")))?;
    let written = write_packet(&staging, files, result).and_then(|()| {
        renameat2(
            &destination.parent,
            staging_name.as_str(),
            &destination.parent,
            destination.leaf.as_str(),
            RenameFlags::RENAME_NOREPLACE,
        )
        .map_err(|e| match e {
            nix::errno::Errno::EEXIST | nix::errno::Errno::ENOTEMPTY => {
                FilesError::output_exists("--out appeared during the Run; nothing was published")
            }
            e => FilesError::delivery(format!("cannot publish the packet: {e}")),
        })
    });
    if written.is_err() {
        let _ = remove_tree(&staging);
    }
    written
}

/// A packet's `result.json`: the Run identity and what ran (`method`:
/// target, exact package, Binding), the accepted execution terminal, the
/// input identity, the delivery manifest (Flow files only, never the
/// record itself) with the source of those bytes (`final`, `checkpoint`
/// or `none`), and the checkpoint record or null.
pub fn packet_record(
    run_id: &str,
    method: &Value,
    execution: &Value,
    input: &Value,
    source: &str,
    files: &[OutputFile],
    checkpoint: &Value,
) -> Value {
    let manifest: Vec<Value> = files
        .iter()
        .map(|f| serde_json::json!({"path": f.path, "length": f.bytes.len(), "sha256": f.sha256}))
        .collect();
    serde_json::json!({
        "runId": run_id,
        "target": method["target"],
        "package": method["package"],
        "binding": method["binding"],
        "execution": execution,
        "input": input,
        "delivery": {"status": "written", "source": source, "files": manifest},
        "checkpoint": checkpoint,
    })
}

fn write_packet(staging: &Path, files: &[OutputFile], result: &Value) -> Result<(), FilesError> {
    let fail = |e: std::io::Error| FilesError::delivery(format!("cannot write the packet: {e}"));
    let mut dirs = std::fs::DirBuilder::new();
    dirs.mode(0o700);
    let root = staging.join("files");
    dirs.create(&root).map_err(fail)?;
    for file in files {
        let target = root.join(&file.path);
        let mut at = root.clone();
        let components: Vec<&str> = file.path.split('/').collect();
        for component in &components[..components.len() - 1] {
            at.push(component);
            if !at.is_dir() {
                dirs.create(&at).map_err(fail)?;
                std::fs::set_permissions(&at, std::fs::Permissions::from_mode(0o700))
                    .map_err(fail)?;
            }
        }
        write_new(&target, &file.bytes).map_err(fail)?;
    }
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700)).map_err(fail)?;
    let mut record = flow::json::canonical(result);
    record.push(b'\n');
    write_new(&staging.join("result.json"), &record).map_err(fail)?;
    std::fs::set_permissions(staging, std::fs::Permissions::from_mode(0o700)).map_err(fail)?;
    Ok(())
}

fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)?;
    file.write_all(bytes)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::os::unix::fs::MetadataExt;

    fn file(path: &str, bytes: &[u8]) -> OutputFile {
        OutputFile {
            path: path.into(),
            bytes: bytes.to_vec(),
            sha256: sha256_hex(bytes),
        }
    }

    #[test]
    fn a_packet_is_published_with_private_modes() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("packet");
        let destination = prepare_destination(&out, &[]).unwrap();
        publish(
            &destination,
            &[file("a/b.txt", b"hi"), file("top", b"")],
            &json!({"k": 1}),
        )
        .unwrap();
        let mode = |p: &str| std::fs::metadata(out.join(p)).unwrap().mode() & 0o777;
        assert_eq!(mode(""), 0o700);
        assert_eq!(mode("files"), 0o700);
        assert_eq!(mode("files/a"), 0o700);
        assert_eq!(mode("files/a/b.txt"), 0o600);
        assert_eq!(mode("files/top"), 0o600);
        assert_eq!(mode("result.json"), 0o600);
        assert_eq!(std::fs::read(out.join("files/a/b.txt")).unwrap(), b"hi");
        assert_eq!(
            std::fs::read(out.join("result.json")).unwrap(),
            b"{\"k\":1}\n"
        );
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            names,
            vec![std::ffi::OsString::from("packet")],
            "no staging left"
        );
    }

    #[test]
    fn a_destination_that_appears_meanwhile_is_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("packet");
        let destination = prepare_destination(&out, &[]).unwrap();
        std::fs::create_dir(&out).unwrap();
        std::fs::write(out.join("mine"), b"keep").unwrap();
        let err = publish(&destination, &[file("x", b"x")], &json!({})).unwrap_err();
        assert_eq!(err.code(), "JIG_OUTPUT_EXISTS");
        assert_eq!(std::fs::read(out.join("mine")).unwrap(), b"keep");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no staging left"
        );
    }

    #[test]
    fn destinations_are_checked_before_dispatch() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("exists")).unwrap();
        let code =
            |p: PathBuf, roots: &[PathBuf]| prepare_destination(&p, roots).unwrap_err().code();
        assert_eq!(code(dir.path().join("exists"), &[]), "JIG_OUTPUT_EXISTS");
        assert_eq!(
            code(dir.path().join("no/such/parent"), &[]),
            "JIG_OUTPUT_INVALID"
        );
        assert_eq!(code(dir.path().join(".jig"), &[]), "JIG_OUTPUT_INVALID");
        assert_eq!(
            code(PathBuf::from("/proc/jig-out"), &[]),
            "JIG_OUTPUT_INVALID"
        );
        assert_eq!(
            code(dir.path().join("exists/new"), &[dir.path().join("exists")]),
            "JIG_OUTPUT_INVALID"
        );
        assert_eq!(code(dir.path().join(".."), &[]), "JIG_OUTPUT_INVALID");
        std::os::unix::fs::symlink("/nonexistent", dir.path().join("dangling")).unwrap();
        assert_eq!(code(dir.path().join("dangling"), &[]), "JIG_OUTPUT_EXISTS");
    }

    #[test]
    fn sealed_trees_are_read_only_and_removable() {
        let source = tempfile::tempdir().unwrap();
        std::fs::create_dir(source.path().join("d")).unwrap();
        std::fs::write(source.path().join("d/f"), b"bytes").unwrap();
        let mut request = super::super::Request::default();
        request
            .roots
            .insert("source".into(), (source.path().to_path_buf(), vec![]));
        let captured = super::super::capture(&request, Path::new("/")).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let sealed = seal(&captured, dir.path()).unwrap();
        let top = &sealed["source"];
        assert_eq!(std::fs::read(top.join("d/f")).unwrap(), b"bytes");
        assert_eq!(
            std::fs::metadata(top.join("d")).unwrap().mode() & 0o777,
            0o555
        );
        assert_eq!(
            std::fs::metadata(top.join("d/f")).unwrap().mode() & 0o777,
            0o444
        );
        remove_tree(dir.path()).unwrap();
        assert!(!dir.path().exists());
    }

    #[test]
    fn output_files_at_and_past_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..MAX_OUTPUT_FILES {
            std::fs::write(dir.path().join(format!("{i:02}")), b"o").unwrap();
        }
        assert_eq!(read_output(dir.path()).unwrap().len(), MAX_OUTPUT_FILES);
        std::fs::write(dir.path().join("extra"), b"o").unwrap();
        let err = read_output(dir.path()).unwrap_err();
        assert_eq!(err.code(), "JIG_DELIVERY_FAILED");
        assert!(err.message.contains("more than 64 files"), "{err}");
    }

    #[test]
    fn output_bytes_at_and_past_the_limit_counting_sparse_length() {
        let dir = tempfile::tempdir().unwrap();
        let f = std::fs::File::create(dir.path().join("sparse")).unwrap();
        f.set_len(MAX_OUTPUT_BYTES).unwrap();
        assert_eq!(
            read_output(dir.path()).unwrap()[0].bytes.len() as u64,
            MAX_OUTPUT_BYTES
        );
        f.set_len(MAX_OUTPUT_BYTES + 1).unwrap();
        let err = read_output(dir.path()).unwrap_err();
        assert!(err.message.contains("more than 16777216 bytes"), "{err}");
    }

    #[test]
    fn output_entries_and_depth_at_and_past_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..MAX_ENTRIES {
            std::fs::create_dir(dir.path().join(format!("{i:03}"))).unwrap();
        }
        assert!(read_output(dir.path()).unwrap().is_empty());
        std::fs::create_dir(dir.path().join("extra")).unwrap();
        let err = read_output(dir.path()).unwrap_err();
        assert!(err.message.contains("more than 256 entries"), "{err}");

        let dir = tempfile::tempdir().unwrap();
        let at = vec!["d"; MAX_COMPONENTS - 1].join("/");
        std::fs::create_dir_all(dir.path().join(&at)).unwrap();
        std::fs::write(dir.path().join(&at).join("f"), b"x").unwrap();
        assert_eq!(
            read_output(dir.path()).unwrap()[0].path.split('/').count(),
            16
        );
        std::fs::create_dir(dir.path().join(&at).join("e")).unwrap();
        let err = read_output(dir.path()).unwrap_err();
        assert!(err.message.contains("deeper than 16"), "{err}");
    }

    #[test]
    fn a_handoff_is_read_once_through_its_descriptor() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("d")).unwrap();
        std::fs::write(dir.path().join("d/f"), b"kept").unwrap();
        let handoff = Handoff::new();
        let empty = read_handoff(&handoff).unwrap_err();
        assert_eq!(empty.code(), "JIG_DELIVERY_FAILED");
        assert!(empty.message.contains("not handed back"), "{empty}");
        let fd = nix::fcntl::open(
            dir.path(),
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .unwrap();
        handoff.clone().put(fd);
        assert!(handoff.is_held(), "clones share the slot");
        // The path no longer matters: the descriptor is what is read.
        let moved = dir.path().with_extension("moved");
        std::fs::rename(dir.path(), &moved).unwrap();
        let files = read_handoff(&handoff).unwrap();
        std::fs::rename(&moved, dir.path()).unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(
            (files[0].path.as_str(), files[0].bytes.as_slice()),
            ("d/f", &b"kept"[..])
        );
        assert!(!handoff.is_held(), "taken once");
    }

    #[test]
    fn output_links_and_special_files_reject_delivery() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("l")).unwrap();
        assert!(read_output(dir.path())
            .unwrap_err()
            .message
            .contains("not a regular file"));
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), b"").unwrap();
        std::fs::hard_link(dir.path().join("a"), dir.path().join("b")).unwrap();
        assert!(read_output(dir.path())
            .unwrap_err()
            .message
            .contains("hard links"));
    }
}
