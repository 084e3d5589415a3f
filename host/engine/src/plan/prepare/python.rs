//! Python dependency preparation at review: a `flow.py` package with a
//! `pylock.toml` (PEP 751) or a hash-pinned `requirements.txt` gets a
//! prepared Package/1 (its source plus the locked wheels installed under
//! `site-packages/`), made by pip inside the same envelope, limits and
//! identity rules as a Bun preparation. The Run puts `site-packages/` on
//! `sys.path`; it never installs anything.
//!
//! What pip is given is never the authored file: the lock is validated and
//! rewritten as `name==version --hash=sha256:…` lines, installed with
//! `--require-hashes --only-binary=:all: --no-deps` from the one index the
//! host configuration names, with no ambient configuration. Wheels only: no
//! sdist is built, no build script runs. Review never resolves a Python
//! graph: a `pyproject.toml` declaring dependencies without a lock is the
//! missing-lock state, and `--allow-resolution-network` does not change that
//! (`PACKAGE_PYTHON_RESOLUTION_UNSUPPORTED`), because resolving to hashes
//! would run the index's choice of sdists and build backends.
//!
//! Diagnostics sit at the lock (or at `pyproject.toml` when there is no
//! lock) with fixed guidance, never installer output.
//!
//! Before any of it, the same envelope (without network) compiles a new
//! `flow.py` with the host's Python, so one with a syntax error is refused
//! at review (`PACKAGE_ENTRYPOINT_INVALID`, its file, line and column)
//! instead of failing at its first Run.

use std::collections::BTreeMap;
use std::path::Path;

use flow::digest::sha256_digest;
use flow::json::Value;
use flow::package::Package;
use serde_json::json;

use super::{
    capture_tree, check_prepared_size, check_source_size, manifest::pointer_token, refusal,
    Refusal, Session, Workspace, MAX_LOCK_BYTES, MAX_MANIFEST_BYTES, MAX_PREPARED_FILES,
    NETWORK_FILES,
};
use crate::plan::Recipe;
use jig_sandbox::{Launch, Limits};

/// The index pip is given when the host configuration names none.
pub(crate) const DEFAULT_PYTHON_INDEX: &str = "https://pypi.org/simple/";
/// Where the installed wheels sit in the prepared package; the Python
/// recipe puts it on `sys.path` after the bundled SDK.
pub(crate) const PYTHON_SITE: &str = "site-packages";
pub(crate) const PYLOCK: &str = "pylock.toml";
pub(crate) const REQUIREMENTS: &str = "requirements.txt";
pub(crate) const PYPROJECT: &str = "pyproject.toml";
/// Locked requirements in one package (as many as it may have files).
pub(crate) const MAX_REQUIREMENTS: usize = MAX_PREPARED_FILES;
/// Bumped whenever pip's arguments or the capture rules change, so an
/// admitted preparation made another way is not reused.
const PREPARATION_RECIPE: &str = "jig-pip-preparation/1";

/// The codes of Python preparation, in the pattern of `PACKAGE_BUN_*`.
pub mod codes {
    pub(crate) const PREPARATION_FAILED: &str = "PACKAGE_PYTHON_PREPARATION_FAILED";
    pub(crate) const PERMISSION_REQUIRED: &str = "PACKAGE_PYTHON_RESOLUTION_PERMISSION_REQUIRED";
    pub(crate) const RESOLUTION_UNSUPPORTED: &str = "PACKAGE_PYTHON_RESOLUTION_UNSUPPORTED";
    pub(crate) const LOCK_INVALID: &str = "PACKAGE_PYTHON_LOCK_INVALID";
    pub(crate) const LOCK_STALE: &str = "PACKAGE_PYTHON_LOCK_STALE";
    pub(crate) const SOURCE_UNSUPPORTED: &str = "PACKAGE_PYTHON_SOURCE_UNSUPPORTED";
    pub(crate) const MANIFEST_INVALID: &str = "PACKAGE_PYTHON_MANIFEST_INVALID";
    pub(crate) const LIMIT_EXCEEDED: &str = "PACKAGE_PYTHON_LIMIT_EXCEEDED";
}

/// One locked requirement: what pip is told to install, exactly.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Locked {
    /// PEP 503 normalised name.
    name: String,
    version: String,
    /// An environment marker, passed to pip as written.
    marker: Option<String>,
    /// Lowercase hex SHA-256 digests of the acceptable wheels.
    hashes: Vec<String>,
}

impl Locked {
    fn line(&self) -> String {
        let mut line = format!("{}=={}", self.name, self.version);
        if let Some(marker) = &self.marker {
            line.push_str(&format!(" ; {marker}"));
        }
        for hash in &self.hashes {
            line.push_str(&format!(" --hash=sha256:{hash}"));
        }
        line
    }
}

/// A dependency `pyproject.toml` declares: its name and version specifier.
#[derive(Debug)]
struct Declared {
    name: String,
    specifier: String,
    has_marker: bool,
}

type Prepared = Option<(Value, Option<Package>)>;

impl Session<'_> {
    /// Prepare or reuse one `flow.py` package: `None` when it declares and
    /// locks nothing.
    pub(super) fn python_package(
        &mut self,
        path: &str,
        package: &Package,
        recipe: &Recipe,
    ) -> Result<Prepared, Refusal> {
        self.check_syntax(path, package, recipe)?;
        let files = package.files();
        let lock_name = match (files.contains_key(PYLOCK), files.contains_key(REQUIREMENTS)) {
            (true, true) => {
                return Err(refusal(
                    codes::LOCK_INVALID,
                    &format!("{path}/{PYLOCK}"),
                    None,
                    "the package has both pylock.toml and requirements.txt; keep one lock",
                ))
            }
            (true, false) => Some(PYLOCK),
            (false, true) => Some(REQUIREMENTS),
            (false, false) => None,
        };
        let manifest_at = format!("{path}/{PYPROJECT}");
        let declared = match files.get(PYPROJECT) {
            Some(bytes) => declared_dependencies(bytes, &manifest_at)?,
            None => Vec::new(),
        };
        let Some(lock_name) = lock_name else {
            if declared.is_empty() {
                return Ok(None);
            }
            return Err(if self.request.allow_resolution_network {
                refusal(
                    codes::RESOLUTION_UNSUPPORTED,
                    &manifest_at,
                    None,
                    "review does not resolve Python dependencies, even with \
                     --allow-resolution-network; supply a pylock.toml or a hash-pinned \
                     requirements.txt of wheels",
                )
            } else {
                refusal(
                    codes::PERMISSION_REQUIRED,
                    &manifest_at,
                    None,
                    "pyproject.toml declares dependencies and the package has no lock; supply \
                     a pylock.toml or a hash-pinned requirements.txt of wheels",
                )
            });
        };
        let at = format!("{path}/{lock_name}");
        let bytes = &files[lock_name];
        if bytes.len() > MAX_LOCK_BYTES {
            return Err(refusal(
                codes::LIMIT_EXCEEDED,
                &at,
                None,
                &format!("{lock_name} is larger than 2 MiB"),
            ));
        }
        let index = index(self.request.config);
        let locked = if lock_name == PYLOCK {
            parse_pylock(bytes, &index, &at)?
        } else {
            parse_requirements(bytes, &at)?
        };
        check_lock_current(&locked, &declared, &at)?;
        if locked.is_empty() {
            return Ok(None);
        }
        if files
            .keys()
            .any(|name| name.starts_with(&format!("{PYTHON_SITE}/")))
        {
            return Err(refusal(
                codes::SOURCE_UNSUPPORTED,
                &at,
                None,
                "site-packages/ is where the prepared wheels go; the package must not author it",
            ));
        }
        check_source_size(files, codes::LIMIT_EXCEEDED, &at)?;
        let recipe_digest = self.python_recipe_digest(recipe, &index);
        if let Some(previous) = self.reuse(path, package.digest(), &recipe_digest, &at)? {
            return Ok(Some((previous, None)));
        }
        self.take_preparation(codes::LIMIT_EXCEEDED, &at)?;
        let runtime = recipe.runtime.clone().ok_or_else(|| {
            refusal(
                codes::PREPARATION_FAILED,
                &at,
                None,
                "no python3 on this host",
            )
        })?;
        let prepared = self.pip_install(package, &locked, &runtime, &index, &at)?;
        self.take_prepared_bytes(&prepared, codes::LIMIT_EXCEEDED, &at)?;
        let evidence = json!({
            "digest": prepared.digest(),
            "source": package.digest(),
            "recipe": recipe_digest,
            "lock": "authored",
        });
        Ok(Some((evidence, Some(prepared))))
    }

    /// Refuse a `flow.py` that this host's Python cannot compile, at review
    /// rather than at its first Run: [`COMPILE_SCRIPT`] compiles it (runs
    /// nothing of it) in the preparation envelope, without network. A
    /// package admitted with these exact bytes was checked then; a host
    /// without Python or an envelope cannot run the package either, and is
    /// not checked here (its Runs are refused).
    fn check_syntax(
        &mut self,
        path: &str,
        package: &Package,
        recipe: &Recipe,
    ) -> Result<(), Refusal> {
        let admitted = self.request.admitted.and_then(|plan| {
            plan.pointer(&format!("/lock/packages/{}/digest", pointer_token(path)))
        });
        if admitted == Some(&json!(package.digest())) {
            return Ok(());
        }
        let (Some(source), Some(runtime)) = (package.files().get(ENTRYPOINT), &recipe.runtime)
        else {
            return Ok(());
        };
        let at = format!("{path}/{ENTRYPOINT}");
        let Ok(sandbox) = self.sandbox_for(codes::PREPARATION_FAILED, &at) else {
            return Ok(());
        };
        let failed = |message: &str| refusal(codes::PREPARATION_FAILED, &at, None, message);
        let work =
            Workspace::new().map_err(|_| failed("cannot create the preparation directory"))?;
        std::fs::write(work.package.join(ENTRYPOINT), source)
            .and_then(|()| std::fs::create_dir_all(work.scratch.join("tmp")))
            .map_err(|_| failed("cannot stage flow.py"))?;
        let launch = compile_launch(runtime, &work);
        self.run_contained(
            &launch,
            &sandbox,
            codes::PREPARATION_FAILED,
            "Python could not check flow.py",
            &at,
        )?;
        let compiled = std::fs::read(work.package.join(COMPILED))
            .ok()
            .and_then(|bytes| flow::json::parse(&bytes).ok())
            .ok_or_else(|| failed("Python could not check flow.py"))?;
        let Some(message) = compiled.get("message").and_then(Value::as_str) else {
            return Ok(());
        };
        let place = match (
            compiled.get("line").and_then(Value::as_u64),
            compiled.get("column").and_then(Value::as_u64),
        ) {
            (Some(line), Some(column)) => format!("{at}:{line}:{column}"),
            (Some(line), None) => format!("{at}:{line}"),
            _ => at.clone(),
        };
        let message: String = message
            .chars()
            .take(MAX_COMPILE_MESSAGE_CHARS)
            .map(|c| if c.is_control() { '?' } else { c })
            .collect();
        Err(refusal(
            flow::package::codes::PACKAGE_ENTRYPOINT_INVALID,
            &at,
            None,
            &format!(
                "{} is not valid Python: {message}",
                flow::json::ascii_quote(&place)
            ),
        ))
    }

    /// How preparation runs here: pip's interpreter, the index, the
    /// arguments and the containment mode.
    fn python_recipe_digest(&self, recipe: &Recipe, index: &str) -> String {
        let identity = json!({
            "recipe": PREPARATION_RECIPE,
            "installer": recipe.runtime_digest,
            "index": index,
            "containment": format!("{:?}", self.request.config.containment.mode),
        });
        sha256_digest(&flow::json::canonical(&identity))
    }

    /// Stage only the rewritten requirements, install the wheels in the
    /// envelope, then put the authored files beside `site-packages/`.
    fn pip_install(
        &mut self,
        package: &Package,
        locked: &[Locked],
        runtime: &Path,
        index: &str,
        at: &str,
    ) -> Result<Package, Refusal> {
        let failed = |message: &str| refusal(codes::PREPARATION_FAILED, at, None, message);
        let sandbox = self.sandbox_for(codes::PREPARATION_FAILED, at)?;
        let work =
            Workspace::new().map_err(|_| failed("cannot create the preparation directory"))?;
        let mut text = String::new();
        for requirement in locked {
            text.push_str(&requirement.line());
            text.push('\n');
        }
        std::fs::write(work.package.join(REQUIREMENTS), text)
            .and_then(|()| std::fs::create_dir_all(work.scratch.join("tmp")))
            .map_err(|_| failed("cannot stage the requirements"))?;
        let launch = pip_launch(runtime, &work, index);
        self.run_contained(
            &launch,
            &sandbox,
            codes::PREPARATION_FAILED,
            "pip could not install the locked wheels from the index; check that the index \
             serves a wheel with a locked hash for this Python (sdists are never built)",
            at,
        )?;
        let mut files = BTreeMap::new();
        capture_tree(&work.package.join(PYTHON_SITE), PYTHON_SITE, &mut files).map_err(&failed)?;
        for (name, content) in package.files() {
            files.insert(name.clone(), content.clone());
        }
        check_prepared_size(&files, codes::LIMIT_EXCEEDED, at)?;
        Package::from_files(files)
            .map_err(|_| failed("the installed tree is not a valid Package/1 tree"))
    }
}

fn index(config: &crate::config::HostConfig) -> String {
    let mut index = config
        .dependencies
        .python_index
        .clone()
        .unwrap_or_else(|| DEFAULT_PYTHON_INDEX.into());
    if !index.ends_with('/') {
        index.push('/');
    }
    index
}

/// The Python entrypoint the syntax check compiles.
const ENTRYPOINT: &str = "flow.py";
/// Where [`COMPILE_SCRIPT`] writes what it found, beside the staged file.
const COMPILED: &str = "compiled.json";
/// The longest compiler message a refusal repeats, in characters.
const MAX_COMPILE_MESSAGE_CHARS: usize = 200;
/// Compile `flow.py` (as `python3 -m py_compile` would, without writing
/// bytecode) and write `{}` or where and why it is not Python. Nothing of
/// the file runs: `compile` only parses and compiles it.
const COMPILE_SCRIPT: &str = "\
import json
try:
    with open('flow.py', 'rb') as f:
        compile(f.read(), 'flow.py', 'exec', dont_inherit=True)
    found = {}
except SyntaxError as e:
    found = {'line': e.lineno, 'column': e.offset, 'message': e.msg}
except (ValueError, RecursionError, MemoryError) as e:
    found = {'message': str(e) or type(e).__name__}
with open('compiled.json', 'w') as f:
    json.dump(found, f)
";

/// The environment every Python launch of preparation starts from: a
/// private home and temporary directory in its scratch, and UTF-8.
fn private_env(work: &Workspace) -> Vec<(String, String)> {
    vec![
        (
            "HOME".into(),
            work.scratch.join("home").display().to_string(),
        ),
        (
            "TMPDIR".into(),
            work.scratch.join("tmp").display().to_string(),
        ),
        ("LANG".into(), "C.UTF-8".into()),
    ]
}

/// `python3 -I -S -B -c COMPILE_SCRIPT` in the staged directory: no site,
/// no user site, no environment, no bytecode written, no network.
fn compile_launch(runtime: &Path, work: &Workspace) -> Launch {
    Launch {
        args: ["-I", "-S", "-B", "-c", COMPILE_SCRIPT]
            .iter()
            .map(Into::into)
            .collect(),
        env: private_env(work),
        read_only: Vec::new(),
        network: false,
        ..pip_launch(runtime, work, DEFAULT_PYTHON_INDEX)
    }
}

/// `python3 -I -m pip --isolated install …`: no user site, no `PYTHON*`
/// or `PIP_*` environment, no configuration file, no cache, no bytecode,
/// hashes required, wheels only, no dependency resolution.
fn pip_launch(runtime: &Path, work: &Workspace, index: &str) -> Launch {
    let mut args: Vec<std::ffi::OsString> = ["-I", "-m", "pip", "--isolated", "install"]
        .iter()
        .map(Into::into)
        .collect();
    for fixed in [
        "--require-hashes",
        "--only-binary=:all:",
        "--no-deps",
        "--no-build-isolation",
        "--no-compile",
        "--no-cache-dir",
        "--no-input",
        "--disable-pip-version-check",
        "--no-color",
        "--progress-bar=off",
        "--root-user-action=ignore",
        "--target",
        PYTHON_SITE,
    ] {
        args.push(fixed.into());
    }
    args.push(format!("--index-url={index}").into());
    args.push("--requirement".into());
    args.push(REQUIREMENTS.into());
    Launch {
        view: None,
        program: runtime.to_path_buf(),
        args,
        env: private_env(work)
            .into_iter()
            .chain([
                ("PIP_CONFIG_FILE".into(), "/dev/null".into()),
                ("PYTHONNOUSERSITE".into(), "1".into()),
                ("NO_COLOR".into(), "1".into()),
            ])
            .collect(),
        cwd: work.package.clone(),
        package: work.empty.clone(),
        scratch: work.scratch.clone(),
        // The prepared package is read back from it.
        scratch_bytes: None,
        read_only: NETWORK_FILES
            .iter()
            .map(std::path::PathBuf::from)
            .filter(|p| p.exists())
            .collect(),
        attachments: Vec::new(),
        limits: Limits::PREPARATION,
        network: true,
        shown: Vec::new(),
    }
}

/// PEP 503 normalisation: lowercase, runs of `-`, `_`, `.` become `-`.
fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut separator = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            separator = true;
        } else {
            if separator && !out.is_empty() {
                out.push('-');
            }
            separator = false;
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// A PEP 508 distribution name.
fn is_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(b))
}

/// An exact version: PEP 440 characters, no wildcard.
fn is_exact_version(version: &str) -> bool {
    !version.is_empty()
        && version.as_bytes()[0].is_ascii_digit()
        && version
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._+!-".contains(&b))
}

fn is_sha256(hex: &str) -> bool {
    hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())
}

fn invalid(at: &str, message: &str) -> Refusal {
    refusal(codes::LOCK_INVALID, at, None, message)
}

fn unsupported(at: &str, message: &str) -> Refusal {
    refusal(codes::SOURCE_UNSUPPORTED, at, None, message)
}

/// A hash-pinned `requirements.txt`: each requirement `name==version`
/// (optionally `; marker`) with at least one `--hash=sha256:…`. Options
/// (indexes, links, includes, editables) and direct URLs are refused.
fn parse_requirements(bytes: &[u8], at: &str) -> Result<Vec<Locked>, Refusal> {
    let text =
        std::str::from_utf8(bytes).map_err(|_| invalid(at, "requirements.txt is not UTF-8"))?;
    let mut logical = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        // A comment starts at `#` at the line's start or after whitespace.
        let line = match line.find(" #").map(|i| i + 1).or_else(|| {
            line.trim_start()
                .starts_with('#')
                .then_some(line.len() - line.trim_start().len())
        }) {
            Some(i) => &line[..i],
            None => line,
        };
        match line.trim_end().strip_suffix('\\') {
            Some(continued) => {
                current.push_str(continued);
                current.push(' ');
            }
            None => {
                current.push_str(line);
                logical.push(std::mem::take(&mut current));
            }
        }
    }
    logical.push(current);
    let mut locked: Vec<Locked> = Vec::new();
    for line in logical {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if line.starts_with('-') {
            return Err(unsupported(
                at,
                "requirements.txt options (indexes, links, includes, editables) are not \
                 supported; the host configuration names the one index",
            ));
        }
        let (spec, hashes) = match line.find("--") {
            Some(i) => (line[..i].trim(), &line[i..]),
            None => (line, ""),
        };
        let mut hash_list = Vec::new();
        for option in hashes.split_whitespace() {
            match option.strip_prefix("--hash=sha256:") {
                Some(hex) if is_sha256(hex) => hash_list.push(hex.to_ascii_lowercase()),
                _ if option.starts_with("--hash=") => {
                    return Err(invalid(
                        at,
                        "requirements.txt has a hash that is not --hash=sha256:<64 hex digits>",
                    ))
                }
                _ => {
                    return Err(unsupported(
                        at,
                        "requirements.txt has a per-requirement option other than --hash",
                    ))
                }
            }
        }
        let (requirement, marker) = match spec.split_once(';') {
            Some((r, m)) => (r.trim(), Some(m.trim().to_string())),
            None => (spec, None),
        };
        if requirement.contains('@') || requirement.contains("://") {
            return Err(unsupported(
                at,
                "requirements.txt has a direct URL requirement; only the configured index's \
                 hash-pinned wheels are supported",
            ));
        }
        let Some((name, version)) = requirement.split_once("==") else {
            return Err(invalid(
                at,
                "requirements.txt has an unpinned requirement; pin every one with ==",
            ));
        };
        let (name, version) = (name.trim(), version.trim());
        if !is_name(name) {
            return Err(invalid(
                at,
                "requirements.txt has a requirement that is not name==version (extras are not \
                 supported)",
            ));
        }
        if !is_exact_version(version) {
            return Err(invalid(
                at,
                "requirements.txt has an unpinned requirement; pin every one with ==",
            ));
        }
        if hash_list.is_empty() {
            return Err(invalid(
                at,
                "requirements.txt has a requirement without --hash=sha256:; every one must be \
                 hash-pinned",
            ));
        }
        let entry = Locked {
            name: normalize(name),
            version: version.to_string(),
            marker,
            hashes: hash_list,
        };
        push_unique(&mut locked, entry, at)?;
    }
    Ok(locked)
}

fn push_unique(locked: &mut Vec<Locked>, entry: Locked, at: &str) -> Result<(), Refusal> {
    if locked.iter().any(|l| l.name == entry.name) {
        return Err(invalid(at, "the lock names one package twice"));
    }
    if locked.len() >= MAX_REQUIREMENTS {
        return Err(refusal(
            codes::LIMIT_EXCEEDED,
            at,
            None,
            "the lock has more than 4096 packages",
        ));
    }
    locked.push(entry);
    Ok(())
}

/// A PEP 751 `pylock.toml` whose every package is a set of wheels with
/// SHA-256 hashes on the configured index's host.
fn parse_pylock(bytes: &[u8], index: &str, at: &str) -> Result<Vec<Locked>, Refusal> {
    let text = std::str::from_utf8(bytes).map_err(|_| invalid(at, "pylock.toml is not UTF-8"))?;
    let lock: toml::Table =
        toml::from_str(text).map_err(|_| invalid(at, "pylock.toml is not valid TOML"))?;
    match lock.get("lock-version").and_then(toml::Value::as_str) {
        Some(version) if version == "1" || version.starts_with("1.") => {}
        _ => {
            return Err(invalid(
                at,
                "pylock.toml has no lock-version 1.x; this jig reads PEP 751 version 1",
            ))
        }
    }
    let origin = origin(index);
    let empty = Vec::new();
    let packages = match lock.get("packages") {
        None => &empty,
        Some(toml::Value::Array(packages)) => packages,
        Some(_) => {
            return Err(invalid(
                at,
                "pylock.toml packages is not an array of tables",
            ))
        }
    };
    let mut locked = Vec::new();
    for package in packages {
        let Some(package) = package.as_table() else {
            return Err(invalid(
                at,
                "pylock.toml packages is not an array of tables",
            ));
        };
        let text = |key: &str| package.get(key).and_then(toml::Value::as_str);
        let Some(name) = text("name").filter(|n| is_name(n)) else {
            return Err(invalid(at, "a pylock.toml package has no valid name"));
        };
        for (key, kind) in [
            ("vcs", "a version-control"),
            ("directory", "a local directory"),
            ("archive", "an archive"),
        ] {
            if package.contains_key(key) {
                return Err(unsupported(
                    at,
                    &format!(
                        "pylock.toml locks {kind} source; only wheels from the configured index \
                         are supported"
                    ),
                ));
            }
        }
        let Some(wheels) = package.get("wheels").and_then(toml::Value::as_array) else {
            return Err(unsupported(
                at,
                if package.contains_key("sdist") {
                    "pylock.toml locks a package only as an sdist; wheels only (no build runs at \
                     review)"
                } else {
                    "a pylock.toml package has no wheels"
                },
            ));
        };
        let Some(version) = text("version").filter(|v| is_exact_version(v)) else {
            return Err(invalid(at, "a pylock.toml package has no exact version"));
        };
        let mut hashes = Vec::new();
        for wheel in wheels {
            let url = wheel.get("url").and_then(toml::Value::as_str);
            let Some(url) = url else {
                return Err(unsupported(
                    at,
                    "a pylock.toml wheel has no URL (a local path is not supported)",
                ));
            };
            if origin.as_deref() != Some(url_origin(url).as_str()) || origin.is_none() {
                return Err(unsupported(
                    at,
                    "a pylock.toml wheel URL is on another host than the configured index",
                ));
            }
            let file = url.rsplit('/').next().unwrap_or_default();
            let file = file.split(['#', '?']).next().unwrap_or_default();
            if !file.ends_with(".whl") {
                return Err(unsupported(
                    at,
                    "a pylock.toml wheel URL does not name a .whl file",
                ));
            }
            match wheel
                .get("hashes")
                .and_then(|h| h.get("sha256"))
                .and_then(toml::Value::as_str)
            {
                Some(hex) if is_sha256(hex) => hashes.push(hex.to_ascii_lowercase()),
                _ => {
                    return Err(invalid(
                        at,
                        "a pylock.toml wheel has no sha256 hash; every wheel must be hash-pinned",
                    ))
                }
            }
        }
        if hashes.is_empty() {
            return Err(unsupported(at, "a pylock.toml package has no wheels"));
        }
        let entry = Locked {
            name: normalize(name),
            version: version.to_string(),
            marker: text("marker").map(str::to_string),
            hashes,
        };
        push_unique(&mut locked, entry, at)?;
    }
    Ok(locked)
}

/// `scheme://host[:port]` of an http(s) URL, lowercased.
fn url_origin(url: &str) -> String {
    let lower = url.to_ascii_lowercase();
    let Some((scheme, rest)) = lower.split_once("://") else {
        return String::new();
    };
    if scheme != "http" && scheme != "https" {
        return String::new();
    }
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if host.is_empty() || host.contains('@') {
        return String::new();
    }
    format!("{scheme}://{host}")
}

fn origin(index: &str) -> Option<String> {
    Some(url_origin(index)).filter(|o| !o.is_empty())
}

/// `[project] dependencies` of `pyproject.toml`, each a PEP 508 string.
fn declared_dependencies(bytes: &[u8], at: &str) -> Result<Vec<Declared>, Refusal> {
    let manifest_invalid = |m: &str| refusal(codes::MANIFEST_INVALID, at, None, m);
    if bytes.len() > MAX_MANIFEST_BYTES {
        return Err(refusal(
            codes::LIMIT_EXCEEDED,
            at,
            None,
            "pyproject.toml is larger than 1 MiB",
        ));
    }
    let text =
        std::str::from_utf8(bytes).map_err(|_| manifest_invalid("pyproject.toml is not UTF-8"))?;
    let manifest: toml::Table =
        toml::from_str(text).map_err(|_| manifest_invalid("pyproject.toml is not valid TOML"))?;
    let Some(list) = manifest.get("project").and_then(|p| p.get("dependencies")) else {
        return Ok(Vec::new());
    };
    let Some(list) = list.as_array() else {
        return Err(manifest_invalid(
            "[project] dependencies must be an array of strings",
        ));
    };
    let mut declared = Vec::new();
    for item in list {
        let Some(text) = item.as_str() else {
            return Err(manifest_invalid(
                "[project] dependencies must be an array of strings",
            ));
        };
        let (requirement, marker) = match text.split_once(';') {
            Some((r, _)) => (r, true),
            None => (text, false),
        };
        let end = requirement
            .find(|c: char| !(c.is_ascii_alphanumeric() || "-_.".contains(c)))
            .unwrap_or(requirement.len());
        let name = requirement[..end].trim();
        if !is_name(name) {
            return Err(manifest_invalid(
                "a [project] dependency does not start with a distribution name",
            ));
        }
        let mut rest = requirement[end..].trim();
        if let Some(after) = rest.strip_prefix('[') {
            rest = after.split_once(']').map(|(_, r)| r.trim()).unwrap_or("");
        }
        if rest.starts_with('@') {
            return Err(refusal(
                codes::SOURCE_UNSUPPORTED,
                at,
                None,
                "a [project] dependency is a direct URL; only the configured index's wheels \
                 are supported",
            ));
        }
        declared.push(Declared {
            name: normalize(name),
            specifier: rest
                .trim_matches(|c| c == '(' || c == ')')
                .trim()
                .to_string(),
            has_marker: marker,
        });
    }
    Ok(declared)
}

/// The lock must pin every unconditional declared dependency at a version
/// its specifier allows; else it is stale (review never repairs a lock).
fn check_lock_current(locked: &[Locked], declared: &[Declared], at: &str) -> Result<(), Refusal> {
    let stale = |m: &str| refusal(codes::LOCK_STALE, at, None, m);
    for dependency in declared.iter().filter(|d| !d.has_marker) {
        let Some(entry) = locked.iter().find(|l| l.name == dependency.name) else {
            return Err(stale(
                "the lock has no entry for a pyproject.toml dependency; lock it again (review \
                 never repairs a lock)",
            ));
        };
        if !satisfies(&entry.version, &dependency.specifier) {
            return Err(stale(
                "the locked version does not satisfy a pyproject.toml dependency's specifier; \
                 lock it again (review never repairs a lock)",
            ));
        }
    }
    Ok(())
}

/// Does `version` satisfy a PEP 440 specifier list (`>=1,<2`, `~=1.4`,
/// `==1.0.*`)? Release segments are compared numerically; a specifier this
/// does not understand is unsatisfied, so an odd lock is stale, not run.
fn satisfies(version: &str, specifier: &str) -> bool {
    specifier
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .all(|clause| {
            let op_len = clause
                .find(|c: char| !"<>=!~".contains(c))
                .unwrap_or(clause.len());
            let (op, wanted) = (&clause[..op_len], clause[op_len..].trim());
            let have = release(version);
            if let Some(prefix) = wanted.strip_suffix(".*") {
                let prefix = release(prefix);
                let matches = have.len() >= prefix.len() && have[..prefix.len()] == prefix[..];
                return match op {
                    "==" => matches,
                    "!=" => !matches,
                    _ => false,
                };
            }
            let want = release(wanted);
            if want.is_empty() {
                return false;
            }
            let order = compare(&have, &want);
            use std::cmp::Ordering::*;
            match op {
                "==" | "===" => version == wanted || (order == Equal && is_release(version)),
                "!=" => order != Equal,
                ">=" => order != Less,
                "<=" => order != Greater,
                ">" => order == Greater,
                "<" => order == Less,
                "~=" if want.len() >= 2 => {
                    order != Less
                        && have.len() >= want.len() - 1
                        && have[..want.len() - 1] == want[..want.len() - 1]
                }
                _ => false,
            }
        })
}

fn is_release(version: &str) -> bool {
    version
        .split('.')
        .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// The leading numeric release segments of a version (`1.4.2rc1` → 1,4,2).
fn release(version: &str) -> Vec<u64> {
    let mut out = Vec::new();
    for part in version.split('.') {
        let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
        match digits.parse() {
            Ok(n) => out.push(n),
            Err(_) => break,
        }
        if digits.len() != part.len() {
            break;
        }
    }
    out
}

/// Compare release segments, padding the shorter with zeros.
fn compare(a: &[u64], b: &[u64]) -> std::cmp::Ordering {
    let n = a.len().max(b.len());
    (0..n)
        .map(|i| a.get(i).unwrap_or(&0).cmp(b.get(i).unwrap_or(&0)))
        .find(|o| o.is_ne())
        .unwrap_or(std::cmp::Ordering::Equal)
}

#[cfg(test)]
mod tests;
