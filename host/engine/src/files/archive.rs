//! File Runs through a daemon: attachments travel to it and the output
//! packet travels back as tar streams (`jig serve`, `jig run --server`).
//!
//! Reading a tar applies exactly the rules capture and delivery apply to
//! folders: only regular files and directories (links, devices and FIFOs are
//! refused), relative NFC paths without `.` or `..`, and the same file,
//! byte and entry limits, with the same codes. A tar is read from bytes
//! already bounded by its carrier; nothing is written to disk here.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::PathBuf;

use flow::digest::sha256_hex;
use flow::json::{ascii_quote, Value};

use super::{
    check_entries, check_relative, Captured, CapturedFile, CapturedRoot, FilesError, OutputFile,
    MAX_ATTACHMENTS, MAX_CONTENT_BYTES, MAX_ENTRIES, MAX_FILES, MAX_OUTPUT_BYTES, MAX_OUTPUT_FILES,
};

/// The submission document inside a file Run's tar.
pub(crate) const REQUEST_ENTRY: &str = "request.json";
/// Attachment `NAME`'s files are `attachments/NAME/PATH` in the tar.
pub(crate) const ATTACHMENTS_DIR: &str = "attachments";
/// A packet's record, beside its `files/` tree (as `--out` publishes it).
pub const RECORD_ENTRY: &str = "result.json";
pub const PACKET_FILES_DIR: &str = "files";

/// Tar framing one entry may add around its bytes: its header, a GNU long
/// name (header and a path of at most 1 KiB once prefixed) and padding.
pub(crate) const ENTRY_OVERHEAD: usize = 4 * 512;
/// The largest file Run submission: the JSON/1 request, every captured
/// byte, and framing for every entry and the two end blocks.
pub const MAX_SUBMISSION_BYTES: usize = flow::json::MAX_DOCUMENT_BYTES
    + MAX_CONTENT_BYTES as usize
    + (MAX_ENTRIES + MAX_ATTACHMENTS + 4) * ENTRY_OVERHEAD;
/// The largest packet: the record, every delivered byte, and framing.
pub const MAX_PACKET_BYTES: usize =
    flow::json::MAX_DOCUMENT_BYTES + MAX_OUTPUT_BYTES as usize + (MAX_ENTRIES + 4) * ENTRY_OVERHEAD;

/// One regular file or directory read from a tar, path without a trailing `/`.
enum Item {
    File(String, Vec<u8>),
    Dir(String),
}

/// Every entry of `bytes`, refusing anything but regular files and
/// directories, and names that are not UTF-8, with `error`'s code. The
/// caller checks each path below its prefix (`attachments/NAME/`,
/// `files/`) as capture and delivery check a relative path.
fn items(
    bytes: &[u8],
    error: fn(String) -> FilesError,
    max_bytes: u64,
) -> Result<Vec<Item>, FilesError> {
    let mut archive = tar::Archive::new(bytes);
    let entries = archive
        .entries()
        .map_err(|e| error(format!("the tar cannot be read: {e}")))?;
    let mut items = Vec::new();
    let mut total: u64 = 0;
    for entry in entries {
        let mut entry = entry.map_err(|e| error(format!("the tar cannot be read: {e}")))?;
        let raw = entry.path_bytes().into_owned();
        let path = std::str::from_utf8(&raw)
            .map_err(|_| error("the tar names a path that is not UTF-8".into()))?
            .to_string();
        let kind = entry.header().entry_type();
        let trimmed = path.strip_suffix('/').unwrap_or(&path).to_string();
        if items.len() >= MAX_ENTRIES + MAX_ATTACHMENTS + 2 {
            return Err(error(format!(
                "the tar has more than {MAX_ENTRIES} entries"
            )));
        }
        if kind.is_dir() {
            items.push(Item::Dir(trimmed));
        } else if kind.is_file() {
            let size = entry.size();
            total = total.saturating_add(size);
            if total > max_bytes {
                return Err(error(format!(
                    "the tar holds more than {max_bytes} content bytes"
                )));
            }
            let mut content = Vec::with_capacity(size as usize);
            entry
                .read_to_end(&mut content)
                .map_err(|e| error(format!("the tar cannot be read: {e}")))?;
            items.push(Item::File(trimmed, content));
        } else {
            return Err(error(format!(
                "tar entry {} is not a regular file or directory (links, devices and FIFOs are refused)",
                ascii_quote(&path)
            )));
        }
    }
    Ok(items)
}

/// A file Run submission: its JSON/1 request document and the captured
/// attachments, each name a local name with at most the capture limits.
pub fn read_submission(bytes: &[u8]) -> Result<(Vec<u8>, Captured), FilesError> {
    let invalid = FilesError::invalid;
    let mut request = None;
    let mut roots: BTreeMap<String, Vec<CapturedFile>> = BTreeMap::new();
    let mut entries = 0usize;
    let mut files = 0usize;
    // The request document is bounded by JSON/1, the rest by capture.
    let bound = MAX_CONTENT_BYTES + flow::json::MAX_DOCUMENT_BYTES as u64;
    for item in items(bytes, invalid, bound)? {
        let (path, content) = match item {
            Item::File(path, content) => (path, Some(content)),
            Item::Dir(path) => (path, None),
        };
        if path == REQUEST_ENTRY {
            let Some(content) = content else {
                return Err(invalid(format!("{REQUEST_ENTRY} must be a regular file")));
            };
            if request.replace(content).is_some() {
                return Err(invalid(format!("the tar holds {REQUEST_ENTRY} twice")));
            }
            continue;
        }
        if path == ATTACHMENTS_DIR && content.is_none() {
            continue;
        }
        let Some(rest) = path.strip_prefix("attachments/") else {
            return Err(invalid(format!(
                "tar entry {} is neither {REQUEST_ENTRY} nor under {ATTACHMENTS_DIR}/",
                ascii_quote(&path)
            )));
        };
        let (name, inner) = match rest.split_once('/') {
            Some((name, inner)) => (name, Some(inner)),
            None => (rest, None),
        };
        if !flow::wire::is_local_name(name) {
            return Err(invalid(format!(
                "tar entry {}: {} is not a local attachment name",
                ascii_quote(&path),
                ascii_quote(name)
            )));
        }
        let root = roots.entry(name.to_string()).or_default();
        let Some(inner) = inner else {
            if content.is_some() {
                return Err(invalid(format!(
                    "attachment {name} must be a directory in the tar"
                )));
            }
            continue;
        };
        check_relative(inner)
            .map_err(|m| invalid(format!("tar entry {}: {m}", ascii_quote(&path))))?;
        entries += 1;
        if entries > MAX_ENTRIES {
            return Err(invalid(format!(
                "the attachments have more than {MAX_ENTRIES} entries"
            )));
        }
        if let Some(bytes) = content {
            files += 1;
            if files > MAX_FILES {
                return Err(invalid(format!(
                    "the attachments have more than {MAX_FILES} files"
                )));
            }
            if root.iter().any(|f| f.path == inner) {
                return Err(invalid(format!(
                    "tar entry {} is given twice",
                    ascii_quote(&path)
                )));
            }
            root.push(CapturedFile {
                path: inner.to_string(),
                sha256: sha256_hex(&bytes),
                bytes,
            });
        }
    }
    if roots.len() > MAX_ATTACHMENTS {
        return Err(invalid(format!(
            "the tar carries {} attachments; a Run supports at most {MAX_ATTACHMENTS}",
            roots.len()
        )));
    }
    let content: u64 = roots.values().flatten().map(|f| f.bytes.len() as u64).sum();
    if content > MAX_CONTENT_BYTES {
        return Err(invalid(format!(
            "the attachments hold more than {MAX_CONTENT_BYTES} bytes"
        )));
    }
    for (name, files) in &roots {
        check_entries(files.iter().map(|f| f.path.as_str()))
            .map_err(|m| invalid(format!("attachment {name}: {m}")))?;
    }
    let request = request.ok_or_else(|| invalid(format!("the tar holds no {REQUEST_ENTRY}")))?;
    let roots = roots
        .into_iter()
        .map(|(name, mut files)| {
            files.sort_by(|a, b| a.path.cmp(&b.path));
            (
                name,
                CapturedRoot {
                    real: PathBuf::new(),
                    files,
                },
            )
        })
        .collect();
    Ok((request, Captured { roots }))
}

fn append(
    builder: &mut tar::Builder<Vec<u8>>,
    path: &str,
    bytes: Option<&[u8]>,
) -> std::io::Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_mtime(0);
    header.set_uid(0);
    header.set_gid(0);
    match bytes {
        Some(bytes) => {
            header.set_entry_type(tar::EntryType::Regular);
            header.set_mode(0o600);
            header.set_size(bytes.len() as u64);
            builder.append_data(&mut header, path, bytes)
        }
        None => {
            header.set_entry_type(tar::EntryType::Directory);
            header.set_mode(0o700);
            header.set_size(0);
            builder.append_data(&mut header, path, std::io::empty())
        }
    }
}

/// The tar a client submits: the request document and every captured root
/// (an empty root is its directory alone).
pub fn write_submission(request: &[u8], captured: &Captured) -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    append(&mut builder, REQUEST_ENTRY, Some(request))?;
    for (name, root) in &captured.roots {
        append(&mut builder, &format!("{ATTACHMENTS_DIR}/{name}"), None)?;
        for file in &root.files {
            append(
                &mut builder,
                &format!("{ATTACHMENTS_DIR}/{name}/{}", file.path),
                Some(&file.bytes),
            )?;
        }
    }
    builder.into_inner()
}

/// A published packet as a tar: `result.json` and `files/PATH`.
pub fn write_packet(files: &[OutputFile], record: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    append(&mut builder, RECORD_ENTRY, Some(record))?;
    append(&mut builder, PACKET_FILES_DIR, None)?;
    for file in files {
        append(
            &mut builder,
            &format!("{PACKET_FILES_DIR}/{}", file.path),
            Some(&file.bytes),
        )?;
    }
    builder.into_inner()
}

/// A packet downloaded from a daemon: its delivered files and record,
/// held to the delivery limits (`JIG_OUTPUT_INVALID` otherwise).
pub fn read_packet(bytes: &[u8]) -> Result<(Vec<OutputFile>, Value), FilesError> {
    let invalid = FilesError::output_invalid;
    let bound = MAX_OUTPUT_BYTES + flow::json::MAX_DOCUMENT_BYTES as u64;
    let mut record = None;
    let mut files: Vec<OutputFile> = Vec::new();
    for item in items(bytes, invalid, bound)? {
        match item {
            Item::File(path, content) if path == RECORD_ENTRY => {
                let value = flow::json::parse(&content)
                    .map_err(|e| invalid(format!("the packet record is not JSON/1: {e}")))?;
                if record.replace(value).is_some() {
                    return Err(invalid(format!("the packet holds {RECORD_ENTRY} twice")));
                }
            }
            Item::Dir(path) if path == PACKET_FILES_DIR => {}
            Item::Dir(path) if path.starts_with("files/") => {
                check_relative(&path["files/".len()..])
                    .map_err(|m| invalid(format!("packet entry {}: {m}", ascii_quote(&path))))?;
            }
            Item::File(path, content) if path.starts_with("files/") => {
                let inner = path["files/".len()..].to_string();
                check_relative(&inner)
                    .map_err(|m| invalid(format!("packet entry {}: {m}", ascii_quote(&path))))?;
                if files.iter().any(|f| f.path == inner) {
                    return Err(invalid(format!(
                        "the packet holds {} twice",
                        ascii_quote(&path)
                    )));
                }
                files.push(OutputFile {
                    path: inner,
                    sha256: sha256_hex(&content),
                    bytes: content,
                });
                if files.len() > MAX_OUTPUT_FILES {
                    return Err(invalid(format!(
                        "the packet holds more than {MAX_OUTPUT_FILES} files"
                    )));
                }
            }
            Item::File(path, _) | Item::Dir(path) => {
                return Err(invalid(format!(
                    "packet entry {} is neither {RECORD_ENTRY} nor under {PACKET_FILES_DIR}/",
                    ascii_quote(&path)
                )))
            }
        }
    }
    let size: u64 = files.iter().map(|f| f.bytes.len() as u64).sum();
    if size > MAX_OUTPUT_BYTES {
        return Err(invalid(format!(
            "the packet holds more than {MAX_OUTPUT_BYTES} bytes"
        )));
    }
    check_entries(files.iter().map(|f| f.path.as_str())).map_err(invalid)?;
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let record = record.ok_or_else(|| invalid(format!("the packet holds no {RECORD_ENTRY}")))?;
    Ok((files, record))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn captured(files: &[(&str, &str, usize)]) -> Captured {
        let mut captured = Captured::default();
        for (name, path, len) in files {
            let bytes = vec![b'x'; *len];
            captured
                .roots
                .entry(name.to_string())
                .or_insert_with(|| CapturedRoot {
                    real: PathBuf::new(),
                    files: Vec::new(),
                })
                .files
                .push(CapturedFile {
                    path: path.to_string(),
                    sha256: sha256_hex(&bytes),
                    bytes,
                });
        }
        captured
    }

    fn raw_tar(path: &[u8], kind: tar::EntryType, link: Option<&str>) -> Vec<u8> {
        let mut header = tar::Header::new_old();
        // Written as raw bytes so a hostile name is kept as given.
        header.as_old_mut().name[..path.len()].copy_from_slice(path);
        header.set_entry_type(kind);
        header.set_size(0);
        header.set_mode(0o600);
        if let Some(link) = link {
            header.set_link_name(link).unwrap();
        }
        header.set_cksum();
        let mut builder = tar::Builder::new(Vec::new());
        builder.append(&header, std::io::empty()).unwrap();
        builder.into_inner().unwrap()
    }

    #[test]
    fn a_submission_round_trips_with_its_manifest() {
        let sent = captured(&[("docs", "a/b.txt", 3), ("docs", "c", 0), ("more", "z", 1)]);
        let tar = write_submission(b"{\"target\":\"flow:x\"}", &sent).unwrap();
        let (request, got) = read_submission(&tar).unwrap();
        assert_eq!(request, b"{\"target\":\"flow:x\"}");
        assert_eq!(got.manifest(), sent.manifest());
        // An attachment with no files is kept, empty.
        let empty = Captured {
            roots: [(
                "docs".to_string(),
                CapturedRoot {
                    real: PathBuf::new(),
                    files: Vec::new(),
                },
            )]
            .into(),
        };
        let (_, got) = read_submission(&write_submission(b"{}", &empty).unwrap()).unwrap();
        assert!(got.roots["docs"].files.is_empty());
    }

    #[test]
    fn files_and_bytes_at_and_past_the_capture_limits() {
        let code = |c: &Captured| {
            read_submission(&write_submission(b"{}", c).unwrap())
                .map(|_| ())
                .map_err(|e| e.code())
        };
        let names: Vec<String> = (0..=MAX_FILES).map(|i| format!("f{i}")).collect();
        let at: Vec<(&str, &str, usize)> = names[..MAX_FILES]
            .iter()
            .map(|n| ("docs", n.as_str(), 1))
            .collect();
        assert_eq!(code(&captured(&at)), Ok(()));
        let past: Vec<(&str, &str, usize)> =
            names.iter().map(|n| ("docs", n.as_str(), 1)).collect();
        assert_eq!(code(&captured(&past)), Err("JIG_RUN_FILES_INVALID"));
        let full = MAX_CONTENT_BYTES as usize;
        assert_eq!(code(&captured(&[("docs", "big", full)])), Ok(()));
        assert_eq!(
            code(&captured(&[("docs", "big", full), ("docs", "one", 1)])),
            Err("JIG_RUN_FILES_INVALID")
        );
        assert!(
            write_submission(b"{}", &captured(&[("docs", "big", full)]))
                .unwrap()
                .len()
                <= MAX_SUBMISSION_BYTES
        );
    }

    #[test]
    fn the_largest_submission_and_packet_fit_their_body_bounds() {
        // Every file at the longest path, every byte used.
        let long = |i: usize| format!("{i:03}{}", "p".repeat(crate::files::MAX_PATH_BYTES - 3));
        let each = MAX_CONTENT_BYTES as usize / MAX_FILES;
        let names: Vec<String> = (0..MAX_FILES).map(long).collect();
        let files: Vec<(&str, &str, usize)> =
            names.iter().map(|n| ("docs", n.as_str(), each)).collect();
        let sent = captured(&files);
        let request = vec![b' '; flow::json::MAX_DOCUMENT_BYTES];
        let tar = write_submission(&request, &sent).unwrap();
        assert!(tar.len() <= MAX_SUBMISSION_BYTES, "{}", tar.len());
        assert!(read_submission(&tar).is_ok());
        // One byte or one component past the path limits is refused.
        let past = "p".repeat(crate::files::MAX_PATH_BYTES + 1);
        let deep = vec!["d"; crate::files::MAX_COMPONENTS + 1].join("/");
        for path in [past.as_str(), deep.as_str()] {
            let tar = write_submission(b"{}", &captured(&[("docs", path, 1)])).unwrap();
            let err = read_submission(&tar).unwrap_err();
            assert_eq!(err.code(), "JIG_RUN_FILES_INVALID");
        }
        let deep_at = vec!["d"; crate::files::MAX_COMPONENTS].join("/");
        let tar = write_submission(b"{}", &captured(&[("docs", &deep_at, 1)])).unwrap();
        assert!(read_submission(&tar).is_ok());
        let each = MAX_OUTPUT_BYTES as usize / MAX_OUTPUT_FILES;
        let files: Vec<(&str, &str, usize)> =
            names.iter().map(|n| ("o", n.as_str(), each)).collect();
        let output = captured(&files).roots["o"].files.clone();
        let tar = write_packet(&output, b"{}").unwrap();
        assert!(tar.len() <= MAX_PACKET_BYTES, "{}", tar.len());
        assert!(read_packet(&tar).is_ok());
    }

    #[test]
    fn traversal_links_and_devices_are_refused() {
        for (path, kind, link) in [
            (
                &b"attachments/docs/../../etc/passwd"[..],
                tar::EntryType::Regular,
                None,
            ),
            (b"/etc/passwd", tar::EntryType::Regular, None),
            (b"attachments/docs/./a", tar::EntryType::Regular, None),
            (
                b"attachments/docs/l",
                tar::EntryType::Symlink,
                Some("/etc/passwd"),
            ),
            (
                b"attachments/docs/h",
                tar::EntryType::Link,
                Some("request.json"),
            ),
            (b"attachments/docs/dev", tar::EntryType::Char, None),
            (b"attachments/docs/fifo", tar::EntryType::Fifo, None),
            (b"attachments/bad name/a", tar::EntryType::Regular, None),
            (b"elsewhere", tar::EntryType::Regular, None),
        ] {
            let err = read_submission(&raw_tar(path, kind, link)).err();
            assert_eq!(
                err.map(|e| e.code()),
                Some("JIG_RUN_FILES_INVALID"),
                "{}",
                String::from_utf8_lossy(path)
            );
        }
        // The same refusal for a packet, with delivery's code.
        let err = read_packet(&raw_tar(b"files/../x", tar::EntryType::Regular, None));
        assert_eq!(err.err().map(|e| e.code()), Some("JIG_OUTPUT_INVALID"));
    }

    #[test]
    fn a_packet_round_trips_and_is_held_to_the_delivery_limits() {
        let files = captured(&[("o", "a/b", 2), ("o", "c", 0)]).roots["o"]
            .files
            .clone();
        let tar = write_packet(&files, b"{\"runId\":\"r\"}").unwrap();
        let (got, record) = read_packet(&tar).unwrap();
        assert_eq!(got, files);
        assert_eq!(record["runId"], "r");
        let names: Vec<String> = (0..=MAX_OUTPUT_FILES).map(|i| format!("f{i}")).collect();
        let many: Vec<(&str, &str, usize)> = names.iter().map(|n| ("o", n.as_str(), 0)).collect();
        let many = captured(&many).roots["o"].files.clone();
        assert!(read_packet(&write_packet(&many[..MAX_OUTPUT_FILES], b"{}").unwrap()).is_ok());
        let err = read_packet(&write_packet(&many, b"{}").unwrap()).unwrap_err();
        assert_eq!(err.code(), "JIG_OUTPUT_INVALID");
    }
}
