//! No-follow views of the project directory. Every lookup walks the path one
//! segment at a time with `lstat`, so a symlinked ancestor is seen rather
//! than followed, and files are opened with `O_NOFOLLOW` and checked again on
//! the open descriptor. Races beyond that are caught by capture's re-read.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::{ProjectCode, ProjectError};

/// What a project path names, without following symlinks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Missing,
    Dir,
    File,
    Symlink,
    /// A device, FIFO, socket, or an ancestor that is not a directory.
    Other,
}

fn kind_of(meta: &fs::Metadata) -> Kind {
    let ft = meta.file_type();
    if ft.is_symlink() {
        Kind::Symlink
    } else if ft.is_dir() {
        Kind::Dir
    } else if ft.is_file() {
        Kind::File
    } else {
        Kind::Other
    }
}

fn lstat(path: &Path, rel: &str) -> Result<Kind, ProjectError> {
    match fs::symlink_metadata(path) {
        Ok(meta) => Ok(kind_of(&meta)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Kind::Missing),
        Err(e) if e.raw_os_error() == Some(nix::libc::ENOTDIR) => Ok(Kind::Other),
        Err(e) => Err(ProjectError::io(rel, &e)),
    }
}

/// The kind of canonical project path `rel`. A symlink anywhere on the way is
/// `PROJECT_UNSAFE`; a missing ancestor makes the path `Missing`.
pub(crate) fn lookup(root: &Path, rel: &str) -> Result<Kind, ProjectError> {
    let mut path = root.to_path_buf();
    let segments: Vec<&str> = rel.split('/').collect();
    for (i, segment) in segments.iter().enumerate() {
        path.push(segment);
        let kind = lstat(&path, rel)?;
        let last = i + 1 == segments.len();
        match kind {
            Kind::Symlink => {
                let through = segments[..=i].join("/");
                return Err(ProjectError::new(
                    ProjectCode::Unsafe,
                    format!(
                        "{} is a symlink; Jig never follows links in project sources",
                        crate::paths::escape(&through)
                    ),
                ));
            }
            Kind::Dir => {}
            _ if last => return Ok(kind),
            Kind::Missing => return Ok(Kind::Missing),
            _ => return Ok(Kind::Other),
        }
        if last {
            return Ok(Kind::Dir);
        }
    }
    Ok(Kind::Dir)
}

pub(crate) fn absolute(root: &Path, rel: &str) -> PathBuf {
    let mut path = root.to_path_buf();
    path.extend(rel.split('/'));
    path
}

/// Why a file could not be read.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// Missing or not a regular file.
    NotAFile(Kind),
    /// Larger than the caller's limit.
    TooLarge,
    /// A symlink on the way, or an I/O failure, already as a project error.
    Project(ProjectError),
}

/// Reads regular file `rel` (at most `limit` bytes) without following links.
pub(crate) fn read_file(root: &Path, rel: &str, limit: usize) -> Result<Vec<u8>, ReadError> {
    match lookup(root, rel).map_err(ReadError::Project)? {
        Kind::File => {}
        other => return Err(ReadError::NotAFile(other)),
    }
    let path = absolute(root, rel);
    let file: File = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(&path)
        .map_err(|e| match e.raw_os_error() {
            Some(nix::libc::ELOOP) => ReadError::NotAFile(Kind::Symlink),
            _ if e.kind() == io::ErrorKind::NotFound => ReadError::NotAFile(Kind::Missing),
            _ => ReadError::Project(ProjectError::io(rel, &e)),
        })?;
    let meta = file
        .metadata()
        .map_err(|e| ReadError::Project(ProjectError::io(rel, &e)))?;
    if !meta.file_type().is_file() {
        return Err(ReadError::NotAFile(kind_of(&meta)));
    }
    let mut bytes = Vec::new();
    file.take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ReadError::Project(ProjectError::io(rel, &e)))?;
    if bytes.len() > limit {
        return Err(ReadError::TooLarge);
    }
    Ok(bytes)
}

/// The immediate entries of directory `rel`, or `None` when it is missing.
/// Entries are `(name, kind)` sorted by name bytes.
pub(crate) fn list_dir(
    root: &Path,
    rel: &str,
) -> Result<Option<Vec<(OsString, Kind)>>, ProjectError> {
    match lookup(root, rel)? {
        Kind::Dir => {}
        Kind::Missing => return Ok(None),
        _ => {
            return Err(ProjectError::new(
                ProjectCode::DeclarationInvalid,
                format!(
                    "discovery root {} is not a directory",
                    crate::paths::escape(rel)
                ),
            ))
        }
    }
    let path = absolute(root, rel);
    let read = fs::read_dir(&path).map_err(|e| ProjectError::io(rel, &e))?;
    let mut entries = Vec::new();
    for entry in read {
        let entry = entry.map_err(|e| ProjectError::io(rel, &e))?;
        let kind = match entry.file_type() {
            Ok(ft) if ft.is_symlink() => Kind::Symlink,
            Ok(ft) if ft.is_dir() => Kind::Dir,
            Ok(ft) if ft.is_file() => Kind::File,
            Ok(_) => Kind::Other,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(ProjectError::io(rel, &e)),
        };
        entries.push((entry.file_name(), kind));
    }
    entries.sort_by(|a, b| a.0.as_encoded_bytes().cmp(b.0.as_encoded_bytes()));
    Ok(Some(entries))
}
