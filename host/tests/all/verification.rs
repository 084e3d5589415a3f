//! Installation verification (seed 002 §9) through the real binary: the
//! `cached`, `strict` and `fast` policies over an installed runtime, the
//! cache's safety rules, `doctor` as a reader, and the usage and
//! configuration errors.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::support::*;

/// A project whose `flow.py` runs under a runtime the test owns: a copy
/// of the system Python's ELF executable (a `#!` wrapper has no provable
/// runtime view) beside a link to its standard library, configured in
/// host.toml.
struct Fixture {
    project: tempfile::TempDir,
    runtime: PathBuf,
    cache_home: tempfile::TempDir,
}

/// The system Python with a trailing revision marker: the loader ignores
/// bytes past the executable's segments, so each revision runs alike.
fn python_copy(revision: &str) -> Vec<u8> {
    let mut bytes = std::fs::read(system_python()).unwrap();
    bytes.extend_from_slice(format!("\n# runtime copy, revision {revision}\n").as_bytes());
    bytes
}

fn system_python() -> PathBuf {
    std::fs::canonicalize("/usr/bin/python3").expect("python3 is installed")
}

fn fixture() -> Fixture {
    let project = project(&[
        ("flows/hello/FLOW.md", "---\nname: hello\ndescription: Greets.\n---\n"),
        (
            "flows/hello/flow.py",
            "from jiggy.flow import handle\n\nasync def run(ctx):\n    return {\"outcome\": \"done\", \"output\": \"hi\"}\n\nhandle(run)\n",
        ),
    ]);
    let python = system_python();
    let name = python.file_name().unwrap();
    let runtime = project.path().join("runtime/bin").join(name);
    std::fs::create_dir_all(runtime.parent().unwrap()).unwrap();
    std::fs::write(&runtime, python_copy("a")).unwrap();
    let lib = project.path().join("runtime/lib");
    std::fs::create_dir_all(&lib).unwrap();
    let stdlib = python
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("lib")
        .join(name);
    std::os::unix::fs::symlink(stdlib, lib.join(name)).unwrap();
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o755)).unwrap();
    write_files(
        project.path(),
        &[(
            ".test-config-home/jig/host.toml",
            &format!("[runtimes]\npython = \"{}\"\n", runtime.display()),
        )],
    );
    let cache_home = tempfile::tempdir().unwrap();
    std::fs::set_permissions(cache_home.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    Fixture {
        project,
        runtime,
        cache_home,
    }
}

impl Fixture {
    fn jig(&self, args: &[&str]) -> Run {
        self.jig_with(args, &[])
    }

    fn jig_with(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut command = jig(self.project.path());
        command
            .env("XDG_CACHE_HOME", self.cache_home.path())
            .env_remove("JIG_VERIFICATION");
        for (k, v) in env {
            command.env(k, v);
        }
        output(command.args(args).output().unwrap())
    }

    fn cache_file(&self) -> PathBuf {
        self.cache_home
            .path()
            .join("jig/installation-verification/entries.json")
    }

    /// Rewrite the runtime in place, same length, keeping its mtime.
    fn edit_keeping_mtime(&self) {
        let mtime = std::fs::metadata(&self.runtime)
            .unwrap()
            .modified()
            .unwrap();
        let edited = python_copy("b");
        assert_eq!(edited.len(), python_copy("a").len());
        std::fs::write(&self.runtime, edited).unwrap();
        let file = std::fs::File::options()
            .write(true)
            .open(&self.runtime)
            .unwrap();
        file.set_modified(mtime).unwrap();
        assert_eq!(
            std::fs::metadata(&self.runtime)
                .unwrap()
                .modified()
                .unwrap(),
            mtime
        );
    }
}

fn assert_review_required(run: &Run) {
    assert_eq!(run.status, 1, "{run:?}");
    let terminal = run.json();
    assert_eq!(terminal["code"], "REVIEW_REQUIRED", "{run:?}");
    assert_eq!(
        terminal["details"]["reason"],
        "EXECUTION_ENVIRONMENT_CHANGED"
    );
    assert_eq!(terminal["details"]["flowStarted"], false);
}

#[test]
fn cached_sees_an_in_place_edit_with_the_mtime_kept_and_fast_trusts_the_path() {
    let f = fixture();
    let review = f.jig(&["review", "--yes"]);
    assert_eq!(review.status, 0, "{review:?}");
    // Review recorded the runtime's digest in the private cache.
    let canonical = std::fs::canonicalize(&f.runtime).unwrap();
    let cache = std::fs::read_to_string(f.cache_file()).unwrap();
    assert!(cache.contains(&*canonical.to_string_lossy()), "{cache}");
    let mode = std::fs::metadata(f.cache_file().parent().unwrap())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
    let run = f.jig(&["run", "flow:flows/hello"]);
    assert_eq!(run.status, 0, "{run:?}");

    f.edit_keeping_mtime();
    // fast: the stored digest for the path is trusted, the Run starts.
    let run = f.jig(&["run", "flow:flows/hello", "--verification", "fast"]);
    assert_eq!(run.status, 0, "{run:?}");
    // cached: the change time moved, the bytes are hashed, the change found.
    assert_review_required(&f.jig(&["run", "flow:flows/hello"]));
    // strict: hashed every time.
    assert_review_required(&f.jig(&["run", "flow:flows/hello", "--verification", "strict"]));
    // The variable selects the policy too; cached has recorded the new bytes.
    assert_review_required(&f.jig_with(
        &["run", "flow:flows/hello"],
        &[("JIG_VERIFICATION", "fast")],
    ));
    let review = f.jig(&["review", "--yes"]);
    assert_eq!(review.status, 0, "{review:?}");
    let run = f.jig(&["run", "flow:flows/hello"]);
    assert_eq!(run.status, 0, "{run:?}");
}

#[test]
fn a_metadata_change_with_the_same_bytes_still_runs() {
    let f = fixture();
    assert_eq!(f.jig(&["review", "--yes"]).status, 0);
    let before = std::fs::read_to_string(f.cache_file()).unwrap();
    std::fs::set_permissions(&f.runtime, std::fs::Permissions::from_mode(0o750)).unwrap();
    let run = f.jig(&["run", "flow:flows/hello"]);
    assert_eq!(run.status, 0, "{run:?}");
    let after = std::fs::read_to_string(f.cache_file()).unwrap();
    assert_ne!(before, after, "the entry now records the new mode");
    // Strict never writes the cache.
    std::fs::set_permissions(&f.runtime, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = f.jig(&["run", "flow:flows/hello", "--verification", "strict"]);
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(std::fs::read_to_string(f.cache_file()).unwrap(), after);
}

#[test]
fn unsafe_cache_locations_and_corrupt_entries_fall_back_to_hashing() {
    let f = fixture();
    // A cache home writable by others is not used.
    let open = tempfile::tempdir().unwrap();
    std::fs::set_permissions(open.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let env = [("XDG_CACHE_HOME", open.path().to_str().unwrap())];
    let review = f.jig_with(&["review", "--yes"], &env);
    assert_eq!(review.status, 0, "{review:?}");
    assert!(!open.path().join("jig").exists());
    // A symlinked route is not followed.
    let real = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(real.path().join("installation-verification")).unwrap();
    let home = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(real.path(), home.path().join("jig")).unwrap();
    let env = [("XDG_CACHE_HOME", home.path().to_str().unwrap())];
    let run = f.jig_with(&["run", "flow:flows/hello"], &env);
    assert_eq!(run.status, 0, "{run:?}");
    assert!(!real
        .path()
        .join("installation-verification/entries.json")
        .exists());
    // A corrupt cache is ignored and replaced.
    std::fs::create_dir_all(f.cache_file().parent().unwrap()).unwrap();
    std::fs::set_permissions(
        f.cache_home.path().join("jig"),
        std::fs::Permissions::from_mode(0o700),
    )
    .unwrap();
    std::fs::set_permissions(
        f.cache_file().parent().unwrap(),
        std::fs::Permissions::from_mode(0o700),
    )
    .unwrap();
    std::fs::write(f.cache_file(), "{\"format\": 7").unwrap();
    let run = f.jig(&["run", "flow:flows/hello"]);
    assert_eq!(run.status, 0, "{run:?}");
    let rewritten: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(f.cache_file()).unwrap()).unwrap();
    assert_eq!(rewritten["format"], "jig-installation-verification/1");
}

#[test]
fn doctor_reads_the_cache_but_never_writes_it() {
    let f = fixture();
    let doctor = f.jig(&["doctor"]);
    assert!(
        doctor.stdout.contains("installation verification: cached"),
        "{doctor:?}"
    );
    assert!(!f.cache_home.path().join("jig").exists(), "nothing created");
    assert_eq!(f.jig(&["review", "--yes"]).status, 0);
    let before = std::fs::read(f.cache_file()).unwrap();
    std::fs::set_permissions(&f.runtime, std::fs::Permissions::from_mode(0o750)).unwrap();
    let doctor = f.jig(&["doctor", "--verification", "strict"]);
    assert!(
        doctor.stdout.contains("installation verification: strict"),
        "{doctor:?}"
    );
    let _ = f.jig(&["doctor"]);
    assert_eq!(std::fs::read(f.cache_file()).unwrap(), before);
    // Doctor proves each runtime's view as a Run would, and keeps none.
    let views = f.cache_file().parent().unwrap().join("runtime-view");
    assert!(!views.exists(), "no runtime view kept");
}

#[test]
fn bad_policies_are_usage_or_configuration_errors_before_anything_runs() {
    let f = fixture();
    for args in [
        &["run", "flow:flows/hello", "--verification", "inspect"][..],
        &["run", "flow:flows/hello", "--verification"][..],
        &["review", "--verification", "fast", "--verification", "fast"][..],
        &["doctor", "--verification", ""][..],
    ] {
        let run = f.jig(args);
        assert_eq!(run.status, 2, "{args:?}: {run:?}");
        assert!(!f.project.path().join(".jig").exists(), "{args:?}");
    }
    let env = [("JIG_VERIFICATION", "paranoid")];
    let run = f.jig_with(&["review", "--yes"], &env);
    assert_eq!(run.status, 1, "{run:?}");
    assert!(
        run.stderr
            .starts_with("JIG_CONFIG_INVALID: JIG_VERIFICATION must be cached, strict, fast"),
        "{run:?}"
    );
    assert!(!f.project.path().join(".jig").exists());
    // A valid flag overrides an invalid variable.
    let run = f.jig_with(&["review", "--yes", "--verification", "strict"], &env);
    assert_eq!(run.status, 0, "{run:?}");
}

/// A `jig serve` of the fixture's project with `extra` arguments: the
/// daemon (its socket in `dir`), and a submission of `flows/hello` that
/// returns its terminal.
fn serve_fixture<'a>(
    f: &Fixture,
    dir: &'a Path,
    extra: &[&str],
) -> (std::process::Child, impl Fn() -> serde_json::Value + 'a) {
    let socket = dir.join("jig.sock");
    let daemon = jig(f.project.path())
        .env("XDG_CACHE_HOME", f.cache_home.path())
        .env_remove("JIG_VERIFICATION")
        .args([
            "-C",
            f.project.path().to_str().unwrap(),
            "serve",
            "--socket",
        ])
        .arg(&socket)
        .args(extra)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The served name: the directory's basename, lowercased, each run of
    // other bytes one `-`.
    let base = f.project.path().file_name().unwrap().to_str().unwrap();
    let name = base
        .to_ascii_lowercase()
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    let started = std::time::Instant::now();
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(started.elapsed() < std::time::Duration::from_secs(60));
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let submit = move || {
        let out = std::process::Command::new("curl")
            .args(["-sS", "--unix-socket"])
            .arg(&socket)
            .args(["-H", "content-type: application/json", "-d"])
            .arg(r#"{"target":"flow:flows/hello","input":null}"#)
            .arg(format!("http://jig/v1/projects/{name}/runs"))
            .output()
            .unwrap();
        serde_json::from_slice::<serde_json::Value>(&out.stdout)
            .unwrap_or_else(|_| serde_json::json!(String::from_utf8_lossy(&out.stdout)))
    };
    (daemon, submit)
}

/// `jig serve` verifies the runtime at every Run, as `jig run` does, but
/// under `cached` hashes it once: what it learned is written to the cache,
/// and a later in-place edit (the modification time kept) is still seen at
/// the next Run.
#[test]
fn a_daemon_keeps_the_runtime_digest_and_still_sees_the_runtime_change() {
    let f = fixture();
    let review = f.jig(&["review", "--yes"]);
    assert_eq!(review.status, 0, "{review:?}");
    // The daemon must learn the digest itself.
    std::fs::remove_file(f.cache_file()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // A Python made ahead would hold the runtime open for execution:
    // rewriting it in place would fail (ETXTBSY), so none is made.
    let (mut daemon, submit) = serve_fixture(&f, dir.path(), &["--envelopes-ahead", "0"]);
    for _ in 0..2 {
        let terminal = submit();
        assert_eq!(terminal["status"], "succeeded", "{terminal}");
    }
    // A Run's verification is kept after its Run answered: wait for it.
    let canonical = std::fs::canonicalize(&f.runtime).unwrap();
    let kept = || std::fs::read_to_string(f.cache_file()).unwrap_or_default();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !kept().contains(&*canonical.to_string_lossy()) {
        assert!(
            std::time::Instant::now() < until,
            "the runtime digest was not kept: {}",
            kept()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    f.edit_keeping_mtime();
    let terminal = submit();
    assert_eq!(terminal["code"], "REVIEW_REQUIRED", "{terminal}");
    assert_eq!(
        terminal["details"]["reason"],
        "EXECUTION_ENVIRONMENT_CHANGED"
    );
    let _ = daemon.kill();
    let _ = daemon.wait();
}

/// With a Python interpreter waiting ahead for the next Run, the runtime
/// replaced by a new file (as a package manager does) is seen at that Run:
/// `REVIEW_REQUIRED` before the gate opens, and the interpreter made ahead
/// of it ends, its work root removed.
#[test]
fn a_runtime_replaced_under_an_interpreter_waiting_ahead_is_seen_and_it_ends() {
    let f = fixture();
    let review = f.jig(&["review", "--yes"]);
    assert_eq!(review.status, 0, "{review:?}");
    let dir = tempfile::tempdir().unwrap();
    let (mut daemon, submit) = serve_fixture(&f, dir.path(), &[]);
    let terminal = submit();
    assert_eq!(terminal["status"], "succeeded", "{terminal}");
    let runtime = std::fs::canonicalize(&f.runtime).unwrap();
    let waiting = || {
        std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
            std::fs::read_link(entry.path().join("exe")).is_ok_and(|exe| exe == runtime)
        })
    };
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !waiting() {
        assert!(
            std::time::Instant::now() < until,
            "no interpreter waiting ahead"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let replacement = runtime.with_extension("new");
    std::fs::write(&replacement, python_copy("b")).unwrap();
    std::fs::set_permissions(&replacement, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&replacement, &runtime).unwrap();
    let terminal = submit();
    assert_eq!(terminal["code"], "REVIEW_REQUIRED", "{terminal}");
    assert_eq!(
        terminal["details"]["reason"],
        "EXECUTION_ENVIRONMENT_CHANGED"
    );
    assert_eq!(terminal["details"]["flowStarted"], false);
    let ahead = |e: &std::fs::DirEntry| e.file_name().to_string_lossy().starts_with("ahead-");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let roots = std::fs::read_dir(f.project.path().join(".jig/work"))
            .map(|d| d.flatten().filter(ahead).count())
            .unwrap_or(0);
        let old_interpreters = std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
            std::fs::read_link(entry.path().join("exe"))
                .is_ok_and(|exe| exe.to_string_lossy().ends_with("(deleted)"))
                && std::fs::read(entry.path().join("cmdline")).is_ok_and(|c| {
                    String::from_utf8_lossy(&c).contains(&*f.project.path().to_string_lossy())
                })
        });
        if roots == 0 && !old_interpreters {
            break;
        }
        assert!(
            std::time::Instant::now() < until,
            "the interpreter made ahead outlived the change"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = daemon.kill();
    let _ = daemon.wait();
}
