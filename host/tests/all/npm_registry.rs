//! Test support: a real npm registry (verdaccio, installed by .ci/setup)
//! on 127.0.0.1 with a private storage directory, and the small packages
//! the dependency tests publish to it with npm.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::support::{free_port, write_files};

/// Where .ci/setup installs verdaccio (`JIG_VERDACCIO_DIR` overrides).
pub const VERDACCIO_DIR: &str = "/opt/jig-verdaccio";

pub struct Registry {
    /// `http://127.0.0.1:<port>/`
    pub url: String,
    _storage: tempfile::TempDir,
}

/// The one registry of this test process, with every test package published.
pub fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let registry = start();
        publish_all(&registry);
        registry
    })
}

fn verdaccio() -> PathBuf {
    let dir = std::env::var_os("JIG_VERDACCIO_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(VERDACCIO_DIR));
    let bin = dir.join("node_modules/.bin/verdaccio");
    assert!(
        bin.exists(),
        "{} is missing; run .ci/setup (it installs verdaccio 6.8.0)",
        bin.display()
    );
    bin
}

fn start() -> Registry {
    let storage = tempfile::tempdir().unwrap();
    let root = storage.path();
    let config = format!(
        "storage: {storage}\nauth:\n  htpasswd:\n    file: {root}/htpasswd\n    max_users: -1\n\
         uplinks: {{}}\npackages:\n  '**':\n    access: $anonymous\n    publish: $anonymous\n\
         \x20   unpublish: $anonymous\nlog: {{ type: stdout, format: pretty, level: error }}\n",
        storage = root.join("packages").display(),
        root = root.display(),
    );
    std::fs::write(root.join("config.yaml"), config).unwrap();
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/");
    let bin = verdaccio();
    let config = root.join("config.yaml");
    // Spawned from a thread that lives as long as the test process, so the
    // parent-death signal ends verdaccio with the process, not with a test.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::os::unix::process::CommandExt;
        let mut command = Command::new(bin);
        command
            .arg("--config")
            .arg(&config)
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: prctl is async-signal-safe and allocates nothing.
        unsafe {
            command.pre_exec(|| {
                nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                    .map_err(std::io::Error::from)
            });
        }
        let child = command.spawn().expect("verdaccio starts");
        tx.send(()).unwrap();
        let _child = child;
        loop {
            std::thread::park();
        }
    });
    rx.recv().unwrap();
    // Readiness: the registry answers its ping.
    for _ in 0..600 {
        if http_get(port, "/-/ping").is_some_and(|r| r.starts_with("HTTP/1.1 200")) {
            return Registry {
                url,
                _storage: storage,
            };
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("verdaccio did not answer on {url}");
}

/// One GET over a plain TCP stream: the status line and the body.
pub fn http_get(port: u16, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    Some(text)
}

impl Registry {
    pub fn port(&self) -> u16 {
        self.url
            .trim_end_matches('/')
            .rsplit(':')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    }

    /// `npm publish` of the package in `dir` to this registry.
    pub fn publish(&self, dir: &Path) {
        let host = self.url.trim_start_matches("http:");
        let cache = tempfile::tempdir().unwrap();
        let out = Command::new("npm")
            .arg("publish")
            .arg("--registry")
            .arg(&self.url)
            .arg(format!("--{host}:_authToken=test"))
            .arg("--ignore-scripts")
            .env("npm_config_cache", cache.path())
            .env("npm_config_update_notifier", "false")
            .current_dir(dir)
            .output()
            .expect("npm runs");
        assert!(
            out.status.success(),
            "npm publish {}: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `bun.lock` for `manifest`, resolved against this registry by the
    /// test machine's Bun (as an author would make it).
    pub fn lock_for(&self, manifest: &str) -> String {
        self.lock_at(&self.url, manifest)
    }

    /// The same, resolved through `url` (a [`Proxy`] to this registry).
    pub fn lock_at(&self, url: &str, manifest: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("package.json"), manifest).unwrap();
        self.lock_in(url, dir.path())
    }

    /// `bun.lock` for the package or workspace at `dir`, resolved through
    /// `url`; written there too.
    pub fn lock_in(&self, url: &str, dir: &Path) -> String {
        let out = Command::new(bun())
            .args([
                "install",
                "--lockfile-only",
                "--ignore-scripts",
                "--no-progress",
            ])
            .arg(format!("--registry={url}"))
            .arg("--config=/dev/null")
            .env_clear()
            .env("HOME", dir)
            .current_dir(dir)
            .output()
            .expect("bun runs");
        assert!(
            out.status.success(),
            "bun lock: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::read_to_string(dir.join("bun.lock")).unwrap()
    }
}

pub fn bun() -> PathBuf {
    ["/usr/bin/bun", "/usr/local/bin/bun", "/bin/bun"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .expect("bun is installed (.ci/setup)")
}

/// Every package the dependency tests use: `greet-lib` 1.0.0 and 2.0.0 (two
/// answers), `scripted-lib` (a postinstall that must never run) and
/// `nested-lib` (depends on `greet-lib@1`).
fn publish_all(registry: &Registry) {
    let dir = tempfile::tempdir().unwrap();
    let package = |name: &str, version: &str, extra: &str, files: &[(&str, &str)]| {
        let root = dir.path().join(format!("{name}-{version}"));
        let manifest = format!(
            "{{\"name\":\"{name}\",\"version\":\"{version}\",\"main\":\"index.js\"{extra}}}"
        );
        write_files(&root, &[("package.json", &manifest)]);
        write_files(&root, files);
        registry.publish(&root);
    };
    package(
        "greet-lib",
        "1.0.0",
        "",
        &[(
            "index.js",
            "exports.greet = (name) => `Hello, ${name}!`;\nexports.version = \"1.0.0\";\n",
        )],
    );
    package(
        "greet-lib",
        "2.0.0",
        "",
        &[(
            "index.js",
            "exports.greet = (name) => `Hi there, ${name}!`;\nexports.version = \"2.0.0\";\n",
        )],
    );
    package(
        "scripted-lib",
        "1.0.0",
        ",\"scripts\":{\"postinstall\":\"node -e \\\"require('fs').writeFileSync('ran.js','')\\\"\",\"preinstall\":\"node -e \\\"require('fs').writeFileSync('ran.js','')\\\"\"}",
        &[("index.js", "exports.ok = true;\n")],
    );
    package(
        "nested-lib",
        "1.0.0",
        ",\"dependencies\":{\"greet-lib\":\"1.0.0\"}",
        &[(
            "index.js",
            "exports.inner = require(\"greet-lib\").version;\n",
        )],
    );
}

/// A TCP forwarder on 127.0.0.1 to `target`: a registry address the test
/// can take away (dropping it closes the port) without changing the URL.
pub struct Proxy {
    pub port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Proxy {
    pub fn start(target: u16) -> Proxy {
        use std::sync::atomic::{AtomicBool, Ordering};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((client, _)) => {
                        client.set_nonblocking(false).unwrap();
                        let Ok(upstream) = std::net::TcpStream::connect(("127.0.0.1", target))
                        else {
                            continue;
                        };
                        for (mut from, mut to) in [
                            (client.try_clone().unwrap(), upstream.try_clone().unwrap()),
                            (upstream, client),
                        ] {
                            std::thread::spawn(move || {
                                let _ = std::io::copy(&mut from, &mut to);
                                let _ = to.shutdown(std::net::Shutdown::Write);
                            });
                        }
                    }
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
                }
            }
        });
        Proxy {
            port,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
