//! Python dependencies prepared at review: against a PEP 503 simple index
//! on 127.0.0.1 that these tests start, serving wheels they build, `jig
//! review` installs a `pylock.toml` or hash-pinned `requirements.txt` with
//! pip inside the envelope and `jig run` imports the wheels with no network.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::support::*;

/// An index address where nothing listens: a review that reaches pip with
/// it fails PACKAGE_PYTHON_PREPARATION_FAILED, so any other code proves the
/// refusal came before a fetch.
const DEAD_INDEX: &str = "http://127.0.0.1:9/simple/";

/// A static file server over `root` on 127.0.0.1 (`dir/` serves
/// `dir/index.html`), counting the requests it answers.
struct Index {
    port: u16,
    requests: Arc<AtomicUsize>,
    root: tempfile::TempDir,
}

impl Index {
    fn start() -> Index {
        let root = tempfile::tempdir().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(AtomicUsize::new(0));
        let (served, counter) = (root.path().to_path_buf(), requests.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut line = String::new();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                // Drain the headers.
                let mut header = String::new();
                while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                    header.clear();
                }
                counter.fetch_add(1, Ordering::SeqCst);
                let path = line.split_whitespace().nth(1).unwrap_or("/");
                let path = path.split(['?', '#']).next().unwrap_or("/");
                let mut file = served.join(path.trim_start_matches('/'));
                if path.ends_with('/') {
                    file = file.join("index.html");
                }
                let response = match std::fs::read(&file) {
                    Ok(body) if !path.contains("..") => {
                        let kind = if path.ends_with('/') {
                            "text/html"
                        } else {
                            "application/octet-stream"
                        };
                        let mut head = format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            body.len()
                        )
                        .into_bytes();
                        head.extend(body);
                        head
                    }
                    _ => {
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                            .to_vec()
                    }
                };
                let _ = stream.write_all(&response);
            }
        });
        Index {
            port,
            requests,
            root,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/simple/", self.port)
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// Serve `file` (its bytes) for project `name`; returns its URL and
    /// SHA-256.
    fn publish(&self, name: &str, file: &Path) -> (String, String) {
        let bytes = std::fs::read(file).unwrap();
        let file_name = file.file_name().unwrap().to_str().unwrap().to_string();
        let dir = self.root.path().join("simple").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(&file_name), &bytes).unwrap();
        let hash = sha256_hex(&bytes);
        // The project page lists every file published so far.
        let mut links = String::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap().file_name().into_string().unwrap();
            if entry != "index.html" {
                let h = sha256_hex(&std::fs::read(dir.join(&entry)).unwrap());
                links.push_str(&format!("<a href=\"{entry}#sha256={h}\">{entry}</a>\n"));
            }
        }
        std::fs::write(
            dir.join("index.html"),
            format!("<!DOCTYPE html><html><body>\n{links}</body></html>\n"),
        )
        .unwrap();
        (format!("{}{name}/{file_name}", self.url()), hash)
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    flow::digest::sha256_hex(bytes)
}

/// Build a pure-Python wheel `greet_lib-<version>-py3-none-any.whl` whose
/// `greet_lib.greet(name)` says `greeting`, with METADATA, WHEEL and a
/// RECORD of real hashes (written by Python's zipfile, no build backend).
fn wheel(out: &Path, version: &str, greeting: &str) -> PathBuf {
    let script = r#"
import base64, hashlib, sys, zipfile
out, version, greeting = sys.argv[1], sys.argv[2], sys.argv[3]
info = f"greet_lib-{version}.dist-info"
files = {
    "greet_lib/__init__.py": f"VERSION = {version!r}\ndef greet(name):\n    return f\"{greeting}, {{name}}!\"\n",
    f"{info}/METADATA": f"Metadata-Version: 2.1\nName: greet-lib\nVersion: {version}\n",
    f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: jig-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = ""
for name, text in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
    record += f"{name},sha256={digest},{len(text.encode())}\n"
files[f"{info}/RECORD"] = record + f"{info}/RECORD,,\n"
path = f"{out}/greet_lib-{version}-py3-none-any.whl"
with zipfile.ZipFile(path, "w") as wheel:
    for name, text in files.items():
        wheel.writestr(zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0)), text)
print(path)
"#;
    let made = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(out)
        .args([version, greeting])
        .output()
        .expect("python3 runs");
    assert!(made.status.success(), "{made:?}");
    PathBuf::from(String::from_utf8(made.stdout).unwrap().trim())
}

/// An index serving greet-lib 1.0.0 ("Hello") and 2.0.0 ("Hi there"), and
/// an sdist-only `sdist-lib`.
struct Fixture {
    index: Index,
    /// version → (URL, sha256)
    wheels: std::collections::BTreeMap<&'static str, (String, String)>,
    sdist: String,
    _build: tempfile::TempDir,
}

fn fixture() -> Fixture {
    let index = Index::start();
    let build = tempfile::tempdir().unwrap();
    let mut wheels = std::collections::BTreeMap::new();
    for (version, greeting) in [("1.0.0", "Hello"), ("2.0.0", "Hi there")] {
        let file = wheel(build.path(), version, greeting);
        wheels.insert(version, index.publish("greet-lib", &file));
    }
    let sdist = build.path().join("sdist_lib-1.0.0.tar.gz");
    std::fs::write(&sdist, b"not really a tarball, and never built").unwrap();
    let (_, sdist_hash) = index.publish("sdist-lib", &sdist);
    Fixture {
        index,
        wheels,
        sdist: sdist_hash,
        _build: build,
    }
}

impl Fixture {
    /// [`project_with`] `files`, naming this fixture's index.
    fn project(&self, files: &[(&str, &str)]) -> tempfile::TempDir {
        project_with(files, &self.index.url(), self.index.port)
    }

    fn requirements(&self, version: &str) -> String {
        format!(
            "# locked by hand\ngreet-lib=={version} \\\n    --hash=sha256:{}\n",
            self.wheels[version].1
        )
    }

    fn pylock(&self, version: &str) -> String {
        let (url, hash) = &self.wheels[version];
        format!(
            "lock-version = \"1.0\"\ncreated-by = \"jig-tests\"\n\n[[packages]]\nname = \"greet-lib\"\nversion = \"{version}\"\nwheels = [{{ url = \"{url}\", hashes = {{ sha256 = \"{hash}\" }} }}]\n"
        )
    }
}

/// Greets with `greet_lib`, reports its version, and tries the index: a
/// Run has no network, so `reached` must be false.
fn flow_py(port: u16) -> String {
    format!(
        "import socket\nimport greet_lib\nfrom jiggy.flow import handle\n\n\
         async def run(context):\n    try:\n        socket.create_connection((\"127.0.0.1\", {port}), timeout=2).close()\n        reached = True\n    except OSError:\n        reached = False\n    \
         return {{\"outcome\": \"done\", \"output\": {{\"message\": greet_lib.greet(context.input), \"version\": greet_lib.VERSION, \"reached\": reached}}}}\n\nhandle(run)\n"
    )
}

const FLOW_MD: &str = "---\nname: hello\ndescription: Greets with a Python dependency.\n---\n";

/// A project whose `flows/hello` has `files` beside FLOW.md and flow.py,
/// and a host configuration naming `index_url`.
fn project_with(files: &[(&str, &str)], index_url: &str, port: u16) -> tempfile::TempDir {
    let flow = flow_py(port);
    let dir = project(&[
        ("flows/hello/FLOW.md", FLOW_MD),
        ("flows/hello/flow.py", &flow),
    ]);
    let files: Vec<(String, &str)> = files
        .iter()
        .map(|(name, text)| (format!("flows/hello/{name}"), *text))
        .collect();
    let files: Vec<(&str, &str)> = files.iter().map(|(n, t)| (n.as_str(), *t)).collect();
    write_files(dir.path(), &files);
    write_files(
        dir.path(),
        &[(
            ".test-config-home/jig/host.toml",
            &format!("[dependencies]\npython-index = \"{index_url}\"\n"),
        )],
    );
    dir
}

fn run_hello(dir: &Path) -> serde_json::Value {
    let run = run_jig(dir, &["run", "flow:flows/hello", "--input", "\"Ada\""]);
    assert_eq!(run.status, 0, "{run:?}");
    run.json()["output"].clone()
}

/// The refusal must name `code` at `flows/hello/<file>`.
fn assert_refused(run: &Run, status: i32, code: &str, file: &str) {
    assert_eq!(run.status, status, "{run:?}");
    let at = format!("{code} at \"flows/hello/{file}\"");
    assert!(run.stderr.contains(&at), "expected {at}: {run:?}");
}

#[test]
fn a_hash_pinned_requirement_is_prepared_at_review_and_a_run_imports_it_without_network() {
    let f = fixture();
    let requirements = f.requirements("1.0.0");
    let dir = f.project(&[("requirements.txt", &requirements)]);
    let source = run_jig(dir.path(), &["package", "digest", "flows/hello"]);
    assert_eq!(source.status, 0, "{source:?}");
    review(dir.path());
    assert!(f.index.requests() > 0, "pip fetched from the test's index");
    assert_eq!(
        run_hello(dir.path()),
        serde_json::json!({ "message": "Hello, Ada!", "version": "1.0.0", "reached": false })
    );
    // jig.lock keeps naming the reviewed source package, not the prepared one.
    let lock: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("jig.lock")).unwrap()).unwrap();
    assert_eq!(
        lock["packages"]["flows/hello"]["digest"],
        source.stdout.trim(),
        "{lock}"
    );
    // Nothing was installed into the source.
    assert!(!dir.path().join("flows/hello/site-packages").exists());
}

#[test]
fn a_pylock_toml_is_prepared_the_same_way() {
    let f = fixture();
    let pylock = f.pylock("2.0.0");
    let dir = f.project(&[("pylock.toml", &pylock)]);
    review(dir.path());
    assert_eq!(run_hello(dir.path())["message"], "Hi there, Ada!");
}

#[test]
fn reuse_of_an_admitted_preparation_installs_nothing() {
    let f = fixture();
    let requirements = f.requirements("1.0.0");
    let dir = f.project(&[("requirements.txt", &requirements)]);
    review(dir.path());
    let fetched = f.index.requests();
    let again = review(dir.path());
    assert_eq!(again.stdout, "project is ready\n", "unchanged: {again:?}");
    write_files(
        dir.path(),
        &[
            ("flows/other/FLOW.md", "---\nname: other\ndescription: Plain.\n---\n"),
            ("flows/other/flow.py", "from jiggy.flow import handle\n\nasync def run(context):\n    return {\"outcome\": \"done\", \"output\": 1}\n\nhandle(run)\n"),
        ],
    );
    let reused = review(dir.path());
    assert!(reused.stdout.contains("+ \"flows/other\""), "{reused:?}");
    assert_eq!(f.index.requests(), fetched, "reuse fetched nothing");
    assert_eq!(run_hello(dir.path())["version"], "1.0.0");
}

#[test]
fn a_changed_lock_changes_the_target_in_review() {
    let f = fixture();
    let requirements = f.requirements("1.0.0");
    let dir = f.project(&[("requirements.txt", &requirements)]);
    review(dir.path());
    assert_eq!(run_hello(dir.path())["version"], "1.0.0");
    write_files(
        dir.path(),
        &[("flows/hello/requirements.txt", &f.requirements("2.0.0"))],
    );
    let changed = review(dir.path());
    assert!(changed.stdout.contains("~ \"flows/hello\""), "{changed:?}");
    assert!(
        changed.stdout.contains("~ \"flow:flows/hello\""),
        "{changed:?}"
    );
    assert_eq!(run_hello(dir.path())["message"], "Hi there, Ada!");
}

#[test]
fn an_sdist_only_dependency_is_never_built() {
    let f = fixture();
    let requirements = format!("sdist-lib==1.0.0 --hash=sha256:{}\n", f.sdist);
    let dir = f.project(&[("requirements.txt", &requirements)]);
    let refused = run_jig(dir.path(), &["review", "--yes"]);
    assert_refused(
        &refused,
        2,
        "PACKAGE_PYTHON_PREPARATION_FAILED",
        "requirements.txt",
    );
    assert!(f.index.requests() > 0, "pip asked the index: {refused:?}");
    for installer_text in ["Looking in indexes", "ERROR", "sdist-lib"] {
        assert!(
            !refused.stderr.contains(installer_text),
            "never installer output: {refused:?}"
        );
    }
    assert!(!dir.path().join("jig.lock").exists());

    // Locked in a pylock.toml, an sdist is refused before any fetch.
    let pylock = format!(
        "lock-version = \"1.0\"\ncreated-by = \"t\"\n[[packages]]\nname = \"sdist-lib\"\nversion = \"1.0.0\"\nsdist = {{ url = \"{}sdist-lib/sdist_lib-1.0.0.tar.gz\", hashes = {{ sha256 = \"{}\" }} }}\n",
        f.index.url(),
        f.sdist
    );
    let dir = project_with(&[("pylock.toml", &pylock)], DEAD_INDEX, 9);
    let refused = run_jig(dir.path(), &["review", "--yes"]);
    assert_refused(
        &refused,
        1,
        "PACKAGE_PYTHON_SOURCE_UNSUPPORTED",
        "pylock.toml",
    );
}

#[test]
fn each_invalid_lock_is_refused_before_any_fetch() {
    let hash = "a".repeat(64);
    let wheel = |url: &str, hashes: &str| {
        format!(
            "lock-version = \"1.0\"\ncreated-by = \"t\"\n[[packages]]\nname = \"greet-lib\"\nversion = \"1.0.0\"\nwheels = [{{ url = \"{url}\", hashes = {{ {hashes} }} }}]\n"
        )
    };
    let on_index = "http://127.0.0.1:9/files/greet_lib-1.0.0-py3-none-any.whl";
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "requirements.txt",
            "greet lib!==1.0.0 --hash=sha256:".to_string() + &hash,
            "PACKAGE_PYTHON_LOCK_INVALID",
        ),
        (
            "requirements.txt",
            "greet-lib>=1.0 --hash=sha256:".to_string() + &hash,
            "PACKAGE_PYTHON_LOCK_INVALID",
        ),
        (
            "requirements.txt",
            "greet-lib==1.0.0\n".to_string(),
            "PACKAGE_PYTHON_LOCK_INVALID",
        ),
        (
            "requirements.txt",
            "--extra-index-url http://elsewhere/simple/\n".to_string(),
            "PACKAGE_PYTHON_SOURCE_UNSUPPORTED",
        ),
        (
            "requirements.txt",
            format!("greet-lib @ http://elsewhere/g-1.0.0-py3-none-any.whl --hash=sha256:{hash}\n"),
            "PACKAGE_PYTHON_SOURCE_UNSUPPORTED",
        ),
        (
            "pylock.toml",
            "lock-version = [\n".to_string(),
            "PACKAGE_PYTHON_LOCK_INVALID",
        ),
        (
            "pylock.toml",
            wheel(on_index, "md5 = \"abc\""),
            "PACKAGE_PYTHON_LOCK_INVALID",
        ),
        (
            "pylock.toml",
            wheel(
                "http://127.0.0.2:9/greet_lib-1.0.0-py3-none-any.whl",
                &format!("sha256 = \"{hash}\""),
            ),
            "PACKAGE_PYTHON_SOURCE_UNSUPPORTED",
        ),
        (
            "pylock.toml",
            wheel(
                "http://127.0.0.1:9/greet_lib-1.0.0.tar.gz",
                &format!("sha256 = \"{hash}\""),
            ),
            "PACKAGE_PYTHON_SOURCE_UNSUPPORTED",
        ),
    ];
    for (file, text, code) in cases {
        let dir = project_with(&[(file, &text)], DEAD_INDEX, 9);
        let refused = run_jig(dir.path(), &["review", "--yes"]);
        assert_refused(&refused, 1, code, file);
        assert!(!dir.path().join("jig.lock").exists(), "{text}");
    }
    // Two locks for one package.
    let dir = project_with(
        &[
            (
                "requirements.txt",
                &format!("greet-lib==1.0.0 --hash=sha256:{hash}\n"),
            ),
            (
                "pylock.toml",
                &wheel(on_index, &format!("sha256 = \"{hash}\"")),
            ),
        ],
        DEAD_INDEX,
        9,
    );
    let refused = run_jig(dir.path(), &["review", "--yes"]);
    assert_refused(&refused, 1, "PACKAGE_PYTHON_LOCK_INVALID", "pylock.toml");
}

#[test]
fn missing_and_stale_locks_are_distinct_and_never_repaired() {
    let pyproject =
        "[project]\nname = \"hello\"\nversion = \"0.1.0\"\ndependencies = [\"greet-lib>=2\"]\n";
    let dir = project_with(&[("pyproject.toml", pyproject)], DEAD_INDEX, 9);
    let missing = run_jig(dir.path(), &["review", "--yes"]);
    assert_refused(
        &missing,
        2,
        "PACKAGE_PYTHON_RESOLUTION_PERMISSION_REQUIRED",
        "pyproject.toml",
    );
    // The flag does not make review resolve a Python graph.
    let flagged = run_jig(
        dir.path(),
        &["review", "--yes", "--allow-resolution-network"],
    );
    assert_refused(
        &flagged,
        2,
        "PACKAGE_PYTHON_RESOLUTION_UNSUPPORTED",
        "pyproject.toml",
    );
    assert!(!flagged.stderr.contains("Resolving"), "{flagged:?}");

    let hash = "b".repeat(64);
    let requirements = format!("greet-lib==1.0.0 --hash=sha256:{hash}\n");
    let dir = project_with(
        &[
            ("pyproject.toml", pyproject),
            ("requirements.txt", &requirements),
        ],
        DEAD_INDEX,
        9,
    );
    let stale = run_jig(dir.path(), &["review", "--yes"]);
    assert_refused(&stale, 1, "PACKAGE_PYTHON_LOCK_STALE", "requirements.txt");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("flows/hello/requirements.txt")).unwrap(),
        requirements,
        "a stale lock is never repaired"
    );
    let dir = project_with(
        &[
            ("pyproject.toml", "[project\n"),
            ("requirements.txt", &requirements),
        ],
        DEAD_INDEX,
        9,
    );
    let invalid = run_jig(dir.path(), &["review", "--yes"]);
    assert_refused(
        &invalid,
        1,
        "PACKAGE_PYTHON_MANIFEST_INVALID",
        "pyproject.toml",
    );
}

#[test]
fn a_pyproject_without_dependencies_needs_no_lock() {
    let dir = project_with(
        &[(
            "pyproject.toml",
            "[project]\nname = \"hello\"\nversion = \"0.1.0\"\n",
        )],
        DEAD_INDEX,
        9,
    );
    write_files(
        dir.path(),
        &[(
            "flows/hello/flow.py",
            "from jiggy.flow import handle\n\nasync def run(context):\n    return {\"outcome\": \"done\", \"output\": \"plain\"}\n\nhandle(run)\n",
        )],
    );
    review(dir.path());
    let run = run_jig(dir.path(), &["run", "flow:flows/hello"]);
    assert_eq!(run.json()["output"], "plain", "{run:?}");
}

/// `text` padded with a trailing comment line to exactly `size` bytes.
fn padded(text: &str, size: usize) -> String {
    let mut out = text.to_string();
    out.push('#');
    out.push_str(&"x".repeat(size - text.len() - 2));
    out.push('\n');
    assert_eq!(out.len(), size);
    out
}

#[test]
fn the_lock_and_manifest_size_limits() {
    use jig_engine::plan::prepare::{MAX_LOCK_BYTES, MAX_MANIFEST_BYTES};
    let f = fixture();
    let requirements = f.requirements("1.0.0");
    let at_limit = padded(&requirements, MAX_LOCK_BYTES);
    let dir = f.project(&[("requirements.txt", &at_limit)]);
    review(dir.path());
    assert_eq!(run_hello(dir.path())["version"], "1.0.0");
    let past = padded(&requirements, MAX_LOCK_BYTES + 1);
    let dir = project_with(&[("requirements.txt", &past)], DEAD_INDEX, 9);
    let refused = run_jig(dir.path(), &["review", "--yes"]);
    assert_refused(
        &refused,
        1,
        "PACKAGE_PYTHON_LIMIT_EXCEEDED",
        "requirements.txt",
    );

    let pyproject =
        "[project]\nname = \"hello\"\nversion = \"0.1.0\"\ndependencies = [\"greet-lib\"]\n";
    let at_limit = padded(pyproject, MAX_MANIFEST_BYTES);
    let dir = f.project(&[
        ("pyproject.toml", &at_limit),
        ("requirements.txt", &requirements),
    ]);
    review(dir.path());
    let past = padded(pyproject, MAX_MANIFEST_BYTES + 1);
    let dir = project_with(
        &[
            ("pyproject.toml", &past),
            ("requirements.txt", &requirements),
        ],
        DEAD_INDEX,
        9,
    );
    let refused = run_jig(dir.path(), &["review", "--yes"]);
    assert_refused(
        &refused,
        1,
        "PACKAGE_PYTHON_LIMIT_EXCEEDED",
        "pyproject.toml",
    );
}

#[test]
fn corrupt_or_missing_prepared_wheels_fail_closed_and_are_never_fetched_again() {
    let f = fixture();
    let requirements = f.requirements("1.0.0");
    let dir = f.project(&[("requirements.txt", &requirements)]);
    review(dir.path());
    let fetched = f.index.requests();
    // The retained copy of the installed greet_lib, changed behind jig's back.
    let installed = std::fs::read_dir(dir.path().join(".jig/store/blobs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| std::fs::read(p).unwrap().starts_with(b"VERSION = '1.0.0'"))
        .expect("the installed wheel is retained");
    std::fs::write(&installed, "VERSION = 'tampered'\n").unwrap();
    let run = run_jig(
        dir.path(),
        &["run", "flow:flows/hello", "--input", "\"Ada\""],
    );
    assert_ne!(run.status, 0, "{run:?}");
    assert!(!run.stdout.contains("tampered"), "{run:?}");
    let again = run_jig(dir.path(), &["review", "--yes"]);
    assert_refused(&again, 1, "PROJECT_STATE_INVALID", "requirements.txt");
    std::fs::remove_file(&installed).unwrap();
    let again = run_jig(dir.path(), &["review", "--yes"]);
    assert_refused(&again, 1, "PROJECT_STATE_INVALID", "requirements.txt");
    assert_eq!(f.index.requests(), fetched, "nothing was fetched again");
}
