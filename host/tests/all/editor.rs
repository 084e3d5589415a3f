//! `jig editor` (issue 49): in a fresh project, with no network, TypeScript
//! type-checks flow.ts against the bundled SDK's declarations and mypy
//! resolves `jiggy.flow`, each catching a real type error; review captures
//! none of what it writes.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::*;

/// TypeScript's compiler, where `.ci/setup` installs it (`JIG_TYPESCRIPT_DIR`,
/// as the TypeScript SDK's suite finds it).
fn tsc() -> PathBuf {
    std::env::var_os("JIG_TYPESCRIPT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/jig-typescript"))
        .join("node_modules/.bin/tsc")
}

fn checked(dir: &Path, program: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        // No network: neither checker may fetch anything.
        .env("npm_config_offline", "true")
        .output()
        .unwrap_or_else(|e| panic!("{} (.ci/setup installs it): {e}", program.display()));
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn a_fresh_project_type_checks_offline_against_the_bundled_sdks() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(run_jig(dir.path(), &["init", "p"]).status, 0);
    let project = dir.path().join("p");
    assert_eq!(
        run_jig(&project, &["new", "flow", "price", "--lang", "python"]).status,
        0
    );
    let reviewed = review(&project);
    let made = run_jig(&project, &["editor"]);
    assert_eq!(made.status, 0, "{made:?}");
    assert_eq!(
        made.stdout,
        "wrote .jig-sdk/python/jiggy (the Python SDK)\n\
         wrote flows/hello/node_modules/@jigging/flow (the JavaScript SDK and its types)\n\
         wrote tsconfig.json\nwrote pyrightconfig.json\nwrote mypy.ini\n\
         .gitignore now names .jig-sdk/ and node_modules/\n"
    );
    assert!(project
        .join("flows/hello/node_modules/@jigging/flow/index.d.ts")
        .is_file());
    assert_eq!(
        std::fs::read_to_string(project.join(".gitignore")).unwrap(),
        ".jig/\n.jig-sdk/\nnode_modules/\n"
    );
    // Review captures none of it: the project is unchanged.
    let again = run_jig(&project, &["review"]);
    assert_eq!(
        again.stdout, "project is ready\n",
        "{again:?} after {reviewed:?}"
    );

    let python = Path::new("python3");
    assert_eq!(
        checked(&project, &tsc(), &["-p", "."]),
        (true, String::new())
    );
    let (ok, said) = checked(&project, python, &["-m", "mypy", "flows/price/flow.py"]);
    assert!(ok, "{said}");

    // Each checker catches a real error against the SDK's types.
    let flow_ts = project.join("flows/hello/flow.ts");
    let text = std::fs::read_to_string(&flow_ts).unwrap();
    std::fs::write(&flow_ts, text.replace("outcome: \"done\"", "outcome: 1")).unwrap();
    let (ok, said) = checked(&project, &tsc(), &["-p", "."]);
    assert!(
        !ok && said.contains("Type 'number' is not assignable to type 'string'"),
        "{said}"
    );
    let flow_py = project.join("flows/price/flow.py");
    let text = std::fs::read_to_string(&flow_py).unwrap();
    std::fs::write(&flow_py, text.replace("context.input ", "context.inputs ")).unwrap();
    let (ok, said) = checked(&project, python, &["-m", "mypy", "flows/price/flow.py"]);
    assert!(
        !ok && said.contains("\"RunContext\" has no attribute \"inputs\""),
        "{said}"
    );

    // Run again: the SDK copies are refreshed, the configuration kept.
    let again = run_jig(&project, &["editor"]);
    assert!(
        again.stdout.contains("kept tsconfig.json (it exists)\n"),
        "{again:?}"
    );
    assert!(!again.stdout.contains(".gitignore"), "{again:?}");
}
