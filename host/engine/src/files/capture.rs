//! Capture: read the operator's attachment folders once into memory.
//!
//! Every step below the root is `openat` with `O_NOFOLLOW` on a directory
//! descriptor already checked, so renaming or swapping a path component
//! while Jig reads cannot redirect it. The bytes captured are what the Run
//! sees; the live folders are never shown to Flow code.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use flow::digest::sha256_hex;
use flow::json::{ascii_quote, Value};
use nix::fcntl::{openat, AtFlags, OFlag};
use nix::sys::stat::{fstat, fstatat, FileStat, Mode, SFlag};

use super::{
    check_relative, is_protected, manifest_value, utf8_name, FilesError, Request, MAX_COMPONENTS,
    MAX_CONTENT_BYTES, MAX_ENTRIES, MAX_FILES,
};

/// One captured regular file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapturedFile {
    /// Relative to its attachment root, `/`-separated.
    pub path: String,
    pub bytes: Vec<u8>,
    pub sha256: String,
}

/// One read attachment's captured files.
#[derive(Debug, Clone)]
pub struct CapturedRoot {
    /// The root's resolved absolute path, for the `--out` overlap check.
    pub real: PathBuf,
    pub files: Vec<CapturedFile>,
}

/// Every read attachment of one Run.
#[derive(Debug, Clone, Default)]
pub struct Captured {
    pub roots: BTreeMap<String, CapturedRoot>,
}

impl Captured {
    /// The captured data identity: names, paths, lengths and SHA-256.
    pub fn manifest(&self) -> Value {
        let files = self
            .roots
            .iter()
            .map(|(name, root)| {
                let entries = root
                    .files
                    .iter()
                    .map(|f| (f.path.clone(), f.bytes.len() as u64, f.sha256.clone()))
                    .collect();
                (name.clone(), entries)
            })
            .collect();
        manifest_value(&files)
    }

    pub fn real_roots(&self) -> Vec<PathBuf> {
        self.roots.values().map(|r| r.real.clone()).collect()
    }
}

/// What every entry below a root must share with it: the device and the
/// mount (a bind mount of the same filesystem keeps the device).
struct Anchor {
    dev: u64,
    mount: Option<u64>,
}

/// The mount ID of an open file (`statx` `STATX_MNT_ID`), where the kernel
/// reports it.
fn mount_id(fd: &OwnedFd) -> Option<u64> {
    use nix::libc;
    // SAFETY: statx writes into the zeroed buffer we own; the empty path
    // with AT_EMPTY_PATH names the descriptor itself.
    let mut buf: libc::statx = unsafe { std::mem::zeroed() };
    let rc = unsafe {
        libc::statx(
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_MNT_ID,
            &mut buf,
        )
    };
    (rc == 0 && buf.stx_mask & libc::STATX_MNT_ID != 0).then_some(buf.stx_mnt_id)
}

impl Anchor {
    fn of(fd: &OwnedFd, stat: &FileStat) -> Anchor {
        Anchor {
            dev: stat.st_dev,
            mount: mount_id(fd),
        }
    }

    /// Refuse an opened entry on another device or mount.
    fn check(&self, fd: &OwnedFd, stat: &FileStat, rel: &str) -> Result<(), String> {
        if stat.st_dev != self.dev || mount_id(fd) != self.mount {
            return Err(format!("{} is on a nested mount", ascii_quote(rel)));
        }
        Ok(())
    }
}

/// Aggregate use across every read attachment.
struct Budget {
    files: usize,
    bytes: u64,
    entries: usize,
    started: std::time::Instant,
}

impl Budget {
    fn new() -> Budget {
        Budget {
            files: 0,
            bytes: 0,
            entries: 0,
            started: std::time::Instant::now(),
        }
    }

    /// Count one examined entry against the entry and time budgets.
    fn entry(&mut self) -> Result<(), String> {
        self.entries += 1;
        if self.entries > MAX_ENTRIES {
            return Err(format!(
                "more than {MAX_ENTRIES} entries; select exact files with --select"
            ));
        }
        if super::over_budget(self.started, super::CAPTURE_BUDGET) {
            return Err(format!(
                "capture took longer than {} s",
                super::CAPTURE_BUDGET.as_secs()
            ));
        }
        Ok(())
    }
}

/// Capture every root of `request` (relative paths resolved against `base`).
pub fn capture(request: &Request, base: &Path) -> Result<Captured, FilesError> {
    let mut budget = Budget::new();
    let mut captured = Captured::default();
    for (name, (dir, selectors)) in &request.roots {
        let at = |m: String| FilesError::invalid(format!("attachment {name}: {m}"));
        let (root, real, stat) = open_root(&base.join(dir)).map_err(at)?;
        let stat = Anchor::of(&root, &stat);
        let mut files = Vec::new();
        if selectors.is_empty() {
            walk(&root, "", &stat, &mut budget, &mut files).map_err(at)?;
        } else {
            for selector in selectors {
                select(&root, selector, &stat, &mut budget, &mut files).map_err(at)?;
            }
        }
        files.sort_by(|a, b| a.path.cmp(&b.path));
        captured
            .roots
            .insert(name.clone(), CapturedRoot { real, files });
    }
    Ok(captured)
}

/// Filesystems whose semantics capture and publication rely on.
pub(crate) fn supported_filesystem(fd: &OwnedFd) -> Result<(), String> {
    use nix::sys::statfs::{
        fstatfs, BTRFS_SUPER_MAGIC, EXT4_SUPER_MAGIC, TMPFS_MAGIC, XFS_SUPER_MAGIC,
    };
    let kind = fstatfs(fd)
        .map_err(|e| format!("cannot inspect its filesystem: {e}"))?
        .filesystem_type();
    if [
        EXT4_SUPER_MAGIC,
        XFS_SUPER_MAGIC,
        BTRFS_SUPER_MAGIC,
        TMPFS_MAGIC,
    ]
    .contains(&kind)
    {
        Ok(())
    } else {
        Err(format!(
            "it is on an unsupported filesystem (type {:#x}); use ext4, XFS, Btrfs, or tmpfs",
            kind.0
        ))
    }
}

/// The path a descriptor resolves to now (for overlap and protection checks).
pub(crate) fn fd_path(fd: &OwnedFd) -> Result<PathBuf, String> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map_err(|e| format!("cannot resolve an opened directory: {e}"))
}

/// Open an operator-named directory (its last component must not be a
/// symlink), resolve where it really is, and refuse other filesystems and
/// protected places. A refusal names no host path (as reference_texts.rs pins): the
/// caller names the attachment.
pub(crate) fn open_root(path: &Path) -> Result<(OwnedFd, PathBuf, FileStat), String> {
    let fd = nix::fcntl::open(
        path,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => "its directory is a symbolic link".to_string(),
        Ok(m) if !m.is_dir() => "it is not a directory".to_string(),
        _ => format!("its directory cannot be opened: {e}"),
    })?;
    supported_filesystem(&fd)?;
    let real = fd_path(&fd)?;
    if is_protected(&real) {
        return Err("its directory is in a protected place".into());
    }
    let stat = fstat(&fd).map_err(|e| format!("its directory cannot be inspected: {e}"))?;
    Ok((fd, real, stat))
}

fn kind(stat: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT
}

fn describe(stat: &FileStat) -> &'static str {
    match kind(stat) {
        SFlag::S_IFLNK => "a symbolic link",
        SFlag::S_IFIFO => "a FIFO",
        SFlag::S_IFSOCK => "a socket",
        SFlag::S_IFCHR | SFlag::S_IFBLK => "a device",
        SFlag::S_IFDIR => "a directory",
        _ => "not a regular file",
    }
}

/// `openat` of the directory `name` in `dir`, never through a symbolic link
/// (capture and delivery walk trees with it).
pub(super) fn open_dir_at(dir: &OwnedFd, name: &str) -> nix::Result<OwnedFd> {
    openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

/// `openat` of the file `name` in `dir` for reading, never through a
/// symbolic link, never blocking on a FIFO nor taking a terminal (capture
/// and delivery read files with it).
pub(super) fn open_file_at(dir: &OwnedFd, name: &str) -> nix::Result<OwnedFd> {
    openat(
        dir,
        name,
        OFlag::O_RDONLY
            | OFlag::O_NOFOLLOW
            | OFlag::O_NONBLOCK
            | OFlag::O_NOCTTY
            | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

/// Open a child directory of `parent` without following links, on the
/// same filesystem as the root (a different device is a nested mount).
fn open_dir(parent: &OwnedFd, leaf: &str, rel: &str, root: &Anchor) -> Result<OwnedFd, String> {
    let before = fstatat(parent, leaf, AtFlags::AT_SYMLINK_NOFOLLOW)
        .map_err(|e| format!("{}: {e}", ascii_quote(rel)))?;
    if kind(&before) != SFlag::S_IFDIR {
        return Err(format!("{} is {}", ascii_quote(rel), describe(&before)));
    }
    if before.st_dev != root.dev {
        return Err(format!("{} is on a nested mount", ascii_quote(rel)));
    }
    if leaf == ".jig" {
        return Err(format!("{} is protected project state", ascii_quote(rel)));
    }
    let fd =
        open_dir_at(parent, leaf).map_err(|e| format!("cannot open {}: {e}", ascii_quote(rel)))?;
    let after = fstat(&fd).map_err(|e| format!("{}: {e}", ascii_quote(rel)))?;
    if after.st_ino != before.st_ino || after.st_dev != before.st_dev {
        return Err(format!(
            "{} changed while it was captured",
            ascii_quote(rel)
        ));
    }
    root.check(&fd, &after, rel)?;
    Ok(fd)
}

fn walk(
    dir: &OwnedFd,
    prefix: &str,
    root: &Anchor,
    budget: &mut Budget,
    files: &mut Vec<CapturedFile>,
) -> Result<(), String> {
    let before = fstat(dir).map_err(|e| e.to_string())?;
    let listing = std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd()))
        .map_err(|e| format!("cannot list {}: {e}", ascii_quote(prefix)))?;
    let mut names = Vec::new();
    for entry in listing {
        let entry = entry.map_err(|e| format!("cannot list {}: {e}", ascii_quote(prefix)))?;
        budget.entry()?;
        let at = if prefix.is_empty() {
            "the root"
        } else {
            prefix
        };
        names.push(utf8_name(&entry.file_name(), &ascii_quote(at))?);
    }
    names.sort();
    for name in names {
        let rel = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        check_relative(&rel).map_err(|m| format!("{}: {m}", ascii_quote(&rel)))?;
        let stat = fstatat(dir, name.as_str(), AtFlags::AT_SYMLINK_NOFOLLOW)
            .map_err(|e| format!("{}: {e}", ascii_quote(&rel)))?;
        if kind(&stat) == SFlag::S_IFDIR {
            if rel.split('/').count() >= MAX_COMPONENTS {
                return Err(format!(
                    "{} is nested deeper than {MAX_COMPONENTS} components",
                    ascii_quote(&rel)
                ));
            }
            let child = open_dir(dir, &name, &rel, root)?;
            walk(&child, &rel, root, budget, files)?;
        } else {
            files.push(read_file(dir, &name, &rel, root, budget)?);
        }
    }
    let after = fstat(dir).map_err(|e| e.to_string())?;
    if (
        after.st_mtime,
        after.st_mtime_nsec,
        after.st_ctime,
        after.st_ctime_nsec,
    ) != (
        before.st_mtime,
        before.st_mtime_nsec,
        before.st_ctime,
        before.st_ctime_nsec,
    ) {
        return Err(format!(
            "{} changed while it was captured",
            ascii_quote(if prefix.is_empty() {
                "the root"
            } else {
                prefix
            })
        ));
    }
    Ok(())
}

/// One exact selector: walk its directory components, never listing them.
fn select(
    root_fd: &OwnedFd,
    selector: &str,
    root: &Anchor,
    budget: &mut Budget,
    files: &mut Vec<CapturedFile>,
) -> Result<(), String> {
    let components: Vec<&str> = selector.split('/').collect();
    let (leaf, dirs) = components.split_last().expect("split yields one part");
    let mut held: Option<OwnedFd> = None;
    for (i, component) in dirs.iter().enumerate() {
        let rel = components[..=i].join("/");
        let parent = held.as_ref().unwrap_or(root_fd);
        let next = open_dir(parent, component, &rel, root)?;
        held = Some(next);
    }
    budget.entry()?;
    let parent = held.as_ref().unwrap_or(root_fd);
    files.push(read_file(parent, leaf, selector, root, budget)?);
    Ok(())
}

fn read_file(
    dir: &OwnedFd,
    leaf: &str,
    rel: &str,
    root: &Anchor,
    budget: &mut Budget,
) -> Result<CapturedFile, String> {
    let shown = ascii_quote(rel);
    let before = fstatat(dir, leaf, AtFlags::AT_SYMLINK_NOFOLLOW).map_err(|e| match e {
        nix::errno::Errno::ENOENT => format!("{shown} does not exist"),
        e => format!("{shown}: {e}"),
    })?;
    if kind(&before) != SFlag::S_IFREG {
        return Err(format!("{shown} is {}", describe(&before)));
    }
    if before.st_nlink != 1 {
        return Err(format!("{shown} has {} hard links", before.st_nlink));
    }
    if before.st_dev != root.dev {
        return Err(format!("{shown} is on a nested mount"));
    }
    budget.files += 1;
    if budget.files > MAX_FILES {
        return Err(format!("more than {MAX_FILES} files"));
    }
    let size = before.st_size.max(0) as u64;
    let remaining = MAX_CONTENT_BYTES.saturating_sub(budget.bytes);
    budget.bytes += size;
    if budget.bytes > MAX_CONTENT_BYTES {
        // The reference's words, naming no path (tests/all/reference_texts.rs).
        return Err(format!(
            "the attached files exceed the remaining {remaining}-byte input budget \
             ({MAX_CONTENT_BYTES} bytes of content in all)"
        ));
    }
    let fd = open_file_at(dir, leaf).map_err(|e| format!("cannot open {shown}: {e}"))?;
    let opened = fstat(&fd).map_err(|e| format!("{shown}: {e}"))?;
    if opened.st_ino != before.st_ino || opened.st_dev != before.st_dev {
        return Err(format!("{shown} changed while it was captured"));
    }
    root.check(&fd, &opened, rel)?;
    let mut file = std::fs::File::from(fd);
    let mut bytes = Vec::with_capacity(size as usize);
    (&mut file)
        .take(size + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    let after = fstat(&file).map_err(|e| format!("{shown}: {e}"))?;
    if bytes.len() as u64 != size
        || after.st_size != before.st_size
        || (
            after.st_mtime,
            after.st_mtime_nsec,
            after.st_ctime,
            after.st_ctime_nsec,
        ) != (
            before.st_mtime,
            before.st_mtime_nsec,
            before.st_ctime,
            before.st_ctime_nsec,
        )
        || after.st_nlink != 1
    {
        return Err(format!("{shown} changed while it was captured"));
    }
    Ok(CapturedFile {
        path: rel.to_string(),
        sha256: sha256_hex(&bytes),
        bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(dir: &Path, selectors: &[&str]) -> Request {
        let mut r = Request::default();
        r.roots.insert(
            "source".into(),
            (
                dir.to_path_buf(),
                selectors.iter().map(|s| s.to_string()).collect(),
            ),
        );
        r
    }

    fn error(dir: &Path, selectors: &[&str]) -> String {
        let e = capture(&request(dir, selectors), Path::new("/")).unwrap_err();
        assert_eq!(e.code(), "JIG_RUN_FILES_INVALID");
        e.message
    }

    #[test]
    fn binary_and_empty_files_are_kept_and_empty_dirs_omitted() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/empty")).unwrap();
        std::fs::write(dir.path().join("a/bin"), [0u8, 255, 10, 13]).unwrap();
        std::fs::write(dir.path().join("zero"), b"").unwrap();
        let captured = capture(&request(dir.path(), &[]), Path::new("/")).unwrap();
        let files = &captured.roots["source"].files;
        assert_eq!(files.len(), 2);
        assert_eq!(files[0].path, "a/bin");
        assert_eq!(files[0].bytes, vec![0u8, 255, 10, 13]);
        assert_eq!(files[1].path, "zero");
        assert!(files[1].bytes.is_empty());
        assert_eq!(
            files[1].sha256,
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn selection_never_lists_unselected_subtrees() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("keep")).unwrap();
        std::fs::write(dir.path().join("keep/x.txt"), b"x").unwrap();
        // Unselected content that enumeration would refuse.
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("link")).unwrap();
        let captured = capture(&request(dir.path(), &["keep/x.txt"]), Path::new("/")).unwrap();
        assert_eq!(captured.roots["source"].files.len(), 1);
        assert!(error(dir.path(), &[]).contains("symbolic link"));
    }

    #[test]
    fn links_special_files_and_missing_selections_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), b"x").unwrap();
        std::fs::hard_link(dir.path().join("f"), dir.path().join("g")).unwrap();
        assert!(error(dir.path(), &["f"]).contains("hard links"));
        let dir = tempfile::tempdir().unwrap();
        nix::unistd::mkfifo(&dir.path().join("fifo"), Mode::S_IRWXU).unwrap();
        assert!(error(dir.path(), &[]).contains("FIFO"));
        assert!(error(dir.path(), &["missing"]).contains("does not exist"));
        std::fs::create_dir(dir.path().join("d")).unwrap();
        assert!(error(dir.path(), &["d"]).contains("a directory"));
        std::os::unix::fs::symlink(dir.path().join("d"), dir.path().join("s")).unwrap();
        assert!(error(&dir.path().join("s"), &[]).contains("symbolic link"));
        assert!(error(dir.path(), &["s/x"]).contains("symbolic link"));
    }

    #[test]
    fn protected_roots_are_refused() {
        // /proc is refused first for its filesystem, in the reference's
        // words (host/tests/all/reference_texts.rs).
        assert!(error(Path::new("/proc"), &[]).contains("ext4, XFS, Btrfs, or tmpfs"));
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".jig/runs")).unwrap();
        assert!(error(&dir.path().join(".jig"), &[]).contains("protected"));
        assert!(error(dir.path(), &[]).contains("protected project state"));
    }

    #[test]
    fn file_count_at_and_past_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..MAX_FILES {
            std::fs::write(dir.path().join(format!("{i:02}")), b"").unwrap();
        }
        assert!(capture(&request(dir.path(), &[]), Path::new("/")).is_ok());
        std::fs::write(dir.path().join("extra"), b"").unwrap();
        assert!(error(dir.path(), &[]).contains("more than 64 files"));
    }

    #[test]
    fn content_bytes_at_and_past_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let half = (MAX_CONTENT_BYTES / 2) as usize;
        std::fs::write(dir.path().join("a"), vec![1u8; half]).unwrap();
        std::fs::write(dir.path().join("b"), vec![2u8; half]).unwrap();
        assert!(capture(&request(dir.path(), &[]), Path::new("/")).is_ok());
        std::fs::write(dir.path().join("c"), b"!").unwrap();
        assert!(error(dir.path(), &[]).contains("bytes of content"));
    }

    #[test]
    fn entries_at_and_past_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        // Empty directories count as entries but capture no files.
        for i in 0..MAX_ENTRIES {
            std::fs::create_dir(dir.path().join(format!("{i:03}"))).unwrap();
        }
        let captured = capture(&request(dir.path(), &[]), Path::new("/")).unwrap();
        assert!(captured.roots["source"].files.is_empty());
        std::fs::create_dir(dir.path().join("extra")).unwrap();
        assert!(error(dir.path(), &[]).contains("more than 256 entries"));
    }

    #[test]
    fn depth_at_and_past_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let at = vec!["d"; MAX_COMPONENTS - 1].join("/");
        std::fs::create_dir_all(dir.path().join(&at)).unwrap();
        std::fs::write(dir.path().join(&at).join("f"), b"deep").unwrap();
        let captured = capture(&request(dir.path(), &[]), Path::new("/")).unwrap();
        assert_eq!(
            captured.roots["source"].files[0].path.split('/').count(),
            16
        );
        std::fs::create_dir(dir.path().join(&at).join("e")).unwrap();
        assert!(error(dir.path(), &[]).contains("deeper than 16"));
    }

    #[test]
    fn non_utf8_and_nfd_names_are_malformed() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(std::ffi::OsStr::from_bytes(b"\xff")), b"").unwrap();
        assert!(error(dir.path(), &[]).contains("not UTF-8"));
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cafe\u{301}"), b"").unwrap();
        assert!(error(dir.path(), &[]).contains("NFC"));
    }

    #[test]
    fn equivalent_bytes_have_the_same_identity_whatever_the_spelling() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        std::fs::write(a.path().join("f"), b"same").unwrap();
        std::fs::write(b.path().join("f"), b"same").unwrap();
        let one = capture(&request(a.path(), &[]), Path::new("/")).unwrap();
        let two = capture(&request(b.path(), &["f"]), Path::new("/")).unwrap();
        assert_eq!(one.manifest(), two.manifest());
    }
}
