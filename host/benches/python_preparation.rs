//! Review's Python dependency preparation against pip itself, in the same
//! run: a `flow.py` package with a hash-pinned `requirements.txt` (one wheel
//! served by a PEP 503 index on 127.0.0.1 this bench starts) is reviewed
//! with `jig review --yes`, against `python3 -I -m pip install` of the same
//! requirement with the same flags into a fresh target, and against the
//! review of the same project without the dependency. Read the ratios of
//! the medians: (review with − review without) / pip install is the cost of
//! preparing inside the envelope relative to a bare install.
//!
//! Run: `cargo bench -p jig --bench python_preparation --profile dev`.
//!
//! Measured 2026-12-01 (debug jig, 2-core shared machine, load ~14,
//! medians of 10): pip install 1.652 s, review without the dependency
//! 147.5 ms, review with it 2.048 s; so preparation adds ~1.90 s, ~1.15x
//! the bare pip install (pip's own start dominates; the envelope, the
//! prepared Package/1 digest and the store writes are the rest).

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

mod support;
use support::review;

fn main() {
    fixture();
    divan::main();
}

struct Fixture {
    _root: tempfile::TempDir,
    index: String,
    requirements: String,
}

const PYTHON: &str = "/usr/bin/python3";

/// Serve `root` over HTTP on 127.0.0.1 from a thread; returns the port.
fn serve(root: PathBuf) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let mut header = String::new();
            while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                header.clear();
            }
            let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
            let mut file = root.join(path.trim_start_matches('/'));
            if path.ends_with('/') {
                file = file.join("index.html");
            }
            let response = match std::fs::read(&file) {
                Ok(body) => {
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
                Err(_) => b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_vec(),
            };
            let _ = stream.write_all(&response);
        }
    });
    port
}

fn fixture() -> &'static Fixture {
    static CELL: OnceLock<Fixture> = OnceLock::new();
    CELL.get_or_init(|| {
        let root = tempfile::tempdir().unwrap();
        let project = root.path().join("simple/greet-lib");
        std::fs::create_dir_all(&project).unwrap();
        let script = r#"
import sys, zipfile
path = sys.argv[1] + "/greet_lib-1.0.0-py3-none-any.whl"
info = "greet_lib-1.0.0.dist-info"
with zipfile.ZipFile(path, "w") as wheel:
    wheel.writestr("greet_lib/__init__.py", "def greet(name):\n    return f'Hello, {name}!'\n")
    wheel.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: greet-lib\nVersion: 1.0.0\n")
    wheel.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: bench\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    wheel.writestr(f"{info}/RECORD", "")
"#;
        let made = Command::new(PYTHON)
            .args(["-c", script])
            .arg(&project)
            .status()
            .unwrap();
        assert!(made.success(), "python3 could not write the wheel");
        let wheel = std::fs::read(project.join("greet_lib-1.0.0-py3-none-any.whl")).unwrap();
        let hash = flow::digest::sha256_hex(&wheel);
        std::fs::write(
            project.join("index.html"),
            format!("<a href=\"greet_lib-1.0.0-py3-none-any.whl#sha256={hash}\">w</a>\n"),
        )
        .unwrap();
        let port = serve(root.path().to_path_buf());
        Fixture {
            _root: root,
            index: format!("http://127.0.0.1:{port}/simple/"),
            requirements: format!("greet-lib==1.0.0 --hash=sha256:{hash}\n"),
        }
    })
}

const FLOW_PY: &str = "import greet_lib\nfrom jiggy.flow import handle\n\nasync def run(context):\n    return {\"outcome\": \"done\", \"output\": greet_lib.greet(context.input)}\n\nhandle(run)\n";

/// A fresh project; `with_dependency` adds the requirements.txt.
fn project(with_dependency: bool) -> tempfile::TempDir {
    let f = fixture();
    let mut files = vec![("flow.py", FLOW_PY)];
    if with_dependency {
        files.push(("requirements.txt", &f.requirements));
    }
    support::project(
        &files,
        &format!("[dependencies]\npython-index = \"{}\"\n", f.index),
    )
}

#[divan::bench(sample_count = 10)]
fn pip_install_hashed(bencher: divan::Bencher) {
    let f = fixture();
    bencher
        .with_inputs(|| {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("requirements.txt"), &f.requirements).unwrap();
            dir
        })
        .bench_local_values(|dir| {
            let out = Command::new(PYTHON)
                .args(["-I", "-m", "pip", "--isolated", "install"])
                .args(["--require-hashes", "--only-binary=:all:", "--no-deps"])
                .args(["--no-build-isolation", "--no-compile", "--no-cache-dir"])
                .args(["--no-input", "--disable-pip-version-check", "--quiet"])
                .args([
                    "--target",
                    "site-packages",
                    "--requirement",
                    "requirements.txt",
                ])
                .arg(format!("--index-url={}", f.index))
                .env_clear()
                .env("HOME", dir.path())
                .env("PIP_CONFIG_FILE", "/dev/null")
                .current_dir(dir.path())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "pip install failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            dir
        });
}

#[divan::bench(sample_count = 10)]
fn review_without_dependency(bencher: divan::Bencher) {
    bencher
        .with_inputs(|| project(false))
        .bench_local_values(|dir| {
            review(dir.path());
            dir
        });
}

#[divan::bench(sample_count = 10)]
fn review_with_locked_dependency(bencher: divan::Bencher) {
    bencher
        .with_inputs(|| project(true))
        .bench_local_values(|dir| {
            review(dir.path());
            dir
        });
}
