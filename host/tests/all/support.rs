//! Shared test support: a `jig` command with a private environment, temp
//! projects, and guest artifacts built from source in this repository.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `jig` with an isolated configuration home, run in `dir`.
pub fn jig(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_jig"));
    command
        .current_dir(dir)
        .env_remove("JIG_CONFIG")
        .env("XDG_CONFIG_HOME", dir.join(".test-config-home"))
        .env("NO_COLOR", "1");
    command
}

pub struct Run {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(self.stdout.trim_end())
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:?}"))
    }
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "status {}\n--- stdout\n{}\n--- stderr\n{}",
            self.status, self.stdout, self.stderr
        )
    }
}

pub fn output(out: Output) -> Run {
    Run {
        status: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The terminal of the newest Run of the project at `dir`, from its record
/// (`jig runs`, then `jig runs show`): an interrupted `jig run` keeps it
/// off stdout, as the reference does.
pub fn newest_terminal(dir: &Path) -> serde_json::Value {
    let listed = run_jig(dir, &["runs"]);
    let id = listed
        .stdout
        .lines()
        .next()
        .and_then(|line| line.split('\t').next())
        .unwrap_or_else(|| panic!("no Run is listed: {listed:?}"))
        .to_string();
    run_jig(dir, &["runs", "show", &id]).json()["terminal"].clone()
}

/// Exactly what an interrupted `jig run` says on redirected streams.
pub fn assert_interrupted(run: &Run) {
    assert_eq!(
        (run.status, run.stdout.as_str(), run.stderr.as_str()),
        (
            2,
            "",
            "JIG_COMMAND_INTERRUPTED: the command was interrupted\n"
        ),
        "{run:?}"
    );
}

/// A loopback port nothing listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn run_jig(dir: &Path, args: &[&str]) -> Run {
    output(jig(dir).args(args).output().expect("jig runs"))
}

/// Write `files` (path, content) under `root`.
pub fn write_files(root: &Path, files: &[(&str, &str)]) {
    for (path, content) in files {
        let target = root.join(path);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::write(target, content).unwrap();
    }
}

pub const JIG_TS: &str = "import { defineJig, discover } from \"@jigging/jig\";\n\nexport default defineJig({\n  flows: discover(\"./flows\"),\n  bindings: discover(\"./bindings\"),\n});\n";

/// A project with the standard jig.ts and the given files.
pub fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), &[("jig.ts", JIG_TS)]);
    write_files(dir.path(), files);
    dir
}

pub fn review(dir: &Path) -> Run {
    let run = run_jig(dir, &["review", "--yes"]);
    assert_eq!(run.status, 0, "review failed: {run:?}");
    run
}

/// Build a guest artifact from this workspace (once per test process) into
/// a separate target dir, so the outer cargo's build lock is not involved.
pub fn cargo_build(args: &[&str]) -> PathBuf {
    static LOCK: Mutex<()> = Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let target_dir = workspace().join("target").join("guests");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(workspace())
        .args(["build", "--quiet"])
        .args(args)
        .arg("--target-dir")
        .arg(&target_dir)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "cargo build {args:?} failed");
    target_dir
}

fn once(cell: &'static OnceLock<PathBuf>, build: impl FnOnce() -> PathBuf) -> PathBuf {
    cell.get_or_init(build).clone()
}

/// The Rust example component `greet` as a wasm32-wasip1 command.
pub fn greet_wasm() -> PathBuf {
    static CELL: OnceLock<PathBuf> = OnceLock::new();
    once(&CELL, || {
        cargo_build(&[
            "-p",
            "flow-sdk",
            "--example",
            "greet",
            "--target",
            "wasm32-wasip1",
        ])
        .join("wasm32-wasip1/debug/examples/greet.wasm")
    })
}

/// The same example built natively.
pub fn greet_native() -> PathBuf {
    static CELL: OnceLock<PathBuf> = OnceLock::new();
    once(&CELL, || {
        cargo_build(&["-p", "flow-sdk", "--example", "greet"]).join("debug/examples/greet")
    })
}

/// The example WASM capability provider (a wasm32-wasip2 component).
pub fn kv_provider_component() -> PathBuf {
    static CELL: OnceLock<PathBuf> = OnceLock::new();
    once(&CELL, || {
        cargo_build(&["-p", "kv-provider", "--target", "wasm32-wasip2"])
            .join("wasm32-wasip2/debug/kv_provider.wasm")
    })
}

/// The example native capability provider (a cdylib).
pub fn kv_provider_library() -> PathBuf {
    static CELL: OnceLock<PathBuf> = OnceLock::new();
    once(&CELL, || {
        cargo_build(&["-p", "kv-provider"]).join("debug/libkv_provider.so")
    })
}

pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            if entry.file_name() != ".jig" {
                copy_dir(&entry.path(), &target);
            }
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The scenario capability provider (artifacts, sink, control, worker,
/// agent-run) as a wasm32-wasip2 component.
pub fn scenario_provider_component() -> PathBuf {
    static CELL: OnceLock<PathBuf> = OnceLock::new();
    once(&CELL, || {
        cargo_build(&[
            "-p",
            "scenario-native-provider",
            "--target",
            "wasm32-wasip2",
        ])
        .join("wasm32-wasip2/debug/scenario_native_provider.wasm")
    })
}

/// The same scenario provider as a native library (a cdylib).
pub fn scenario_provider_library() -> PathBuf {
    static CELL: OnceLock<PathBuf> = OnceLock::new();
    once(&CELL, || {
        cargo_build(&["-p", "scenario-native-provider"])
            .join("debug/libscenario_native_provider.so")
    })
}

/// `<dir>/.test-config-home/jig/host.toml` declaring one provider `name`
/// of `kind` (`wasm` or `native`) at `path`.
pub fn configure_provider(dir: &Path, name: &str, kind: &str, path: &Path) {
    let config = format!(
        "[[providers]]\nname = \"{name}\"\nkind = \"{kind}\"\npath = \"{}\"\n",
        path.display()
    );
    write_files(dir, &[(".test-config-home/jig/host.toml", &config)]);
}

/// Command lines of live processes that mention `marker`.
pub fn processes_mentioning(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if text.contains(marker) {
                found.push(text);
            }
        }
    }
    found
}

/// Every live process descending from `root`, not `root` itself.
pub fn descendants(root: u32) -> Vec<u32> {
    let mut parents = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // After the command's closing parenthesis: state, then ppid.
        let ppid = stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(ppid) = ppid {
            parents.push((pid, ppid));
        }
    }
    let mut found = vec![root];
    let mut next = 0;
    while next < found.len() {
        let parent = found[next];
        found.extend(
            parents
                .iter()
                .filter(|(_, ppid)| *ppid == parent)
                .map(|(pid, _)| *pid),
        );
        next += 1;
    }
    found.remove(0);
    found
}

/// Does process `pid` catch `signal` (a handler installed: its bit in
/// `SigCgt`)?
pub fn catches(pid: u32, signal: i32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (signal - 1)) != 0)
}

/// Does a process own the project at `root` (a FLOCK on its
/// `.jig/owner.lock` in /proc/locks)?
pub fn owner_lock_held(root: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(root.join(".jig/owner.lock")) else {
        return false;
    };
    let inode = format!(":{}", meta.ino());
    let locks = std::fs::read_to_string("/proc/locks").unwrap();
    locks.lines().any(|line| {
        // `N: FLOCK ADVISORY WRITE PID MAJOR:MINOR:INODE ...`; a blocked
        // waiter's line has `->` before its type.
        let fields: Vec<&str> = line.split_whitespace().collect();
        fields.get(1) == Some(&"FLOCK") && fields.get(5).is_some_and(|f| f.ends_with(&inode))
    })
}

/// The ACP Agent worker `jig-agent-acp` beside the `jig` under test (its
/// own package, providers/acp, outside this workspace). `.ci/test` builds
/// it there first; when it is missing (a plain `cargo test`), it is built
/// once per test process into target/guests (so the outer cargo's build
/// lock is not involved) and installed beside `jig`. An existing one is
/// used as it is: rebuild it after changing providers/acp.
pub fn acp_worker() -> PathBuf {
    static CELL: OnceLock<PathBuf> = OnceLock::new();
    once(&CELL, || {
        let jig = PathBuf::from(env!("CARGO_BIN_EXE_jig"));
        let installed = jig.with_file_name("jig-agent-acp");
        if installed.is_file() {
            return installed;
        }
        let target_dir = workspace().join("target").join("guests");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .current_dir(workspace())
            .args([
                "build",
                "--quiet",
                "--manifest-path",
                "providers/acp/Cargo.toml",
            ])
            .arg("--target-dir")
            .arg(&target_dir)
            .status()
            .expect("cargo runs");
        assert!(status.success(), "cargo build of providers/acp failed");
        // Copied next to the final name, then renamed: never half a file.
        let partial = jig.with_file_name(format!(".jig-agent-acp.{}", std::process::id()));
        std::fs::copy(target_dir.join("debug/jig-agent-acp"), &partial).unwrap();
        std::fs::rename(&partial, &installed).unwrap();
        installed
    })
}

/// Debian's PostgreSQL server binaries (`postgresql` package, .ci/setup).
pub fn postgres_bin(name: &str) -> PathBuf {
    let base = Path::new("/usr/lib/postgresql");
    let mut versions: Vec<PathBuf> = std::fs::read_dir(base)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    versions.sort();
    versions
        .pop()
        .unwrap_or_else(|| panic!("no PostgreSQL under {}; run .ci/setup", base.display()))
        .join("bin")
        .join(name)
}

/// The unprivileged account the test PostgreSQL runs as (it refuses root).
const POSTGRES_UID: u32 = 65534;

/// A throwaway PostgreSQL on a Unix socket in a temporary directory:
/// initdb'd and started by the test as `nobody` (no TCP, fsync off),
/// stopped with `pg_ctl stop -m immediate` on Drop.
pub struct Postgres {
    dir: tempfile::TempDir,
}

impl Postgres {
    pub fn start() -> Postgres {
        Postgres::start_configured(|_| String::new())
    }

    /// A PostgreSQL that also listens on TCP at 127.0.0.1 and takes only
    /// TLS there (`hostnossl` is rejected), with `cert` and `key` (PEM)
    /// as its certificate: its URL over TCP is [`Postgres::tcp_url`].
    pub fn start_tls(cert: &str, key: &str) -> (Postgres, u16) {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let pg = Postgres::start_configured(|data| {
            use std::os::unix::fs::PermissionsExt;
            for (name, text) in [("server.crt", cert), ("server.key", key)] {
                let path = data.join(name);
                std::fs::write(&path, text).unwrap();
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
                nix::unistd::chown(
                    &path,
                    Some(nix::unistd::Uid::from_raw(POSTGRES_UID)),
                    Some(nix::unistd::Gid::from_raw(POSTGRES_UID)),
                )
                .unwrap();
            }
            let hba = data.join("pg_hba.conf");
            let rules = std::fs::read_to_string(&hba).unwrap();
            std::fs::write(&hba, format!("hostnossl all all 0.0.0.0/0 reject\n{rules}")).unwrap();
            format!("listen_addresses = '127.0.0.1'\nport = {port}\nssl = on\n")
        });
        (pg, port)
    }

    /// The URL of [`Postgres::start_tls`]'s TCP listener at `host`.
    pub fn tcp_url(host: &str, port: u16, sslmode: &str) -> String {
        format!("postgresql://jig@{host}:{port}/postgres?sslmode={sslmode}")
    }

    /// Initialise and start; `configure` prepares the data directory and
    /// returns lines that override `postgresql.conf`'s.
    fn start_configured(configure: impl FnOnce(&Path) -> String) -> Postgres {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        nix::unistd::chown(
            dir.path(),
            Some(nix::unistd::Uid::from_raw(POSTGRES_UID)),
            Some(nix::unistd::Gid::from_raw(POSTGRES_UID)),
        )
        .unwrap();
        let pg = Postgres { dir };
        let data = pg.data();
        let out = pg
            .as_postgres(&postgres_bin("initdb"))
            .args(["-A", "trust", "-U", "jig", "-E", "UTF8", "--no-sync", "-D"])
            .arg(&data)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let conf = format!(
            "listen_addresses = ''\nunix_socket_directories = '{}'\nfsync = off\n\
             synchronous_commit = off\nfull_page_writes = off\nmax_connections = 200\n{}",
            pg.dir.path().display(),
            configure(&data)
        );
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(data.join("postgresql.conf"))
            .unwrap();
        std::io::Write::write_all(&mut file, conf.as_bytes()).unwrap();
        pg.ctl("start");
        pg
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn as_postgres(&self, program: &Path) -> Command {
        let mut command = Command::new("setpriv");
        command
            .arg(format!("--reuid={POSTGRES_UID}"))
            .arg(format!("--regid={POSTGRES_UID}"))
            .arg("--clear-groups")
            .arg(program)
            .env("LC_ALL", "C")
            .current_dir(self.dir.path());
        command
    }

    fn ctl(&self, action: &str) {
        let mut command = self.as_postgres(&postgres_bin("pg_ctl"));
        command.args(["-w", "-t", "60", "-D"]).arg(self.data());
        match action {
            "start" => command
                .args(["-l"])
                .arg(self.dir.path().join("log"))
                .arg("start"),
            other => command.args(["-m", other, "stop"]),
        };
        let out = command.output().unwrap();
        assert!(
            out.status.success(),
            "pg_ctl {action}: {}{}",
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
        );
    }

    /// Stop (fast) until [`Postgres::start_again`].
    pub fn stop(&self) {
        self.ctl("fast");
    }

    /// Start again after [`Postgres::stop`], on the same socket and data.
    pub fn start_again(&self) {
        self.ctl("start");
    }

    /// Stop (fast) and start again, on the same socket and data.
    pub fn restart(&self) {
        self.ctl("fast");
        self.ctl("start");
    }

    /// The database URL (no password: local trust).
    pub fn url(&self) -> String {
        format!(
            "postgresql:///postgres?host={}&user=jig",
            self.dir.path().display()
        )
    }

    /// Run SQL through psql; returns its unaligned, tuples-only output.
    pub fn sql(&self, statement: &str) -> String {
        let out = Command::new(postgres_bin("psql"))
            .args(["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h"])
            .arg(self.dir.path())
            .args(["-U", "jig", "-d", "postgres", "-c", statement])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "psql: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self
            .as_postgres(&postgres_bin("pg_ctl"))
            .args(["-D"])
            .arg(self.data())
            .args(["-m", "immediate", "stop"])
            .output();
    }
}

/// Every file under `dir`, by relative path.
pub fn tree(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut files = std::collections::BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                pending.push(entry.path());
            } else {
                let rel = entry
                    .path()
                    .strip_prefix(dir)
                    .unwrap()
                    .to_string_lossy()
                    .to_string();
                files.insert(rel, std::fs::read(entry.path()).unwrap());
            }
        }
    }
    files
}

/// A bearer token file as `jig serve` takes it: `token` (at least 32
/// bytes) in a file only its owner can read.
pub fn write_token(path: &Path, token: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, format!("{token}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}
