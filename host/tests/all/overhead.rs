//! Per-Run work a Run does not repeat: the admitted package read
//! and verified once, and compiled `flow.wasm` code reused from the
//! owner-private module cache. The guarantees stay what a user sees: a
//! changed store byte still stops the Run before the Flow starts, and an
//! unsafe cache home is never used.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::support::*;

const FLOW_MD: &str = "---\nname: greet\ndescription: Greet a name.\n---\n\nSay hello.\n";

/// A project with `flows/greet/<entry>` copied from `artifact`, reviewed,
/// and a cache home of the given mode.
fn fixture(
    entry: &str,
    artifact: &Path,
    cache_mode: u32,
) -> (tempfile::TempDir, tempfile::TempDir) {
    let dir = project(&[("flows/greet/FLOW.md", FLOW_MD)]);
    std::fs::copy(artifact, dir.path().join("flows/greet").join(entry)).unwrap();
    let cache = reviewed_with_cache(dir.path(), cache_mode);
    (dir, cache)
}

/// A cache home with `cache_mode`, and the project at `dir` reviewed and
/// approved with it.
fn reviewed_with_cache(dir: &Path, cache_mode: u32) -> tempfile::TempDir {
    let cache = tempfile::tempdir().unwrap();
    std::fs::set_permissions(cache.path(), std::fs::Permissions::from_mode(cache_mode)).unwrap();
    let review = run_with_cache(dir, cache.path(), &["review", "--yes"]);
    assert_eq!(review.status, 0, "{review:?}");
    cache
}

/// The output of a Run of `target` with a null input, which succeeds.
fn output_of(dir: &Path, cache: &Path, target: &str) -> serde_json::Value {
    let run = run_with_cache(dir, cache, &["run", target, "--input", "null"]);
    assert_eq!(run.status, 0, "{run:?}");
    run.json()["output"].clone()
}

fn run_with_cache(dir: &Path, cache: &Path, args: &[&str]) -> Run {
    output(
        jig(dir)
            .env("XDG_CACHE_HOME", cache)
            .env_remove("JIG_VERIFICATION")
            .args(args)
            .output()
            .unwrap(),
    )
}

fn greet(dir: &Path, cache: &Path) -> Run {
    run_with_cache(
        dir,
        cache,
        &["run", "flow:flows/greet", "--input", "\"Ada\""],
    )
}

fn assert_greeted(run: &Run) {
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(
        run.json()["output"],
        serde_json::json!({"message": "Hello, Ada!"}),
        "{run:?}"
    );
}

/// The compiled modules below the cache home, with their modification times.
fn cached_modules(cache: &Path) -> Vec<(PathBuf, std::time::SystemTime)> {
    let mut found = Vec::new();
    let mut stack = vec![cache.join("jig/wasm-modules")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                stack.push(path);
            } else if path.extension().is_none() {
                found.push((path, meta.modified().unwrap()));
            }
        }
    }
    found.sort();
    found
}

#[test]
fn a_changed_store_byte_stops_the_run_before_the_flow_starts() {
    let (dir, cache) = fixture("flow.bin", &greet_native(), 0o700);
    assert_greeted(&greet(dir.path(), cache.path()));
    // The largest blob is flow.bin; flip one byte in its middle.
    let blobs = dir.path().join(".jig/store/blobs");
    let blob = std::fs::read_dir(&blobs)
        .unwrap()
        .flatten()
        .max_by_key(|e| e.metadata().unwrap().len())
        .unwrap()
        .path();
    let mut bytes = std::fs::read(&blob).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::set_permissions(&blob, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(&blob, bytes).unwrap();
    let run = greet(dir.path(), cache.path());
    assert_eq!(run.status, 1, "{run:?}");
    assert!(run.stderr.starts_with("PROJECT_STATE_INVALID: "), "{run:?}");
    assert!(run.stdout.is_empty(), "{run:?}");
    assert!(!run.stderr.contains("greeting Ada"), "{run:?}");
}

#[test]
fn a_flow_wasm_run_reuses_its_compiled_module_from_the_private_cache() {
    let (dir, cache) = fixture("flow.wasm", &greet_wasm(), 0o700);
    assert!(cached_modules(cache.path()).is_empty());
    assert_greeted(&greet(dir.path(), cache.path()));
    let first = cached_modules(cache.path());
    assert_eq!(first.len(), 1, "one compiled module is cached: {first:?}");
    let mode = std::fs::metadata(cache.path().join("jig/wasm-modules"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "the module cache is owner-private");
    // The second Run reads it back: the same result, nothing recompiled
    // or rewritten.
    assert_greeted(&greet(dir.path(), cache.path()));
    assert_eq!(cached_modules(cache.path()), first);
}

#[test]
fn a_corrupt_compiled_module_is_compiled_again_not_mapped() {
    let (dir, cache) = fixture("flow.wasm", &greet_wasm(), 0o700);
    assert_greeted(&greet(dir.path(), cache.path()));
    let cached = cached_modules(cache.path());
    assert_eq!(cached.len(), 1, "{cached:?}");
    let path = &cached[0].0;
    assert!(
        path.starts_with(cache.path().join("jig/wasm-modules/compiled")),
        "{path:?}"
    );
    std::fs::write(path, b"\x7fELF not compiled code").unwrap();
    assert_greeted(&greet(dir.path(), cache.path()));
    let again = std::fs::read(path).unwrap();
    assert!(again.len() > 1024, "replaced by the compiled module");
}

#[test]
fn an_unsafe_cache_home_gets_no_module_cache_and_the_run_still_succeeds() {
    let (dir, cache) = fixture("flow.wasm", &greet_wasm(), 0o777);
    assert_greeted(&greet(dir.path(), cache.path()));
    assert!(
        !cache.path().join("jig/wasm-modules").exists(),
        "a cache home others can write is never used"
    );
}

#[test]
fn a_run_over_an_unchanged_installation_leaves_the_verification_cache_unwritten() {
    use std::os::unix::fs::MetadataExt;
    let (dir, cache) = fixture("flow.bin", &greet_native(), 0o700);
    assert_greeted(&greet(dir.path(), cache.path()));
    let file = cache
        .path()
        .join("jig/installation-verification/entries.json");
    let identity = |m: std::fs::Metadata| (m.ino(), m.mtime(), m.mtime_nsec(), m.len());
    let before = identity(std::fs::metadata(&file).unwrap());
    assert_greeted(&greet(dir.path(), cache.path()));
    assert_eq!(
        identity(std::fs::metadata(&file).unwrap()),
        before,
        "nothing new was verified, so the cache is not rewritten"
    );
}

/// The shared read-only tree of the one admitted package in `dir`.
fn package_trees(dir: &Path) -> Vec<PathBuf> {
    let mut trees: Vec<PathBuf> = std::fs::read_dir(dir.join(".jig/store/trees"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    trees.sort();
    trees
}

/// A `flow.py` that reports, from inside its envelope, the inode and
/// device of the file it runs from.
const WHERE_AM_I_PY: &str = "import os, sys\nfrom jiggy.flow import handle\n\nasync def run(ctx):\n    st = os.stat(__file__)\n    return {\"outcome\": \"done\", \"output\": {\"inode\": st.st_ino, \"path\": __file__}}\n\nhandle(run)\n";

#[test]
fn two_runs_of_one_package_run_from_one_shared_read_only_tree() {
    use std::os::unix::fs::MetadataExt;
    let dir = project(&[
        ("flows/where/FLOW.md", FLOW_MD),
        ("flows/where/flow.py", WHERE_AM_I_PY),
    ]);
    let cache = reviewed_with_cache(dir.path(), 0o700);
    let where_am_i = || output_of(dir.path(), cache.path(), "flow:flows/where");
    let first = where_am_i();
    let second = where_am_i();
    let trees = package_trees(dir.path());
    assert_eq!(trees.len(), 1, "one materialisation: {trees:?}");
    let entry = trees[0].join("flow.py");
    let host = std::fs::metadata(&entry).unwrap();
    // Both Runs ran the very file of that one tree (a bind mount shows the
    // host inode), not a copy of their own; inside it appears where a
    // private copy would, so the envelope shows nothing of the store.
    for output in [&first, &second] {
        assert_eq!(output["inode"], serde_json::json!(host.ino()), "{output}");
        let path = output["path"].as_str().unwrap();
        assert!(path.ends_with("/package/flow.py"), "{output}");
        assert!(!path.contains("/store/"), "{output}");
    }
    assert_eq!(host.mode() & 0o222, 0, "the entrypoint is read-only");
    let tree = std::fs::metadata(&trees[0]).unwrap();
    assert_eq!(tree.mode() & 0o7777, 0o700, "the tree is owner-private");
    let store = std::fs::metadata(dir.path().join(".jig/store/trees")).unwrap();
    assert_eq!(store.mode() & 0o077, 0, "the trees are owner-private");
}

#[test]
fn a_new_generation_keeps_only_the_trees_it_runs() {
    let dir = project(&[
        ("flows/where/FLOW.md", FLOW_MD),
        ("flows/where/flow.py", WHERE_AM_I_PY),
        ("flows/stay/FLOW.md", FLOW_MD),
        ("flows/stay/flow.py", WHERE_AM_I_PY),
    ]);
    let cache = reviewed_with_cache(dir.path(), 0o700);
    let where_before = output_of(dir.path(), cache.path(), "flow:flows/where");
    output_of(dir.path(), cache.path(), "flow:flows/stay");
    // Both Flows have the same bytes, so one package digest: one tree.
    let trees = package_trees(dir.path());
    assert_eq!(trees.len(), 1, "{trees:?}");
    let seals = || {
        std::fs::read_dir(dir.path().join(".jig/store/tree-seals"))
            .unwrap()
            .count()
    };
    assert_eq!(seals(), 1);
    // A crash's half-made tree is cleared with the old ones.
    std::fs::create_dir_all(dir.path().join(".jig/store/trees/.jig-tree-left/tree")).unwrap();
    std::fs::write(
        dir.path().join("flows/where/flow.py"),
        format!("{WHERE_AM_I_PY}# changed\n"),
    )
    .unwrap();
    let review = run_with_cache(dir.path(), cache.path(), &["review", "--yes"]);
    assert_eq!(review.status, 0, "{review:?}");
    // The unchanged Flow's tree stays; nothing else was left.
    assert_eq!(package_trees(dir.path()), trees);
    assert!(!dir.path().join(".jig/store/trees/.jig-tree-left").exists());
    let where_after = output_of(dir.path(), cache.path(), "flow:flows/where");
    assert_ne!(where_after["inode"], where_before["inode"]);
    assert_eq!(package_trees(dir.path()).len(), 2);
    assert_eq!(seals(), 2);
    // Admitting the first revision again drops the changed one's tree.
    std::fs::write(dir.path().join("flows/where/flow.py"), WHERE_AM_I_PY).unwrap();
    let review = run_with_cache(dir.path(), cache.path(), &["review", "--yes"]);
    assert_eq!(review.status, 0, "{review:?}");
    assert_eq!(package_trees(dir.path()), trees);
    assert_eq!(seals(), 1);
    output_of(dir.path(), cache.path(), "flow:flows/where");
}

#[test]
fn a_tampered_package_tree_fails_closed_and_is_not_repaired() {
    let (dir, cache) = fixture("flow.bin", &greet_native(), 0o700);
    assert_greeted(&greet(dir.path(), cache.path()));
    let trees = package_trees(dir.path());
    assert_eq!(trees.len(), 1, "{trees:?}");
    let entry = trees[0].join("flow.bin");
    let mut bytes = std::fs::read(&entry).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(&entry, &bytes).unwrap();
    // The mode is restored: only the bytes differ.
    std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o555)).unwrap();
    let run = greet(dir.path(), cache.path());
    assert_eq!(run.status, 1, "{run:?}");
    assert_eq!(run.json()["code"], "PROJECT_STATE_INVALID", "{run:?}");
    assert!(!run.stderr.contains("greeting Ada"), "{run:?}");
    // Never silently made again: the tampered bytes are still there, and
    // the next Run fails the same way.
    assert_eq!(std::fs::read(&entry).unwrap(), bytes);
    let again = greet(dir.path(), cache.path());
    assert_eq!(again.json()["code"], "PROJECT_STATE_INVALID", "{again:?}");
    // An extra file in the tree is a change too.
    let (dir, cache) = fixture("flow.bin", &greet_native(), 0o700);
    assert_greeted(&greet(dir.path(), cache.path()));
    let tree = &package_trees(dir.path())[0];
    std::fs::write(tree.join("extra.txt"), "x").unwrap();
    let run = greet(dir.path(), cache.path());
    assert_eq!(run.json()["code"], "PROJECT_STATE_INVALID", "{run:?}");
}

/// A `flow.py` that asks the import system, for every module of the
/// bundled SDK, whether it would compile source (no usable bytecode) or
/// read the compiled file.
const COMPILES_PY: &str = "import importlib.util, sys\nfrom jiggy.flow import handle\n\nasync def run(ctx):\n    compiled = []\n    names = sorted(n for n in sys.modules if n == 'jiggy' or n.startswith('jiggy.'))\n    for name in names:\n        loader = importlib.util.find_spec(name).loader\n        real = loader.source_to_code\n        loader.source_to_code = lambda *a, _n=name, _r=real, **k: (compiled.append(_n), _r(*a, **k))[1]\n        loader.get_code(name)\n    return {\"outcome\": \"done\", \"output\": {\"modules\": names, \"compiled\": compiled, \"cached\": sys.modules['jiggy.flow'].__cached__}}\n\nhandle(run)\n";

/// Every file and directory below `root` with its inode and mtime.
fn listing(root: &Path) -> Vec<(PathBuf, u64, i64, i64)> {
    use std::os::unix::fs::MetadataExt;
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                stack.push(entry.path());
            }
            found.push((entry.path(), meta.ino(), meta.mtime(), meta.mtime_nsec()));
        }
    }
    found.sort();
    found
}

#[test]
fn the_python_sdk_is_compiled_once_and_runs_from_its_bytecode() {
    let dir = project(&[
        ("flows/sdk/FLOW.md", FLOW_MD),
        ("flows/sdk/flow.py", COMPILES_PY),
    ]);
    let cache = reviewed_with_cache(dir.path(), 0o700);
    let run = || output_of(dir.path(), cache.path(), "flow:flows/sdk");
    let first = run();
    let support = dir.path().join(".jig/store/support");
    let after_first = listing(&support);
    let trees: Vec<_> = after_first
        .iter()
        .filter(|(p, ..)| p.parent() == Some(support.as_path()) && p.is_dir())
        .collect();
    assert_eq!(
        trees.len(),
        1,
        "one SDK tree for this build: {after_first:?}"
    );
    let second = run();
    // The second Run neither writes the SDK tree nor adds bytecode to it.
    assert_eq!(listing(&support), after_first);
    // Every SDK module comes from its compiled file; none is compiled
    // from source during a Run.
    for output in [&first, &second] {
        assert!(output["modules"].as_array().unwrap().len() >= 2, "{output}");
        assert_eq!(output["compiled"], serde_json::json!([]), "{output}");
        let cached = output["cached"].as_str().unwrap();
        assert!(
            cached.ends_with(".cpython-311.pyc") || cached.ends_with(".pyc"),
            "{output}"
        );
        assert!(!cached.contains("/store/"), "{output}");
    }
    // Nothing wrote bytecode next to the package either.
    let tree = &package_trees(dir.path())[0];
    assert!(!tree.join("__pycache__").exists());
}

#[test]
fn a_tampered_python_sdk_tree_fails_closed() {
    let dir = project(&[
        ("flows/sdk/FLOW.md", FLOW_MD),
        ("flows/sdk/flow.py", COMPILES_PY),
    ]);
    let cache = reviewed_with_cache(dir.path(), 0o700);
    let args = ["run", "flow:flows/sdk", "--input", "null"];
    let first = run_with_cache(dir.path(), cache.path(), &args);
    assert_eq!(first.status, 0, "{first:?}");
    let support = dir.path().join(".jig/store/support");
    let pyc = listing(&support)
        .into_iter()
        .map(|(p, ..)| p)
        .find(|p| p.extension().is_some_and(|e| e == "pyc"))
        .expect("a compiled SDK module");
    std::fs::set_permissions(&pyc, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut bytes = std::fs::read(&pyc).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&pyc, &bytes).unwrap();
    std::fs::set_permissions(&pyc, std::fs::Permissions::from_mode(0o444)).unwrap();
    let run = run_with_cache(dir.path(), cache.path(), &args);
    assert_eq!(run.status, 1, "{run:?}");
    assert_eq!(run.json()["code"], "EXECUTION_FAILED", "{run:?}");
    assert_eq!(
        std::fs::read(&pyc).unwrap(),
        bytes,
        "never silently repaired"
    );
}

#[test]
fn a_run_reads_only_the_records_that_may_be_pending_not_the_history() {
    let (dir, cache) = fixture("flow.bin", &greet_native(), 0o700);
    assert_greeted(&greet(dir.path(), cache.path()));
    assert_greeted(&greet(dir.path(), cache.path()));
    let runs = dir.path().join(".jig/runs");
    let settled: Vec<PathBuf> = std::fs::read_dir(&runs)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    assert_eq!(settled.len(), 2, "{settled:?}");
    // A Run is found pending by its own directory, which settled Runs
    // leave: a command lists that, never the history.
    assert_eq!(
        std::fs::read_dir(runs.join("pending")).unwrap().count(),
        0,
        "settled Runs leave nothing pending"
    );
    // A settled record is never read again by a Run: even an unreadable
    // one does not stop the next Run; `jig runs` lists the others and
    // names its file (exit 2: the listing is not whole).
    std::fs::write(&settled[0], "not JSON").unwrap();
    assert_greeted(&greet(dir.path(), cache.path()));
    let listed = run_with_cache(dir.path(), cache.path(), &["runs"]);
    assert_eq!(listed.status, 2, "{listed:?}");
    assert_eq!(listed.stdout.lines().count(), 2, "{listed:?}");
    let file = settled[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        listed.stderr.starts_with("PROJECT_STATE_INVALID: ")
            && listed.stderr.contains(&format!("look at .jig/runs/{file}")),
        "{listed:?}"
    );
}

#[test]
fn a_pending_run_left_by_an_older_jig_beside_the_settled_ones_is_still_fenced() {
    let project = crate::files::files_example();
    let source = crate::files::source_folder();
    let out = tempfile::tempdir().unwrap();
    let killed = output(
        jig(project.path())
            .args(["run", "flow:flows/summarize", "--attach"])
            .arg(format!("source={}", source.path().display()))
            .args(["--input", r#"{"sleepSeconds":20}"#, "--timeout", "60s"])
            .arg("--out")
            .arg(out.path().join("packet"))
            .env("JIG_TEST_ABORT_AFTER_DISPATCH", "1500")
            .output()
            .unwrap(),
    );
    assert_eq!(killed.status, -1, "ended by a signal: {killed:?}");
    // As an older jig left it: the pending record beside the settled
    // ones, no marker, no index, no pending directory.
    let runs = project.path().join(".jig/runs");
    let pending = runs.join("pending");
    for entry in std::fs::read_dir(&pending).unwrap().flatten() {
        std::fs::rename(entry.path(), runs.join(entry.file_name())).unwrap();
    }
    std::fs::remove_dir(&pending).unwrap();
    let listed = run_jig(project.path(), &["runs"]);
    assert_eq!(listed.status, 0, "{listed:?}");
    let fields: Vec<&str> = listed.stdout.lines().next().unwrap().split('\t').collect();
    assert_eq!(
        &fields[1..],
        ["lost", "flow:flows/summarize", "COORDINATOR_LOST"]
    );
    assert_eq!(
        std::fs::read_dir(&pending).unwrap().count(),
        0,
        "moved over and settled"
    );
}

/// A `flow.ts` that reports, from inside its envelope under Bun, the
/// inode of the file it runs from.
const WHERE_AM_I_TS: &str = "import { handle } from \"@jigging/flow\";\nimport { statSync } from \"node:fs\";\nimport { fileURLToPath } from \"node:url\";\n\nawait handle(async () => {\n  const path = fileURLToPath(import.meta.url);\n  return { outcome: \"done\", output: { inode: statSync(path).ino, path } };\n});\n";

/// A project with `flows/<name>/flow.ts` of `source`, run by this
/// machine's Bun (and never by Deno).
fn bun_project(name: &str, source: &str) -> tempfile::TempDir {
    let Some(bun) = ["/usr/bin/bun", "/usr/local/bin/bun"]
        .into_iter()
        .find(|p| Path::new(p).exists())
    else {
        panic!("bun is not installed (npm install -g bun); CI installs it");
    };
    let (md, ts) = (
        format!("flows/{name}/FLOW.md"),
        format!("flows/{name}/flow.ts"),
    );
    let config = format!("[runtimes]\nbun = \"{bun}\"\ndeno = \"/nonexistent/deno\"\n");
    project(&[
        (md.as_str(), FLOW_MD),
        (ts.as_str(), source),
        (".test-config-home/jig/host.toml", config.as_str()),
    ])
}

/// Bun Runs share the one read-only tree of their package too, and a
/// tampered tree stops the next Run before the Flow starts.
#[test]
fn two_bun_runs_share_one_tree_and_a_tampered_one_fails_closed() {
    use std::os::unix::fs::MetadataExt;
    let dir = bun_project("where", WHERE_AM_I_TS);
    let cache = reviewed_with_cache(dir.path(), 0o700);
    let where_am_i = || {
        run_with_cache(
            dir.path(),
            cache.path(),
            &["run", "flow:flows/where", "--input", "null"],
        )
    };
    let outputs: Vec<serde_json::Value> = (0..2)
        .map(|_| {
            let run = where_am_i();
            assert_eq!(run.status, 0, "{run:?}");
            run.json()["output"].clone()
        })
        .collect();
    let trees = package_trees(dir.path());
    assert_eq!(trees.len(), 1, "one materialisation: {trees:?}");
    let entry = trees[0].join("flow.ts");
    let host = std::fs::metadata(&entry).unwrap();
    for output in &outputs {
        assert_eq!(output["inode"], serde_json::json!(host.ino()), "{output}");
        let path = output["path"].as_str().unwrap();
        assert!(path.ends_with("/package/flow.ts"), "{output}");
        assert!(!path.contains("/store/"), "{output}");
    }
    let mut bytes = std::fs::read(&entry).unwrap();
    bytes.extend_from_slice(b"\n// tampered\n");
    std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(&entry, &bytes).unwrap();
    std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o444)).unwrap();
    let run = where_am_i();
    assert_eq!(run.status, 1, "{run:?}");
    assert_eq!(run.json()["code"], "PROJECT_STATE_INVALID", "{run:?}");
}

/// A `flow.ts` that reports where `@jigging/flow` was imported from.
const SDK_WHERE_TS: &str = "import { handle } from \"@jigging/flow\";\n\nawait handle(async () => {\n  const url = import.meta.resolve(\"@jigging/flow\");\n  return { outcome: \"done\", output: { sdk: url } };\n});\n";

/// The bundled JavaScript SDK is one shared read-only tree of the store
/// (per jig build), shown where Bun finds `@jigging/flow`: no Run writes
/// it, and a tampered tree stops the next Run and is not repaired.
#[test]
fn bun_runs_import_the_sdk_from_one_shared_tree_and_a_tampered_one_fails_closed() {
    let dir = bun_project("sdk", SDK_WHERE_TS);
    let cache = reviewed_with_cache(dir.path(), 0o700);
    let first = output_of(dir.path(), cache.path(), "flow:flows/sdk");
    let support = dir.path().join(".jig/store/support");
    let after_first = listing(&support);
    let trees: Vec<_> = after_first
        .iter()
        .filter(|(p, ..)| p.parent() == Some(support.as_path()) && p.is_dir())
        .map(|(p, ..)| p.clone())
        .collect();
    assert_eq!(trees.len(), 1, "one JavaScript SDK tree: {after_first:?}");
    assert!(
        trees[0]
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("js-"),
        "{trees:?}"
    );
    let second = output_of(dir.path(), cache.path(), "flow:flows/sdk");
    // The second Run neither writes the tree nor anything beside it.
    assert_eq!(listing(&support), after_first);
    // The SDK is found at the Run's own node_modules, never at the store.
    for output in [&first, &second] {
        let sdk = output["sdk"].as_str().unwrap();
        assert!(sdk.contains("/node_modules/@jigging/flow/"), "{output}");
        assert!(!sdk.contains("/store/"), "{output}");
    }
    let index = trees[0].join("flow/index.js");
    std::fs::set_permissions(&index, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut bytes = std::fs::read(&index).unwrap();
    bytes.extend_from_slice(b"\n// tampered\n");
    std::fs::write(&index, &bytes).unwrap();
    std::fs::set_permissions(&index, std::fs::Permissions::from_mode(0o444)).unwrap();
    let run = run_with_cache(
        dir.path(),
        cache.path(),
        &["run", "flow:flows/sdk", "--input", "null"],
    );
    assert_eq!(run.status, 1, "{run:?}");
    assert_eq!(run.json()["code"], "EXECUTION_FAILED", "{run:?}");
    assert_eq!(
        std::fs::read(&index).unwrap(),
        bytes,
        "never silently repaired"
    );
}

/// A `flow.py` that writes a file in its scratch as soon as its module
/// runs, and reports how Python started it.
const STARTED_PY: &str = r#"import sys

open("module-ran", "w").close()

from jiggy.flow import handle


async def run(ctx):
    return {
        "outcome": "done",
        "output": {"name": __name__, "argv": sys.argv, "path0": sys.path[0], "file": __file__},
    }


handle(run)
"#;

/// A daemon starts the next Python Run's interpreter ahead of it, waiting
/// at the SDK's gate: the package's module does not run until the Run
/// opens it, and then it runs as the `__main__` script it always was.
#[test]
fn a_served_python_run_made_ahead_ran_no_package_code_before_it() {
    let dir = project(&[
        ("flows/started/FLOW.md", FLOW_MD),
        ("flows/started/flow.py", STARTED_PY),
    ]);
    let outputs = made_ahead_twice(dir.path(), "python3");
    for output in &outputs {
        assert_eq!(output["name"], "__main__", "{output}");
        let argv = output["argv"].as_array().unwrap();
        assert_eq!(argv.len(), 1, "{output}");
        assert!(
            argv[0].as_str().unwrap().ends_with("/package/flow.py"),
            "{output}"
        );
        assert_eq!(argv[0], output["file"], "{output}");
        assert!(
            output["path0"].as_str().unwrap().ends_with("/package"),
            "{output}"
        );
    }
}

/// Review the project at `root` (one Flow, `flows/started`), serve it and
/// run the Flow twice: the second Run must start in the envelope made
/// ahead after the first, where the runtime (its executable's name starts
/// with `runtime`) waits and the package's module has not run (it writes
/// `module-ran` in its scratch). The two outputs.
fn made_ahead_twice(root: &Path, runtime: &str) -> Vec<serde_json::Value> {
    use crate::containment::{ahead_roots, served_name, started_ahead};
    let reviewed = review(root);
    assert_eq!(reviewed.status, 0, "{reviewed:?}");
    let runs = format!("/v1/projects/{}/runs", served_name(root));
    let daemon = crate::serve::Daemon::start(root, &[]);
    let submit = || {
        let body = serde_json::json!({"target": "flow:flows/started", "input": null});
        let (status, terminal) = daemon.call("POST", &runs, Some(body));
        assert_eq!(status, 200, "{terminal}");
        assert_eq!(terminal["status"], "succeeded", "{terminal}");
        terminal["output"].clone()
    };
    let first = submit();
    let needle = root.join(".jig/work/ahead-").to_string_lossy().into_owned();
    let waiting = || {
        std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let exe = std::fs::read_link(entry.path().join("exe")).unwrap_or_default();
            let named = exe
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(runtime));
            named && String::from_utf8_lossy(&cmdline).contains(&needle)
        })
    };
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !waiting() {
        assert!(
            std::time::Instant::now() < until,
            "no {runtime} started ahead"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let made = ahead_roots(root);
    assert_eq!(made.len(), 1, "{made:?}");
    let scratch = made[0].join("0/scratch");
    assert!(scratch.is_dir());
    assert!(
        !scratch.join("module-ran").exists(),
        "the package's module ran ahead of its Run"
    );
    assert_eq!(started_ahead(&daemon), 0);
    let second = submit();
    assert_eq!(started_ahead(&daemon), 1);
    vec![first, second]
}

/// A `flow.ts` that writes a file in its scratch as soon as its module
/// runs, and reports how Bun started it.
const STARTED_TS: &str = r#"import { handle } from "@jigging/flow";
import { writeFileSync } from "node:fs";

writeFileSync("module-ran", "");
await handle(async () => ({
  outcome: "done",
  output: { main: import.meta.main, argv: process.argv.slice(1), bunMain: Bun.main },
}));
"#;

/// A daemon starts the next Bun Run's runtime ahead of it, with the SDK
/// loaded and its gate preloaded: the package's module does not run (its
/// scratch stays empty) until the Run opens the gate, and then it runs as
/// a Run started at once does, as the main module.
#[test]
fn a_served_bun_run_made_ahead_ran_no_package_code_before_it() {
    let dir = bun_project("started", STARTED_TS);
    let outputs = made_ahead_twice(dir.path(), "bun");
    for output in &outputs {
        assert_eq!(output["main"], true, "{output}");
        let argv = output["argv"].as_array().unwrap();
        assert_eq!(argv.len(), 1, "{output}");
        assert!(
            argv[0].as_str().unwrap().ends_with("/package/flow.ts"),
            "{output}"
        );
        let main = output["bunMain"].as_str().unwrap();
        assert!(main.ends_with("/package/flow.ts"), "{output}");
    }
}
