//! Staging a mutable directory into a private logical file map.
//!
//! Every open is relative to an already-open directory descriptor with
//! `O_NOFOLLOW`, so a symlink swapped in mid-walk is refused rather than
//! followed. Each file's identity and timestamps are compared before and
//! after its read, and each directory's timestamps before its listing and
//! after its walk; a detected change restarts the walk, a bounded number of
//! times. This detects changes; it is not an atomic snapshot. Multiply linked files are accepted only when every link was found
//! inside the walked tree.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use nix::dir::{Dir, Type};
use nix::errno::Errno;
use nix::fcntl::{open, openat, OFlag};
use nix::sys::stat::{fstat, FileStat, Mode, SFlag};

use super::{add_to_total, check_file_count, check_file_size, codes, PackageError, MAX_FILE_BYTES};

/// How many times a walk is restarted after a detected concurrent change.
pub const MAX_STAGE_ATTEMPTS: usize = 4;

enum Walk {
    Done(BTreeMap<String, Vec<u8>>),
    Changed(String),
}

pub(super) fn read_tree(
    dir: &Path,
    exclude: &dyn Fn(&str) -> bool,
) -> Result<BTreeMap<String, Vec<u8>>, PackageError> {
    let mut last_change = String::new();
    for _ in 0..MAX_STAGE_ATTEMPTS {
        match walk(dir, exclude)? {
            Walk::Done(files) => return Ok(files),
            Walk::Changed(path) => last_change = path,
        }
    }
    Err(PackageError::at(
        codes::PACKAGE_SOURCE_CHANGED,
        &last_change,
        format!("the source kept changing during {MAX_STAGE_ATTEMPTS} staging attempts"),
    ))
}

fn io_error(path: &str, errno: Errno) -> PackageError {
    PackageError::at(codes::PACKAGE_IO, path, format!("cannot read: {errno}"))
}

/// What identifies one read of a file: if any of it changes, so may content.
#[derive(PartialEq, Eq, Clone, Copy)]
struct Snapshot {
    dev: u64,
    ino: u64,
    size: i64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    nlink: u64,
}

// `stat` field types differ between platforms; the casts are not no-ops everywhere.
#[allow(clippy::unnecessary_cast)]
impl From<&FileStat> for Snapshot {
    fn from(st: &FileStat) -> Self {
        Snapshot {
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
            size: st.st_size as i64,
            mtime: (st.st_mtime as i64, st.st_mtime_nsec as i64),
            ctime: (st.st_ctime as i64, st.st_ctime_nsec as i64),
            nlink: st.st_nlink as u64,
        }
    }
}

struct State<'e> {
    exclude: &'e dyn Fn(&str) -> bool,
    files: BTreeMap<String, Vec<u8>>,
    total: u64,
    /// (dev, ino) -> (links expected, paths found).
    links: HashMap<(u64, u64), (u64, Vec<String>)>,
}

fn walk(dir: &Path, exclude: &dyn Fn(&str) -> bool) -> Result<Walk, PackageError> {
    let root = open(
        dir,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| io_error("", e))?;
    let mut state = State {
        exclude,
        files: BTreeMap::new(),
        total: 0,
        links: HashMap::new(),
    };
    if let Some(changed) = walk_dir(root, "", 0, &mut state)? {
        return Ok(Walk::Changed(changed));
    }
    for (expected, paths) in state.links.values() {
        if (paths.len() as u64) != *expected {
            return Err(PackageError::at(
                codes::PACKAGE_HARDLINK,
                &paths[0],
                format!(
                    "file has {expected} links but only {} are inside the package tree",
                    paths.len()
                ),
            ));
        }
    }
    Ok(Walk::Done(state.files))
}

/// Walks one directory. Returns `Some(path)` when a change was detected.
fn walk_dir(
    fd: OwnedFd,
    prefix: &str,
    depth: usize,
    state: &mut State<'_>,
) -> Result<Option<String>, PackageError> {
    if depth > super::MAX_PATH_SEGMENTS {
        return Err(PackageError::at(
            codes::PACKAGE_PATH_INVALID,
            prefix,
            format!(
                "directory nesting exceeds {} segments",
                super::MAX_PATH_SEGMENTS
            ),
        ));
    }
    let dir_fd = fd.try_clone().map_err(|e| {
        PackageError::at(
            codes::PACKAGE_IO,
            prefix,
            format!("cannot duplicate descriptor: {e}"),
        )
    })?;
    // An entry added, removed or renamed while the directory is walked
    // changes its timestamps; that restarts the walk.
    let listed = fstat(dir_fd.as_fd()).map_err(|e| io_error(prefix, e))?;
    let mut dir = Dir::from_fd(fd).map_err(|e| io_error(prefix, e))?;
    let mut entries: Vec<(Vec<u8>, Option<Type>)> = Vec::new();
    for entry in dir.iter() {
        let entry = entry.map_err(|e| io_error(prefix, e))?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        entries.push((name.to_vec(), entry.file_type()));
    }
    for (name, kind) in entries {
        let Ok(name) = String::from_utf8(name) else {
            return Err(PackageError::at(
                codes::PACKAGE_PATH_INVALID,
                prefix,
                "a file name is not valid UTF-8",
            ));
        };
        let path = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        if (state.exclude)(&path) {
            continue;
        }
        if kind == Some(Type::Symlink) {
            return Err(PackageError::at(
                codes::PACKAGE_SYMLINK,
                &path,
                "symlinks are not package content",
            ));
        }
        // O_NONBLOCK keeps a FIFO from blocking the open; O_NOFOLLOW refuses
        // a symlink raced in after the listing.
        let opened = openat(
            dir_fd.as_fd(),
            name.as_str(),
            OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
            Mode::empty(),
        );
        let file = match opened {
            Ok(fd) => fd,
            Err(Errno::ELOOP) => {
                return Err(PackageError::at(
                    codes::PACKAGE_SYMLINK,
                    &path,
                    "symlinks are not package content",
                ))
            }
            Err(Errno::ENOENT) => return Ok(Some(path)),
            Err(Errno::ENXIO) => {
                return Err(PackageError::at(
                    codes::PACKAGE_SPECIAL_FILE,
                    &path,
                    "special files are not package content",
                ))
            }
            Err(e) => return Err(io_error(&path, e)),
        };
        let st = fstat(file.as_fd()).map_err(|e| io_error(&path, e))?;
        let format = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
        if format == SFlag::S_IFDIR {
            if let Some(changed) = walk_dir(file, &path, depth + 1, state)? {
                return Ok(Some(changed));
            }
            continue;
        }
        if format != SFlag::S_IFREG {
            return Err(PackageError::at(
                codes::PACKAGE_SPECIAL_FILE,
                &path,
                "special files are not package content",
            ));
        }
        check_file_count(state.files.len() + 1)?;
        let before = Snapshot::from(&st);
        check_file_size(&path, before.size.max(0) as u64)?;
        let mut content = Vec::with_capacity(before.size.max(0) as usize);
        let mut reader = std::fs::File::from(file);
        // Read at most one byte past the limit so growth is noticed.
        (&mut reader)
            .take(MAX_FILE_BYTES + 1)
            .read_to_end(&mut content)
            .map_err(|e| PackageError::at(codes::PACKAGE_IO, &path, format!("cannot read: {e}")))?;
        let after = fstat(reader.as_fd()).map_err(|e| io_error(&path, e))?;
        if Snapshot::from(&after) != before || content.len() as u64 != before.size as u64 {
            return Ok(Some(path));
        }
        state.total = add_to_total(state.total, content.len() as u64)?;
        if before.nlink > 1 {
            state
                .links
                .entry((before.dev, before.ino))
                .or_insert_with(|| (before.nlink, Vec::new()))
                .1
                .push(path.clone());
        }
        state.files.insert(path, content);
    }
    let walked = fstat(dir_fd.as_fd()).map_err(|e| io_error(prefix, e))?;
    let (before, after) = (Snapshot::from(&listed), Snapshot::from(&walked));
    if before.mtime != after.mtime || before.ctime != after.ctime {
        return Ok(Some(prefix.to_owned()));
    }
    Ok(None)
}
