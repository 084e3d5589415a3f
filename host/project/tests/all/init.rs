use std::fs;
use std::path::Path;

use jig_project::{init, Template, GITIGNORE, JIG_TS};

/// Every entry beneath `dir`, directories with a trailing `/`, sorted.
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let rel = e
                .path()
                .strip_prefix(dir)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if e.file_type().unwrap().is_dir() {
                out.push(format!("{rel}/"));
                stack.push(e.path());
            } else {
                out.push(rel);
            }
        }
    }
    out.sort();
    out
}

const SEED_JIG_TS: &str = "import { defineJig, discover } from \"@jigging/jig\";\n\nexport default defineJig({\n  flows: discover(\"./flows\"),\n  bindings: discover(\"./bindings\"),\n});\n";

#[test]
fn bare_creates_exactly_the_skeleton() {
    let tmp = tempfile::tempdir().unwrap();
    let dest = tmp.path().join("project");
    init(&dest, Template::Bare).unwrap();
    assert_eq!(
        tree(&dest),
        vec![".gitignore", "bindings/", "flows/", "jig.ts"]
    );
    assert_eq!(
        fs::read_to_string(dest.join(".gitignore")).unwrap(),
        ".jig/\n"
    );
    assert_eq!(GITIGNORE, ".jig/\n");
    assert_eq!(
        fs::read_to_string(dest.join("jig.ts")).unwrap(),
        SEED_JIG_TS
    );
    assert_eq!(JIG_TS, SEED_JIG_TS);
    // Nothing else appeared beside the destination (no staging leftovers).
    assert_eq!(
        tree(tmp.path())
            .iter()
            .filter(|e| !e.starts_with("project"))
            .count(),
        0
    );
}

#[test]
fn greeting_adds_readme_and_hello() {
    let tmp = tempfile::tempdir().unwrap();
    let dest = tmp.path().join("project");
    init(&dest, Template::Python).unwrap();
    assert_eq!(
        tree(&dest),
        vec![
            ".gitignore",
            "README.md",
            "bindings/",
            "flows/",
            "flows/hello/",
            "flows/hello/FLOW.md",
            "flows/hello/flow.py",
            "jig.ts"
        ]
    );
    let flow_py = fs::read_to_string(dest.join("flows/hello/flow.py")).unwrap();
    assert_eq!(
        flow_py,
        "from jiggy.flow import RunContext, RunResult, handle\n\nasync def run(context: RunContext) -> RunResult:\n    name = context.input if isinstance(context.input, str) else \"world\"\n    return {\"outcome\": \"done\", \"output\": {\"message\": f\"Hello, {name}!\"}}\n\nhandle(run)\n"
    );
    let flow_md = fs::read_to_string(dest.join("flows/hello/FLOW.md")).unwrap();
    assert!(
        flow_md.starts_with("---\nname: hello\ndescription: "),
        "{flow_md}"
    );
    let readme = fs::read_to_string(dest.join("README.md")).unwrap();
    assert!(readme.contains("jig review"));
    assert!(readme.contains("jig run flow:flows/hello --input '\"Ada\"'"));
}

#[test]
fn existing_destination_is_refused_and_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("taken");
    fs::write(&file, b"mine").unwrap();
    let err = init(&file, Template::Bare).unwrap_err();
    assert_eq!(
        (err.code(), err.exit_code()),
        ("JIG_INIT_DESTINATION_EXISTS", 1)
    );
    assert_eq!(fs::read(&file).unwrap(), b"mine");

    let dir = tmp.path().join("empty");
    fs::create_dir(&dir).unwrap();
    let err = init(&dir, Template::Python).unwrap_err();
    assert_eq!(err.code(), "JIG_INIT_DESTINATION_EXISTS");
    assert!(tree(&dir).is_empty());

    let link = tmp.path().join("dangling");
    std::os::unix::fs::symlink("nowhere", &link).unwrap();
    assert_eq!(
        init(&link, Template::Bare).unwrap_err().code(),
        "JIG_INIT_DESTINATION_EXISTS"
    );
    assert_eq!(tree(tmp.path()), vec!["dangling", "empty/", "taken"]);
}

#[test]
fn missing_parent_is_unavailable_and_creates_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let err = init(&tmp.path().join("no/such/parent"), Template::Bare).unwrap_err();
    assert_eq!((err.code(), err.exit_code()), ("JIG_INIT_UNAVAILABLE", 2));
    assert!(tree(tmp.path()).is_empty());
}

#[test]
fn a_fresh_project_captures() {
    let tmp = tempfile::tempdir().unwrap();
    let dest = tmp.path().join("project");
    init(&dest, Template::Bare).unwrap();
    let decl = jig_project::capture(&dest).unwrap();
    assert!(decl.flows.is_empty());
    assert!(decl.bindings.is_empty());
}

#[test]
fn the_default_greeting_is_flow_ts_naming_the_exact_sdk_revision() {
    let tmp = tempfile::tempdir().unwrap();
    let dest = tmp.path().join("project");
    init(
        &dest,
        Template::TypeScript {
            sdk_revision: "9.8.7",
        },
    )
    .unwrap();
    assert_eq!(
        tree(&dest),
        vec![
            ".gitignore",
            "README.md",
            "bindings/",
            "flows/",
            "flows/hello/",
            "flows/hello/FLOW.md",
            "flows/hello/flow.ts",
            "flows/hello/package.json",
            "jig.ts"
        ]
    );
    let manifest: serde_json::Value =
        serde_json::from_slice(&fs::read(dest.join("flows/hello/package.json")).unwrap()).unwrap();
    assert_eq!(
        manifest["dependencies"],
        serde_json::json!({ "@jigging/flow": "9.8.7" })
    );
    let flow_ts = fs::read_to_string(dest.join("flows/hello/flow.ts")).unwrap();
    assert!(
        flow_ts.starts_with("import { handle } from \"@jigging/flow\";\n"),
        "{flow_ts}"
    );
}
