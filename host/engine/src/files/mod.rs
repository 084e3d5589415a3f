//! Root file Runs (seed 002 §8): what `--attach`, `--select` and `--out`
//! turn into. Capture reads the operator's folders once, descriptor-relative,
//! into bytes held by the command; [`seal`] projects those bytes into a
//! private read-only tree the Run sees (never the live host directory).
//! Delivery validates the writable attachment after the Run is fenced and
//! publishes the packet with one no-replace rename. Nothing here starts or
//! talks to Flow code.

pub mod archive;
mod capture;
mod deliver;

pub use capture::{capture, Captured, CapturedFile, CapturedRoot};
pub(crate) use deliver::read_handoff;
pub use deliver::Handoff;
pub use deliver::{
    packet_record, prepare_destination, private_destination, publish, read_output, remove_tree,
    seal, Destination, OutputFile,
};

use std::collections::BTreeMap;

use flow::json::{ascii_quote, Value};
use flow::package::Access;
use serde_json::json;

/// Declared attachments, including the writable one.
pub(crate) const MAX_ATTACHMENTS: usize = 8;
/// Regular files captured across every read attachment.
pub const MAX_FILES: usize = 64;
/// Content bytes captured across every read attachment.
pub(crate) const MAX_CONTENT_BYTES: u64 = 8 * 1024 * 1024;
/// Directory entries examined across every read attachment.
pub(crate) const MAX_ENTRIES: usize = 256;
/// Components of one relative path.
pub(crate) const MAX_COMPONENTS: usize = 16;
/// UTF-8 bytes of one relative path.
pub(crate) const MAX_PATH_BYTES: usize = 512;
/// Regular files the writable attachment may deliver.
pub(crate) const MAX_OUTPUT_FILES: usize = 64;
/// Logical bytes the writable attachment may deliver.
pub const MAX_OUTPUT_BYTES: u64 = 16 * 1024 * 1024;

/// Capture checks this private budget at each bounded operation.
pub(crate) const CAPTURE_BUDGET: std::time::Duration = std::time::Duration::from_secs(10);
/// Delivery (validation, copying, publication) checks this budget.
pub(crate) const DELIVERY_BUDGET: std::time::Duration = std::time::Duration::from_secs(20);

/// Has work started at `started` used up `budget`?
pub(crate) fn over_budget(started: std::time::Instant, budget: std::time::Duration) -> bool {
    started.elapsed() > budget
}

/// A refused file request or delivery, with its stable code ([`FilesError::code`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct FilesError {
    pub kind: FilesErrorKind,
    pub message: String,
}

/// What about a file Run failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilesErrorKind {
    /// `JIG_RUN_FILES_INVALID`: attachments that cannot be used.
    Invalid,
    /// `JIG_OUTPUT_INVALID`: an `--out` destination that cannot be used.
    OutputInvalid,
    /// `JIG_OUTPUT_EXISTS`: `--out` names something that exists.
    OutputExists,
    /// `JIG_DELIVERY_FAILED`: the packet could not be delivered.
    Delivery,
}

impl FilesError {
    fn new(kind: FilesErrorKind, message: impl Into<String>) -> FilesError {
        FilesError {
            kind,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> FilesError {
        FilesError::new(FilesErrorKind::Invalid, message)
    }

    pub(crate) fn output_invalid(message: impl Into<String>) -> FilesError {
        FilesError::new(FilesErrorKind::OutputInvalid, message)
    }

    pub(crate) fn output_exists(message: impl Into<String>) -> FilesError {
        FilesError::new(FilesErrorKind::OutputExists, message)
    }

    pub fn delivery(message: impl Into<String>) -> FilesError {
        FilesError::new(FilesErrorKind::Delivery, message)
    }

    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self.kind {
            FilesErrorKind::Invalid => "JIG_RUN_FILES_INVALID",
            FilesErrorKind::OutputInvalid => "JIG_OUTPUT_INVALID",
            FilesErrorKind::OutputExists => "JIG_OUTPUT_EXISTS",
            FilesErrorKind::Delivery => "JIG_DELIVERY_FAILED",
        }
    }
}

/// The parsed `--attach`/`--select` arguments: attachment name to the
/// operator's directory and its exact selectors. Parsing reads no files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    pub roots: BTreeMap<String, (std::path::PathBuf, Vec<String>)>,
}

impl Request {
    pub fn parse(attach: &[String], select: &[String]) -> Result<Request, FilesError> {
        let mut roots = BTreeMap::new();
        for arg in attach {
            let (name, dir) = split_mapping(arg, "--attach", "NAME=DIR")?;
            if roots
                .insert(
                    name.to_string(),
                    (std::path::PathBuf::from(dir), Vec::new()),
                )
                .is_some()
            {
                return Err(FilesError::invalid(format!(
                    "--attach {name} is given more than once"
                )));
            }
        }
        for arg in select {
            let (name, file) = split_mapping(arg, "--select", "NAME=FILE")?;
            let Some((_, selectors)) = roots.get_mut(name) else {
                return Err(FilesError::invalid(format!(
                    "--select {name}={file} has no matching --attach {name}=DIR"
                )));
            };
            check_relative(file).map_err(|m| {
                FilesError::invalid(format!("--select {name}={}: {m}", ascii_quote(file)))
            })?;
            if selectors.iter().any(|s| s == file) {
                return Err(FilesError::invalid(format!(
                    "--select {name}={} is given more than once",
                    ascii_quote(file)
                )));
            }
            selectors.push(file.to_string());
        }
        Ok(Request { roots })
    }
}

fn split_mapping<'a>(
    arg: &'a str,
    flag: &str,
    shape: &str,
) -> Result<(&'a str, &'a str), FilesError> {
    match arg.split_once('=') {
        Some((name, value)) if flow::wire::is_local_name(name) && !value.is_empty() => {
            Ok((name, value))
        }
        _ => Err(FilesError::invalid(format!(
            "{flag} {} is not {shape} with a local attachment name",
            ascii_quote(arg)
        ))),
    }
}

/// A relative path as capture and delivery accept it: UTF-8 in NFC, no
/// empty, `.` or `..` components, at most [`MAX_COMPONENTS`] components and
/// [`MAX_PATH_BYTES`] bytes.
pub fn check_relative(path: &str) -> Result<(), String> {
    if path.len() > MAX_PATH_BYTES {
        return Err(format!("the path is longer than {MAX_PATH_BYTES} bytes"));
    }
    if path.starts_with('/') {
        return Err("the path must be relative".into());
    }
    let mut count = 0;
    for component in path.split('/') {
        count += 1;
        match component {
            "" => return Err("the path has an empty component".into()),
            "." | ".." => return Err("the path must not traverse with . or ..".into()),
            _ => {}
        }
        if component.contains('\0') {
            return Err("the path contains NUL".into());
        }
    }
    if count > MAX_COMPONENTS {
        return Err(format!(
            "the path has more than {MAX_COMPONENTS} components"
        ));
    }
    if !unicode_normalization::is_nfc(path) {
        return Err("the path is not in Unicode NFC".into());
    }
    Ok(())
}

/// The tree a set of relative file paths makes, by delivery's entry rule:
/// its files and the distinct directories above them count together
/// against [`MAX_ENTRIES`], as they would when read back from a folder.
pub(crate) fn check_entries<'a>(paths: impl IntoIterator<Item = &'a str>) -> Result<(), String> {
    let mut entries = std::collections::BTreeSet::new();
    for path in paths {
        let mut at = path;
        entries.insert(at);
        while let Some((parent, _)) = at.rsplit_once('/') {
            entries.insert(parent);
            at = parent;
        }
    }
    if entries.len() > MAX_ENTRIES {
        return Err(format!(
            "the files and their directories make {} entries; at most {MAX_ENTRIES} are delivered",
            entries.len()
        ));
    }
    Ok(())
}

/// A name from a directory listing as UTF-8, or the malformed-path error.
pub(crate) fn utf8_name(name: &std::ffi::OsStr, at: &str) -> Result<String, String> {
    use std::os::unix::ffi::OsStrExt;
    std::str::from_utf8(name.as_bytes())
        .map(str::to_string)
        .map_err(|_| format!("{at} contains a name that is not UTF-8"))
}

/// Paths a Run's files may never come from or go to.
pub(crate) fn is_protected(path: &std::path::Path) -> bool {
    use std::path::Component;
    let mut components = path.components();
    if path.is_absolute() {
        components.next();
        if let Some(Component::Normal(first)) = components.next() {
            if ["proc", "sys", "dev", "run"].iter().any(|p| first == *p) {
                return true;
            }
        }
    }
    path.components()
        .any(|c| matches!(c, Component::Normal(n) if n == ".jig"))
}

/// `{name: [{path, length, sha256}]}`, names and paths in ordinal order:
/// the data identity of captured or delivered files.
pub(crate) fn manifest_value(files: &BTreeMap<String, Vec<(String, u64, String)>>) -> Value {
    let mut out = serde_json::Map::new();
    for (name, entries) in files {
        let mut entries = entries.clone();
        entries.sort();
        out.insert(
            name.clone(),
            Value::Array(
                entries
                    .into_iter()
                    .map(|(path, length, sha256)| {
                        json!({"path": path, "length": length, "sha256": sha256})
                    })
                    .collect(),
            ),
        );
    }
    Value::Object(out)
}

/// Match the request against the declared attachments. Returns the name of
/// the writable attachment, if one is declared.
pub(crate) fn check_request(
    declared: &BTreeMap<String, Access>,
    request: &Request,
    out: bool,
) -> Result<Option<String>, FilesError> {
    if declared.len() > MAX_ATTACHMENTS {
        return Err(FilesError::invalid(format!(
            "the target declares {} attachments; a Run supports at most {MAX_ATTACHMENTS}",
            declared.len()
        )));
    }
    let writable: Vec<&String> = declared
        .iter()
        .filter(|(_, a)| **a == Access::ReadWrite)
        .map(|(n, _)| n)
        .collect();
    if writable.len() > 1 {
        return Err(FilesError::invalid(
            "the target declares more than one read-write attachment; a Run has at most one",
        ));
    }
    for name in request.roots.keys() {
        match declared.get(name) {
            None => {
                let names: Vec<&str> = declared.keys().map(String::as_str).collect();
                return Err(FilesError::invalid(format!(
                    "--attach {name}: the target declares no attachment {name} (declared: {})",
                    if names.is_empty() {
                        "none".into()
                    } else {
                        names.join(", ")
                    }
                )));
            }
            Some(Access::ReadWrite) => {
                return Err(FilesError::invalid(format!(
                    "--attach {name}: {name} is the writable attachment; it starts empty and is delivered with --out DIR"
                )))
            }
            Some(Access::Read) => {}
        }
    }
    for (name, access) in declared {
        if *access == Access::Read && !request.roots.contains_key(name) {
            return Err(FilesError::invalid(format!(
                "supply exactly one --attach {name}=DIR for the declared read attachment {name}"
            )));
        }
    }
    let writable = writable.first().map(|n| n.to_string());
    if let Some(name) = &writable {
        if !out {
            return Err(FilesError::invalid(format!(
                "the target writes attachment {name}; give --out DIR to receive it"
            )));
        }
    }
    Ok(writable)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn mappings_parse_without_reading_files() {
        let request = Request::parse(
            &strings(&["source=/nonexistent/dir", "notes=rel"]),
            &strings(&["source=a/b.txt", "source=c"]),
        )
        .unwrap();
        assert_eq!(request.roots["source"].1, strings(&["a/b.txt", "c"]));
        assert!(request.roots["notes"].1.is_empty());
    }

    #[test]
    fn malformed_duplicate_and_orphan_mappings_are_refused() {
        let code =
            |a: &[&str], s: &[&str]| Request::parse(&strings(a), &strings(s)).unwrap_err().code();
        assert_eq!(code(&["source"], &[]), "JIG_RUN_FILES_INVALID");
        assert_eq!(code(&["source="], &[]), "JIG_RUN_FILES_INVALID");
        assert_eq!(code(&["bad name=x"], &[]), "JIG_RUN_FILES_INVALID");
        assert_eq!(code(&["a=x", "a=y"], &[]), "JIG_RUN_FILES_INVALID");
        assert_eq!(code(&["a=x"], &["b=f"]), "JIG_RUN_FILES_INVALID");
        assert_eq!(code(&["a=x"], &["a=f", "a=f"]), "JIG_RUN_FILES_INVALID");
        assert_eq!(code(&["a=x"], &["a=../f"]), "JIG_RUN_FILES_INVALID");
        assert_eq!(code(&["a=x"], &["a=/etc/passwd"]), "JIG_RUN_FILES_INVALID");
    }

    #[test]
    fn relative_paths_at_and_past_each_bound() {
        let at = vec!["d"; MAX_COMPONENTS].join("/");
        assert!(check_relative(&at).is_ok());
        assert!(check_relative(&format!("{at}/d")).is_err());
        let long = "x".repeat(MAX_PATH_BYTES);
        assert!(check_relative(&long).is_ok());
        assert!(check_relative(&format!("{long}x")).is_err());
        assert!(check_relative("a//b").is_err());
        assert!(check_relative("a/./b").is_err());
        assert!(check_relative("a/../b").is_err());
        assert!(check_relative("caf\u{e9}").is_ok());
        assert!(check_relative("cafe\u{301}").is_err(), "NFD is malformed");
    }

    #[test]
    fn entries_of_a_file_set_at_and_past_the_limit() {
        // 64 files, each under its own chain of directories.
        let at: Vec<String> = (0..MAX_ENTRIES / 4)
            .map(|i| format!("d{i}/e/f/file"))
            .collect();
        assert!(check_entries(at.iter().map(String::as_str)).is_ok());
        let mut past = at.clone();
        past.push("x".into());
        let err = check_entries(past.iter().map(String::as_str)).unwrap_err();
        assert!(err.contains("257 entries"), "{err}");
        // Shared directories count once.
        assert!(check_entries(["a/b/1", "a/b/2", "a/c"]).is_ok());
    }

    #[test]
    fn budgets_at_and_past_their_bound() {
        use std::time::{Duration, Instant};
        let now = Instant::now();
        assert!(!over_budget(now, CAPTURE_BUDGET));
        let past = now.checked_sub(CAPTURE_BUDGET + Duration::from_millis(1));
        if let Some(past) = past {
            assert!(over_budget(past, CAPTURE_BUDGET));
            assert!(!over_budget(past, DELIVERY_BUDGET));
        }
    }

    #[test]
    fn protected_paths() {
        for p in [
            "/proc/self",
            "/sys",
            "/dev/shm/x",
            "/run/user",
            "/p/.jig/runs",
            ".jig",
        ] {
            assert!(is_protected(std::path::Path::new(p)), "{p}");
        }
        for p in ["/home/ada/run", "/tmp/proc", "/p/jig", "/p/x.jig"] {
            assert!(!is_protected(std::path::Path::new(p)), "{p}");
        }
    }

    #[test]
    fn manifest_sorts_names_and_paths() {
        let mut files = BTreeMap::new();
        files.insert(
            "b".to_string(),
            vec![
                ("z".to_string(), 1, "h1".to_string()),
                ("a".to_string(), 0, "h0".to_string()),
            ],
        );
        assert_eq!(
            flow::json::canonical_string(&manifest_value(&files)),
            r#"{"b":[{"length":0,"path":"a","sha256":"h0"},{"length":1,"path":"z","sha256":"h1"}]}"#
        );
    }

    fn declared(items: &[(&str, Access)]) -> BTreeMap<String, Access> {
        items.iter().map(|(n, a)| (n.to_string(), *a)).collect()
    }

    fn request(names: &[&str]) -> Request {
        let mut r = Request::default();
        for n in names {
            r.roots
                .insert(n.to_string(), (std::path::PathBuf::from("/x"), vec![]));
        }
        r
    }

    #[test]
    fn every_read_attachment_needs_exactly_one_mapping() {
        let d = declared(&[
            ("source", Access::Read),
            ("deliverables", Access::ReadWrite),
        ]);
        assert_eq!(
            check_request(&d, &request(&["source"]), true).unwrap(),
            Some("deliverables".into())
        );
        let code = |r: &[&str], out: bool| check_request(&d, &request(r), out).unwrap_err().code();
        assert_eq!(code(&[], true), "JIG_RUN_FILES_INVALID");
        assert_eq!(code(&["source"], false), "JIG_RUN_FILES_INVALID");
        assert_eq!(code(&["source", "other"], true), "JIG_RUN_FILES_INVALID");
        assert_eq!(
            code(&["source", "deliverables"], true),
            "JIG_RUN_FILES_INVALID"
        );
        assert_eq!(
            check_request(&declared(&[]), &request(&[]), true).unwrap(),
            None
        );
    }

    #[test]
    fn declared_attachments_at_and_past_the_limit() {
        let names: Vec<String> = (0..=MAX_ATTACHMENTS).map(|i| format!("a{i}")).collect();
        let at: BTreeMap<String, Access> = names[..MAX_ATTACHMENTS]
            .iter()
            .map(|n| (n.clone(), Access::Read))
            .collect();
        let all: Vec<&str> = names[..MAX_ATTACHMENTS]
            .iter()
            .map(String::as_str)
            .collect();
        assert!(check_request(&at, &request(&all), false).is_ok());
        let mut past = at.clone();
        past.insert(names[MAX_ATTACHMENTS].clone(), Access::ReadWrite);
        let err = check_request(&past, &request(&all), true).unwrap_err();
        assert!(err.message.contains("at most 8"), "{err}");
    }
}
