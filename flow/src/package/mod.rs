//! FLOW Package/1: one immutable logical file tree, its `FLOW.md` metadata,
//! its optional root entrypoint, its conventional schemas, and its digest.
//!
//! A [`Package`] is built from an in-memory file map or staged from a
//! directory; either way every rule is checked before the value exists, so
//! holding a `Package` means holding a valid, privately staged tree.

mod casefold;
mod error;
mod metadata;
// The contract module checks channel contract references with the same rule.
pub(crate) mod path;
// Directory staging needs POSIX descriptors; the in-memory model and the
// digest stay available everywhere (the Rust SDK builds flow for wasm32-wasip1).
#[cfg(unix)]
mod stage;

use std::collections::{BTreeMap, HashMap};

use sha2::{Digest, Sha256};

use crate::contract::{ChannelContract, Contract};
use crate::json::{self, Value};
use crate::schema::{escape_pointer_token, Diagnostic, Invalid, Schema};

pub use error::{codes, PackageError};
pub use metadata::{
    parse_metadata, Access, Metadata, Use, MAX_DESCRIPTION_CHARS, MAX_FRONTMATTER_BYTES,
    MAX_MAP_ENTRIES, MAX_METADATA_DEPTH, MAX_METADATA_NODES, MAX_SEQUENCE_ITEMS, RESERVED_OUTCOMES,
};
pub use path::{
    case_fold, check_author_reference, check_path, collision_key, MAX_PATH_BYTES,
    MAX_PATH_SEGMENTS, MAX_SEGMENT_BYTES,
};
#[cfg(unix)]
pub use stage::MAX_STAGE_ATTEMPTS;

/// Maximum regular files in one package.
pub const MAX_FILES: usize = 65_536;
/// Maximum bytes of one file.
pub const MAX_FILE_BYTES: u64 = 1_073_741_824;
/// Maximum sum of file contents.
pub const MAX_TOTAL_BYTES: u64 = 4_294_967_296;
/// Domain separator of the package digest.
pub const DIGEST_DOMAIN: &[u8] = b"FLOW-Package/1\0";
/// The required metadata file at the package root.
pub const FLOW_MD: &str = "FLOW.md";
/// Maximum characters of an entrypoint suffix.
pub const MAX_SUFFIX_CHARS: usize = 16;
/// Maximum characters of a shebang selector.
pub const MAX_SELECTOR_CHARS: usize = 64;
/// Conventional schema files.
pub const INPUT_SCHEMA: &str = "input.schema.json";
pub const SETTINGS_SCHEMA: &str = "settings.schema.json";
pub const RESULT_SCHEMA: &str = "result.schema.json";

/// The root implementation file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entrypoint {
    /// Logical path, e.g. `flow.py`.
    pub path: String,
    /// The suffix, e.g. `py`.
    pub suffix: String,
    /// From an exact `#!/usr/bin/env <selector>` first line.
    pub selector: Option<String>,
}

/// A valid, staged Package/1 tree.
#[derive(Debug, Clone)]
pub struct Package {
    files: BTreeMap<String, Vec<u8>>,
    digest: String,
    metadata: Metadata,
    entrypoint: Option<Entrypoint>,
    input_schema: Option<Schema>,
    settings_schema: Option<Schema>,
    result_schema: Option<Schema>,
    contracts: BTreeMap<String, Contract>,
    channel_contracts: BTreeMap<String, ChannelContract>,
}

impl Package {
    /// Stages a directory tree with descriptor-relative reads.
    #[cfg(unix)]
    pub fn stage_dir(dir: &std::path::Path) -> Result<Package, PackageError> {
        Package::stage_dir_excluding(dir, &|_| false)
    }

    /// Stages a directory tree, skipping logical paths (files or
    /// directories) for which `exclude` returns true. Exclusion is host
    /// policy; Package/1 itself has none.
    #[cfg(unix)]
    pub fn stage_dir_excluding(
        dir: &std::path::Path,
        exclude: &dyn Fn(&str) -> bool,
    ) -> Result<Package, PackageError> {
        let files = stage::read_tree(dir, exclude)?;
        Package::from_files(files)
    }

    /// Validates an in-memory logical file map.
    pub fn from_files(files: BTreeMap<String, Vec<u8>>) -> Result<Package, PackageError> {
        check_tree(&files)?;
        let Some(flow_md) = files.get(FLOW_MD) else {
            return Err(PackageError::new(
                codes::PACKAGE_FLOW_MISSING,
                "the package root has no exact-case FLOW.md",
            ));
        };
        let metadata = parse_metadata(flow_md)?;
        let entrypoint = entrypoint(&files)?;
        let schema = |name: &str| -> Result<Option<Schema>, PackageError> {
            files
                .get(name)
                .map(|bytes| {
                    Schema::compile_file(bytes).map_err(|e| PackageError {
                        code: e.code,
                        path: Some(name.to_owned()),
                        pointer: Some(e.pointer),
                        message: e.message,
                    })
                })
                .transpose()
        };
        let input_schema = schema(INPUT_SCHEMA)?;
        let settings_schema = schema(SETTINGS_SCHEMA)?;
        let result_schema = schema(RESULT_SCHEMA)?;

        let mut contracts = BTreeMap::new();
        for (slot, use_) in &metadata.uses {
            if let Use::Contract { path } = use_ {
                let bytes = referenced(&files, path, &format!("/uses/{slot}/contract"))?;
                let contract = Contract::parse(bytes).map_err(|e| PackageError {
                    code: e.code,
                    path: Some(path.clone()),
                    pointer: Some(e.pointer),
                    message: e.message,
                })?;
                contracts.insert(slot.clone(), contract);
            }
        }
        let mut channel_contracts = BTreeMap::new();
        for (name, decl) in &metadata.channels {
            if let Some(reference) = decl.get("contract").and_then(|r| r.as_str()) {
                let path = check_author_reference(reference)?;
                let bytes = referenced(&files, path, &format!("/channels/{name}/contract"))?;
                let contract = ChannelContract::parse(bytes).map_err(|e| PackageError {
                    code: e.code,
                    path: Some(path.to_owned()),
                    pointer: Some(e.pointer),
                    message: e.message,
                })?;
                channel_contracts.insert(name.clone(), contract);
            }
        }
        let digest = digest_files(&files);
        Ok(Package {
            files,
            digest,
            metadata,
            entrypoint,
            input_schema,
            settings_schema,
            result_schema,
            contracts,
            channel_contracts,
        })
    }

    /// `sha256:<64 hex>` Package/1 digest.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// Files by canonical path, in unsigned UTF-8 byte order.
    pub fn files(&self) -> &BTreeMap<String, Vec<u8>> {
        &self.files
    }

    pub fn into_files(self) -> BTreeMap<String, Vec<u8>> {
        self.files
    }

    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    pub fn entrypoint(&self) -> Option<&Entrypoint> {
        self.entrypoint.as_ref()
    }

    pub fn input_schema(&self) -> Option<&Schema> {
        self.input_schema.as_ref()
    }

    pub fn settings_schema(&self) -> Option<&Schema> {
        self.settings_schema.as_ref()
    }

    pub fn result_schema(&self) -> Option<&Schema> {
        self.result_schema.as_ref()
    }

    /// The compiled contract of `uses[slot]`, when it names one.
    pub fn contract(&self, slot: &str) -> Option<&Contract> {
        self.contracts.get(slot)
    }

    /// The compiled Channel Contract named by `channels[name].contract`.
    pub fn channel_contract(&self, name: &str) -> Option<&ChannelContract> {
        self.channel_contracts.get(name)
    }

    /// Resolves a `./` package-local author reference (for example a
    /// channel `contract` inside a used capability descriptor) to its staged
    /// bytes: exact path from the package root, no other normalization.
    pub fn resolve_reference(&self, reference: &str) -> Result<&[u8], PackageError> {
        let path = check_author_reference(reference)?;
        self.files.get(path).map(Vec::as_slice).ok_or_else(|| {
            PackageError::new(
                codes::METADATA_REFERENCE_INVALID,
                format!("referenced file {reference:?} is not in the package"),
            )
        })
    }

    /// Validates Run input: against `input.schema.json`, or, without one,
    /// any JSON/1 value. Report failures as `INVALID_INPUT`.
    pub fn validate_input(&self, input: &Value) -> Result<(), Invalid> {
        match &self.input_schema {
            Some(schema) => schema.validate(input),
            None => json::check(input).map_err(Invalid::Json),
        }
    }

    /// Validates Run settings: always a JSON object; against
    /// `settings.schema.json`, or, without one, exactly `{}`. Report
    /// failures as `INVALID_SETTINGS`.
    pub fn validate_settings(&self, settings: &Value) -> Result<(), Invalid> {
        let Value::Object(members) = settings else {
            return Err(Invalid::Diagnostic(Diagnostic {
                instance_pointer: String::new(),
                schema_pointer: String::new(),
                keyword: None,
                message: "settings must be a JSON object".into(),
            }));
        };
        match &self.settings_schema {
            Some(schema) => schema.validate(settings),
            None => match members.keys().next() {
                None => Ok(()),
                Some(name) => Err(Invalid::Diagnostic(Diagnostic {
                    instance_pointer: format!("/{}", escape_pointer_token(name)),
                    schema_pointer: String::new(),
                    keyword: None,
                    message: format!("unexpected setting {}", Value::String(name.clone())),
                })),
            },
        }
    }

    /// Validates a complete `{outcome, output}` result against
    /// `result.schema.json` when present (the Run/1 envelope and declared
    /// outcome rules are the caller's). Report failures as `INVALID_RESULT`.
    pub fn validate_result(&self, result: &Value) -> Result<(), Invalid> {
        match &self.result_schema {
            Some(schema) => schema.validate(result),
            None => json::check(result).map_err(Invalid::Json),
        }
    }

    /// Total content bytes.
    pub fn total_bytes(&self) -> u64 {
        self.files.values().map(|c| c.len() as u64).sum()
    }
}

fn referenced<'f>(
    files: &'f BTreeMap<String, Vec<u8>>,
    path: &str,
    pointer: &str,
) -> Result<&'f [u8], PackageError> {
    files
        .get(path)
        .map(Vec::as_slice)
        .ok_or_else(|| PackageError {
            code: codes::METADATA_REFERENCE_INVALID,
            path: Some(FLOW_MD.to_owned()),
            pointer: Some(pointer.to_owned()),
            message: format!("referenced file \"./{path}\" is not in the package"),
        })
}

/// Rejects a tree with more than [`MAX_FILES`] files.
pub(crate) fn check_file_count(count: usize) -> Result<(), PackageError> {
    if count > MAX_FILES {
        return Err(PackageError::new(
            codes::PACKAGE_LIMIT_EXCEEDED,
            format!("the package has more than {MAX_FILES} files"),
        ));
    }
    Ok(())
}

/// Rejects a file over [`MAX_FILE_BYTES`].
pub(crate) fn check_file_size(path: &str, len: u64) -> Result<(), PackageError> {
    if len > MAX_FILE_BYTES {
        return Err(PackageError::at(
            codes::PACKAGE_LIMIT_EXCEEDED,
            path,
            format!("file exceeds {MAX_FILE_BYTES} bytes"),
        ));
    }
    Ok(())
}

/// Adds a file's length to the running total; counters never wrap.
pub(crate) fn add_to_total(total: u64, len: u64) -> Result<u64, PackageError> {
    total
        .checked_add(len)
        .filter(|t| *t <= MAX_TOTAL_BYTES)
        .ok_or_else(|| {
            PackageError::new(
                codes::PACKAGE_LIMIT_EXCEEDED,
                format!("file contents exceed {MAX_TOTAL_BYTES} bytes"),
            )
        })
}

/// Checks paths, collisions and the size ceilings of a logical file map.
fn check_tree(files: &BTreeMap<String, Vec<u8>>) -> Result<(), PackageError> {
    check_file_count(files.len())?;
    let mut total: u64 = 0;
    let mut keys: HashMap<String, (&str, bool)> = HashMap::with_capacity(files.len());
    for (path, content) in files {
        check_path(path)?;
        check_file_size(path, content.len() as u64)?;
        total = add_to_total(total, content.len() as u64)?;
        check_collisions(&mut keys, path)?;
    }
    Ok(())
}

/// Records `path` and every directory prefix under its collision key; a
/// second spelling of the same key, or one name used both as a file and as
/// a directory, is a collision.
fn check_collisions<'p>(
    keys: &mut HashMap<String, (&'p str, bool)>,
    path: &'p str,
) -> Result<(), PackageError> {
    let mut end = 0;
    loop {
        let next = path[end..].find('/').map(|i| end + i);
        let prefix = &path[..next.unwrap_or(path.len())];
        let is_dir = next.is_some();
        let key = collision_key(prefix);
        match keys.get(&key) {
            Some((existing, _)) if *existing != prefix => {
                return Err(PackageError::at(
                    codes::PACKAGE_PATH_COLLISION,
                    path,
                    format!("{prefix:?} collides with {existing:?} under case folding"),
                ))
            }
            Some((_, was_dir)) if *was_dir != is_dir => {
                return Err(PackageError::at(
                    codes::PACKAGE_PATH_COLLISION,
                    path,
                    format!("{prefix:?} is both a file and a directory"),
                ))
            }
            Some(_) => {}
            None => {
                keys.insert(key, (prefix, is_dir));
            }
        }
        match next {
            Some(i) => end = i + 1,
            None => return Ok(()),
        }
    }
}

/// Whether a root file name is `flow.<suffix>`; returns the suffix.
fn entrypoint_suffix(path: &str) -> Option<&str> {
    let suffix = path.strip_prefix("flow.")?;
    (!suffix.is_empty()
        && suffix.len() <= MAX_SUFFIX_CHARS
        && suffix
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()))
    .then_some(suffix)
}

fn entrypoint(files: &BTreeMap<String, Vec<u8>>) -> Result<Option<Entrypoint>, PackageError> {
    let mut found: Option<(&String, &str)> = None;
    for path in files.keys() {
        if let Some(suffix) = entrypoint_suffix(path) {
            if let Some((first, _)) = found {
                return Err(PackageError::at(
                    codes::PACKAGE_ENTRYPOINT_AMBIGUOUS,
                    path,
                    format!("both {first:?} and {path:?} are root implementations"),
                ));
            }
            found = Some((path, suffix));
        }
    }
    let Some((path, suffix)) = found else {
        return Ok(None);
    };
    let selector = shebang_selector(&files[path])
        .map_err(|m| PackageError::at(codes::PACKAGE_ENTRYPOINT_INVALID, path, m))?;
    Ok(Some(Entrypoint {
        path: path.clone(),
        suffix: suffix.to_owned(),
        selector,
    }))
}

/// Reads the selector of an exact `#!/usr/bin/env <selector>` first line.
pub fn shebang_selector(content: &[u8]) -> Result<Option<String>, String> {
    if !content.starts_with(b"#!") {
        return Ok(None);
    }
    let line_end = content
        .iter()
        .position(|b| *b == b'\n')
        .unwrap_or(content.len());
    let line = &content[..line_end];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let Some(selector) = line.strip_prefix(b"#!/usr/bin/env ") else {
        return Err("the first line must be exactly \"#!/usr/bin/env <selector>\"".into());
    };
    let valid = !selector.is_empty()
        && selector.len() <= MAX_SELECTOR_CHARS
        && selector[0].is_ascii_alphanumeric()
        && selector
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(b));
    if !valid {
        return Err(format!(
            "selector {:?} must match [A-Za-z0-9][A-Za-z0-9._+-]* (1 to {MAX_SELECTOR_CHARS} characters)",
            String::from_utf8_lossy(selector)
        ));
    }
    Ok(Some(
        String::from_utf8(selector.to_vec()).expect("ASCII selector"),
    ))
}

/// The Package/1 digest of a logical file map (paths assumed canonical).
pub fn digest_files(files: &BTreeMap<String, Vec<u8>>) -> String {
    let mut digest = PackageDigest::new(files.len() as u64);
    for (path, content) in files {
        digest.add_file(path, content.len() as u64);
        digest.update(content);
    }
    digest.finish()
}

/// A streaming Package/1 digest for callers that do not hold every file in
/// memory. Files must be added in unsigned UTF-8 path order, each followed
/// by exactly its declared content bytes.
pub struct PackageDigest {
    hasher: Sha256,
}

impl PackageDigest {
    pub fn new(file_count: u64) -> Self {
        let mut hasher = Sha256::new();
        hasher.update(DIGEST_DOMAIN);
        hasher.update(file_count.to_be_bytes());
        PackageDigest { hasher }
    }

    /// Starts one file record; its content follows through [`update`](Self::update).
    pub fn add_file(&mut self, path: &str, content_len: u64) {
        self.hasher.update([0x01]);
        self.hasher.update((path.len() as u32).to_be_bytes());
        self.hasher.update(path.as_bytes());
        self.hasher.update(content_len.to_be_bytes());
    }

    pub fn update(&mut self, content: &[u8]) {
        self.hasher.update(content);
    }

    /// `sha256:<64 lowercase hex>`.
    pub fn finish(self) -> String {
        crate::digest::finish(self.hasher)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_ceilings_at_and_past_the_limit() {
        assert!(check_file_count(MAX_FILES).is_ok());
        assert_eq!(
            check_file_count(MAX_FILES + 1).unwrap_err().code,
            codes::PACKAGE_LIMIT_EXCEEDED
        );
        assert!(check_file_size("a", MAX_FILE_BYTES).is_ok());
        assert_eq!(
            check_file_size("a", MAX_FILE_BYTES + 1).unwrap_err().code,
            codes::PACKAGE_LIMIT_EXCEEDED
        );
        assert_eq!(
            add_to_total(MAX_TOTAL_BYTES - 5, 5).unwrap(),
            MAX_TOTAL_BYTES
        );
        assert_eq!(
            add_to_total(MAX_TOTAL_BYTES - 5, 6).unwrap_err().code,
            codes::PACKAGE_LIMIT_EXCEEDED
        );
        // Counters do not wrap.
        assert!(add_to_total(u64::MAX, 1).is_err());
    }

    #[test]
    fn shebang_selectors() {
        assert_eq!(shebang_selector(b"print()").unwrap(), None);
        assert_eq!(
            shebang_selector(b"#!/usr/bin/env python3\n")
                .unwrap()
                .as_deref(),
            Some("python3")
        );
        assert_eq!(
            shebang_selector(b"#!/usr/bin/env bun\r\nx")
                .unwrap()
                .as_deref(),
            Some("bun")
        );
        assert_eq!(
            shebang_selector(b"#!/usr/bin/env node").unwrap().as_deref(),
            Some("node")
        );
        let max = format!("#!/usr/bin/env a{}\n", "b".repeat(MAX_SELECTOR_CHARS - 1));
        assert!(shebang_selector(max.as_bytes()).unwrap().is_some());
        let past = format!("#!/usr/bin/env a{}\n", "b".repeat(MAX_SELECTOR_CHARS));
        assert!(shebang_selector(past.as_bytes()).is_err());
        for bad in [
            &b"#!/usr/bin/python3\n"[..],
            b"#!/usr/bin/env -S python3\n",
            b"#!/usr/bin/env python3 -u\n",
            b"#!/usr/bin/env  python3\n",
            b"#! /usr/bin/env python3\n",
            b"#!/usr/bin/env\n",
            b"#!/usr/bin/env .py\n",
            b"#!/usr/bin/env $PY\n",
            b"#!/usr/bin/env py\r\r\n",
        ] {
            assert!(
                shebang_selector(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn entrypoint_names() {
        assert_eq!(entrypoint_suffix("flow.py"), Some("py"));
        assert_eq!(entrypoint_suffix("flow.wasm"), Some("wasm"));
        assert_eq!(
            entrypoint_suffix(&format!("flow.{}", "a".repeat(MAX_SUFFIX_CHARS))),
            Some("aaaaaaaaaaaaaaaa")
        );
        for not in [
            "flow.",
            "flow.PY",
            "flow.tar.gz",
            "flow",
            "Flow.py",
            "src/flow.py",
            "flow.p-y",
        ] {
            assert_eq!(entrypoint_suffix(not), None, "{not}");
        }
        assert_eq!(
            entrypoint_suffix(&format!("flow.{}", "a".repeat(MAX_SUFFIX_CHARS + 1))),
            None
        );
    }
}
