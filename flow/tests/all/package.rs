use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;

use flow::package::{
    codes, digest_files, Access, Package, Use, MAX_DESCRIPTION_CHARS, MAX_FILES,
    MAX_FRONTMATTER_BYTES, MAX_MAP_ENTRIES, MAX_METADATA_DEPTH, MAX_METADATA_NODES,
    MAX_SEQUENCE_ITEMS,
};

use crate::data;

fn files(entries: &[(&str, &[u8])]) -> BTreeMap<String, Vec<u8>> {
    entries
        .iter()
        .map(|(p, c)| (p.to_string(), c.to_vec()))
        .collect()
}

const FLOW_MD: &[u8] = b"---\nname: hello\ndescription: Say hello.\n---\n# Hello\n";

fn with_flow_md(flow_md: &str) -> Result<Package, flow::package::PackageError> {
    Package::from_files(files(&[("FLOW.md", flow_md.as_bytes())]))
}

fn metadata_code(flow_md: &str) -> &'static str {
    with_flow_md(flow_md).unwrap_err().code
}

fn doc(extra: &str) -> String {
    format!("---\nname: a\ndescription: b\n{extra}---\n")
}

#[test]
fn digest_matches_an_independent_computation() {
    // Computed with Python's hashlib from the Package/1 §6 formula.
    let tree = files(&[
        ("FLOW.md", FLOW_MD),
        ("flow.py", b"#!/usr/bin/env python3\nprint('hi')\n"),
        ("data/\u{e9}t\u{e9}.txt", b"summer\n"),
    ]);
    let expected = "sha256:e96ecb5e8b579013cbdfd34135c3a89ef16b75a349f30951313ecc0994580e10";
    assert_eq!(digest_files(&tree), expected);
    let p = Package::from_files(tree).unwrap();
    assert_eq!(p.digest(), expected);
    let e = p.entrypoint().unwrap();
    assert_eq!((e.path.as_str(), e.suffix.as_str()), ("flow.py", "py"));
    assert_eq!(e.selector.as_deref(), Some("python3"));
    assert_eq!(p.metadata().name, "hello");
    assert_eq!(p.metadata().body, "# Hello\n");
    assert_eq!(
        digest_files(&BTreeMap::new()),
        "sha256:549fadeaa80ceecc4630a44683ae46dfa232760aeb17ab584b477fbe80d70846"
    );
}

#[test]
fn streaming_digest_agrees() {
    let tree = files(&[
        ("FLOW.md", FLOW_MD),
        ("a/b.bin", &[7u8; 10_000]),
        ("z", b""),
    ]);
    let mut streaming = flow::package::PackageDigest::new(3);
    for (path, content) in &tree {
        streaming.add_file(path, content.len() as u64);
        for chunk in content.chunks(333) {
            streaming.update(chunk);
        }
    }
    assert_eq!(streaming.finish(), digest_files(&tree));
}

#[test]
fn identity_depends_on_paths_and_bytes_only() {
    let base = files(&[("FLOW.md", FLOW_MD), ("a.txt", b"x")]);
    let d = digest_files(&base);
    let mut changed = base.clone();
    changed.insert("a.txt".into(), b"y".to_vec());
    assert_ne!(digest_files(&changed), d);
    let mut renamed = base.clone();
    let content = renamed.remove("a.txt").unwrap();
    renamed.insert("b.txt".into(), content);
    assert_ne!(digest_files(&renamed), d);
    let mut extra = base.clone();
    extra.insert("c".into(), Vec::new());
    assert_ne!(digest_files(&extra), d);
    // Empty content and moving bytes between path and content are distinct.
    let a = files(&[("ab", b"")]);
    let b = files(&[("a", b"b")]);
    assert_ne!(digest_files(&a), digest_files(&b));
}

#[test]
fn flow_md_is_required_exact_case() {
    let e = Package::from_files(files(&[("flow.md", FLOW_MD)])).unwrap_err();
    assert_eq!(e.code, codes::PACKAGE_FLOW_MISSING);
    let e = Package::from_files(files(&[("sub/FLOW.md", FLOW_MD)])).unwrap_err();
    assert_eq!(e.code, codes::PACKAGE_FLOW_MISSING);
}

#[test]
fn entrypoints() {
    let e = Package::from_files(files(&[
        ("FLOW.md", FLOW_MD),
        ("flow.py", b""),
        ("flow.ts", b""),
    ]))
    .unwrap_err();
    assert_eq!(e.code, codes::PACKAGE_ENTRYPOINT_AMBIGUOUS);
    // Instructions only, nested and multi-suffix files are resources.
    let p = Package::from_files(files(&[
        ("FLOW.md", FLOW_MD),
        ("lib/flow.py", b""),
        ("flow.tar.gz", b""),
        ("flow.PY", b""),
    ]))
    .unwrap();
    assert!(p.entrypoint().is_none());
    let p = Package::from_files(files(&[("FLOW.md", FLOW_MD), ("flow.wasm", b"\0asm")])).unwrap();
    assert_eq!(p.entrypoint().unwrap().selector, None);
    let e = Package::from_files(files(&[
        ("FLOW.md", FLOW_MD),
        ("flow.py", b"#!/usr/bin/python3\n"),
    ]))
    .unwrap_err();
    assert_eq!(e.code, codes::PACKAGE_ENTRYPOINT_INVALID);
    assert_eq!(e.path.as_deref(), Some("flow.py"));
}

#[test]
fn paths_and_collisions() {
    for bad in [
        "../x",
        "a/./b",
        "/abs",
        "a\\b",
        "a\0b",
        "e\u{301}.txt",
        "a//b",
        "a/",
    ] {
        let e = Package::from_files(files(&[("FLOW.md", FLOW_MD), (bad, b"")])).unwrap_err();
        assert_eq!(e.code, codes::PACKAGE_PATH_INVALID, "{bad:?}");
    }
    for (a, b) in [
        ("readme.md", "README.md"),
        ("stra\u{df}e", "STRASSE"),
        ("docs/x", "Docs/y"),
        ("\u{3c3}", "\u{3a3}"),
        ("\u{3c2}", "\u{3c3}"),
        ("\u{fb01}le", "file"),
        ("flow.md", "FLOW.md"),
        ("a", "a/b"),
        ("A", "a/b"),
    ] {
        let e =
            Package::from_files(files(&[("FLOW.md", FLOW_MD), (a, b""), (b, b"")])).unwrap_err();
        assert_eq!(e.code, codes::PACKAGE_PATH_COLLISION, "{a:?} {b:?}");
    }
    // Case remains significant where it does not collide.
    assert!(Package::from_files(files(&[
        ("FLOW.md", FLOW_MD),
        ("docs/a", b""),
        ("docs/b", b"")
    ]))
    .is_ok());
}

#[test]
fn file_count_limit() {
    let mut tree = BTreeMap::new();
    tree.insert("FLOW.md".to_string(), FLOW_MD.to_vec());
    for i in 0..MAX_FILES - 1 {
        tree.insert(format!("f/{i}"), Vec::new());
    }
    assert!(Package::from_files(tree.clone()).is_ok());
    tree.insert("f/extra".into(), Vec::new());
    assert_eq!(
        Package::from_files(tree).unwrap_err().code,
        codes::PACKAGE_LIMIT_EXCEEDED
    );
}

#[test]
fn minimum_metadata_and_vocabulary() {
    let p = with_flow_md(
        "---\nname: resize-image\ndescription: Resize an image to the requested dimensions.\n---\n",
    )
    .unwrap();
    assert_eq!(p.metadata().name, "resize-image");
    for field in [
        "flow: 1",
        "format: x",
        "version: 1",
        "Name: a",
        "x-: 1",
        "x-Bad: 1",
        "y-ok: 1",
    ] {
        assert_eq!(
            metadata_code(&doc(&format!("{field}\n"))),
            codes::METADATA_INVALID,
            "{field}"
        );
    }
    assert!(with_flow_md(&doc("x-tool: {nested: [1, two]}\n")).is_ok());
    assert_eq!(
        metadata_code("---\ndescription: b\n---\n"),
        codes::METADATA_INVALID
    );
    assert_eq!(
        metadata_code("---\nname: a\n---\n"),
        codes::METADATA_INVALID
    );
    assert_eq!(
        metadata_code("---\nname: A\ndescription: b\n---\n"),
        codes::METADATA_INVALID
    );
    assert_eq!(
        metadata_code("---\nname: a-\ndescription: b\n---\n"),
        codes::METADATA_INVALID
    );
    assert_eq!(
        metadata_code("---\nname: a\ndescription: ''\n---\n"),
        codes::METADATA_INVALID
    );
    assert_eq!(
        metadata_code("---\nname: a\ndescription: 5\n---\n"),
        codes::METADATA_INVALID
    );
    assert_eq!(metadata_code("---\n- a\n---\n"), codes::METADATA_INVALID);
    assert_eq!(metadata_code("---\n---\n"), codes::METADATA_INVALID);
    let name64 = "a".repeat(64);
    assert!(with_flow_md(&format!("---\nname: {name64}\ndescription: b\n---\n")).is_ok());
    assert_eq!(
        metadata_code(&format!("---\nname: {name64}a\ndescription: b\n---\n")),
        codes::METADATA_INVALID
    );
    let at = "é".repeat(MAX_DESCRIPTION_CHARS);
    assert!(with_flow_md(&format!("---\nname: a\ndescription: {at}\n---\n")).is_ok());
    assert_eq!(
        metadata_code(&format!("---\nname: a\ndescription: {at}é\n---\n")),
        codes::METADATA_INVALID
    );
}

#[test]
fn uses_outcomes_attachments_channels() {
    let descriptor = data("session-store.capability.json");
    let flow_md = doc(concat!(
        "uses:\n  sessions:\n    contract: ./contracts/session-store.capability.json\n",
        "  scratch:\n    local: true\n",
        "outcomes:\n  blocked: Needs a human.\n",
        "attachments:\n  inbox: read\n  outbox: read-write\n",
        "channels:\n  events:\n    direction: send\n    required: false\n",
        "  updates:\n    direction: receive\n    contract: ./contracts/acp.json\n    start: suffix\n",
    ));
    let tree = files(&[
        ("FLOW.md", flow_md.as_bytes()),
        ("contracts/session-store.capability.json", &descriptor),
        ("contracts/acp.json", &data("acp-public-updates.json")),
    ]);
    let p = Package::from_files(tree.clone()).unwrap();
    let m = p.metadata();
    assert_eq!(
        m.uses["sessions"],
        Use::Contract {
            path: "contracts/session-store.capability.json".into()
        }
    );
    assert_eq!(m.uses["scratch"], Use::Local);
    assert_eq!(m.outcomes["blocked"], "Needs a human.");
    assert_eq!(m.attachments["inbox"], Access::Read);
    assert_eq!(m.attachments["outbox"], Access::ReadWrite);
    assert_eq!(
        p.contract("sessions").unwrap().digest,
        "sha256:95717125236427f83f401e2f942bb4df46e95867ac34828d719cc9795e5b3e98"
    );
    assert!(p.contract("scratch").is_none());
    assert_eq!(
        p.channel_contract("updates").unwrap().id,
        "https://jig.md/contracts/acp-public-updates"
    );

    // Method channel references inside a used descriptor resolve the same way.
    let agent = files(&[
        (
            "FLOW.md",
            doc("uses:\n  agent:\n    contract: ./contracts/agent-run.capability.json\n")
                .as_bytes(),
        ),
        (
            "contracts/agent-run.capability.json",
            &data("agent-run.capability.json"),
        ),
        (
            "contracts/acp-public-updates.json",
            &data("acp-public-updates.json"),
        ),
    ]);
    let p2 = Package::from_files(agent).unwrap();
    let run = p2.contract("agent").unwrap().method("run").unwrap();
    let reference = run.channels["events"].contract.as_deref().unwrap();
    let bytes = p2.resolve_reference(reference).unwrap();
    assert!(flow::contract::ChannelContract::parse(bytes).is_ok());
    assert_eq!(
        p2.resolve_reference("./contracts/ACP-public-updates.json")
            .unwrap_err()
            .code,
        codes::METADATA_REFERENCE_INVALID
    );
    assert_eq!(
        p2.resolve_reference("contracts/acp-public-updates.json")
            .unwrap_err()
            .code,
        codes::METADATA_REFERENCE_INVALID
    );

    // Missing, escaping and case-mismatched references reject.
    for reference in [
        "./contracts/missing.json",
        "./Contracts/session-store.capability.json",
        "contracts/session-store.capability.json",
        "./../contracts/session-store.capability.json",
        "./contracts//session-store.capability.json",
        "/contracts/session-store.capability.json",
        "./contracts%2Fsession-store.capability.json",
    ] {
        let md = doc(&format!("uses:\n  s:\n    contract: '{reference}'\n"));
        let mut t = tree.clone();
        t.insert("FLOW.md".into(), md.into_bytes());
        let e = Package::from_files(t).unwrap_err();
        assert_eq!(e.code, codes::METADATA_REFERENCE_INVALID, "{reference}");
    }
    // A referenced descriptor must itself be valid.
    let mut t = tree.clone();
    t.insert(
        "contracts/session-store.capability.json".into(),
        b"{}".to_vec(),
    );
    assert_eq!(Package::from_files(t).unwrap_err().code, "CONTRACT_INVALID");

    for bad in [
        "uses:\n  s:\n    local: false\n",
        "uses:\n  s:\n    local: true\n    contract: ./x\n",
        "uses:\n  S:\n    local: true\n",
        "uses:\n  s: true\n",
        "outcomes:\n  done: x\n",
        "outcomes:\n  failed: x\n",
        "outcomes:\n  cancelled: x\n",
        "outcomes:\n  error: x\n",
        "outcomes:\n  ok: ''\n",
        "attachments:\n  a: write\n",
        "channels:\n  c:\n    direction: up\n",
        "channels:\n  c:\n    direction: send\n    start: suffix\n",
        "channels:\n  c:\n    direction: send\n    schema: true\n    contract: ./x\n",
        "channels:\n  c:\n    direction: send\n    extra: 1\n",
        "channels:\n  c:\n    direction: send\n    schema: {format: email}\n",
    ] {
        assert_eq!(metadata_code(&doc(bad)), codes::METADATA_INVALID, "{bad}");
    }
}

#[test]
fn yaml_scalars_and_unsafe_features() {
    let p = with_flow_md(&doc(
        "x-v: [yes, no, on, off, ~, Null, TRUE, 0x1F, 0o17, .inf, -.inf, .nan, 1_000, +1, 012, 1.5e3, null, true, false, -2, \"null\"]\n",
    ))
    .unwrap();
    assert_eq!(
        p.metadata().extensions["x-v"],
        serde_json::json!([
            "yes", "no", "on", "off", "~", "Null", "TRUE", "0x1F", "0o17", ".inf", "-.inf", ".nan",
            "1_000", "+1", "012", 1500, null, true, false, -2, "null"
        ])
    );
    for bad in [
        "x-a: !!str a\n",
        "x-a: !custom a\n",
        "x-a: &anchor a\nx-b: *anchor\n",
        "x-a: &anchor a\n",
        "x-a:\n  <<: {b: 1}\n",
        "x-a:\n  1: b\n",
        "x-a:\n  null: b\n",
        "x-a:\n  true: b\n",
        "x-a:\n  ? [k]\n  : v\n",
        "x-a: 1\nx-a: 2\n",
        "x-a: {b: 1, b: 2}\n",
    ] {
        assert_eq!(
            metadata_code(&doc(bad)),
            codes::METADATA_YAML_INVALID,
            "{bad}"
        );
    }
    // Quoted keys are strings, even when they look like other scalars.
    assert!(with_flow_md(&doc("x-a:\n  '1': b\n  \"<<\": c\n")).is_ok());
    // JSON/1 number domain applies.
    assert_eq!(
        metadata_code(&doc("x-a: 9007199254740993\n")),
        codes::METADATA_INVALID
    );
    assert_eq!(metadata_code(&doc("x-a: 1e400\n")), codes::METADATA_INVALID);
}

#[test]
fn encoding_and_delimiters() {
    assert_eq!(
        with_flow_md("\u{feff}---\nname: a\ndescription: b\n---\n")
            .unwrap_err()
            .code,
        codes::METADATA_ENCODING_INVALID
    );
    let e = Package::from_files(files(&[(
        "FLOW.md",
        b"---\nname: a\ndescription: \xff\n---\n",
    )]))
    .unwrap_err();
    assert_eq!(e.code, codes::METADATA_ENCODING_INVALID);
    for bad in [
        "name: a\n",
        "--- \nname: a\ndescription: b\n---\n",
        "----\nname: a\ndescription: b\n---\n",
        "---\nname: a\ndescription: b\n",
        "---\nname: a\ndescription: b\n--- \n",
        "\n---\nname: a\ndescription: b\n---\n",
    ] {
        assert_eq!(
            metadata_code(bad),
            codes::METADATA_DELIMITER_INVALID,
            "{bad:?}"
        );
    }
    // LF and CRLF independently; the body keeps its bytes.
    let p = with_flow_md("---\r\nname: a\ndescription: b\r\n---\r\nbody\r\n").unwrap();
    assert_eq!(p.metadata().body, "body\r\n");
    let p = with_flow_md("---\nname: a\ndescription: b\n---").unwrap();
    assert_eq!(p.metadata().body, "");
}

#[test]
fn frontmatter_byte_limit() {
    let make = |total: usize| {
        let head = "---\nname: a\ndescription: b\nx-pad: ";
        let tail = "\n---\n";
        let pad = total - head.len() - tail.len();
        format!("{head}{}{tail}body", "p".repeat(pad))
    };
    assert!(with_flow_md(&make(MAX_FRONTMATTER_BYTES)).is_ok());
    assert_eq!(
        metadata_code(&make(MAX_FRONTMATTER_BYTES + 1)),
        codes::METADATA_LIMIT_EXCEEDED
    );
}

#[test]
fn metadata_bounds() {
    let seq = |n: usize| doc(&format!("x-s: [{}]\n", vec!["1"; n].join(", ")));
    assert!(with_flow_md(&seq(MAX_SEQUENCE_ITEMS)).is_ok());
    assert_eq!(
        metadata_code(&seq(MAX_SEQUENCE_ITEMS + 1)),
        codes::METADATA_LIMIT_EXCEEDED
    );

    let map = |n: usize| {
        let entries: Vec<String> = (0..n).map(|i| format!("k{i}: 1")).collect();
        doc(&format!("x-m: {{{}}}\n", entries.join(", ")))
    };
    assert!(with_flow_md(&map(MAX_MAP_ENTRIES)).is_ok());
    assert_eq!(
        metadata_code(&map(MAX_MAP_ENTRIES + 1)),
        codes::METADATA_LIMIT_EXCEEDED
    );
    // The root mapping is bounded too: name + description + 254 extensions.
    let root = |n: usize| doc(&(0..n).map(|i| format!("x-k{i}: 1\n")).collect::<String>());
    assert!(with_flow_md(&root(MAX_MAP_ENTRIES - 2)).is_ok());
    assert_eq!(
        metadata_code(&root(MAX_MAP_ENTRIES - 1)),
        codes::METADATA_LIMIT_EXCEEDED
    );

    // Root map is depth 1, x-d's value depth 2, ... a scalar at depth 16.
    let nested = |depth: usize| {
        doc(&format!(
            "x-d: {}1{}\n",
            "[".repeat(depth - 2),
            "]".repeat(depth - 2)
        ))
    };
    assert!(with_flow_md(&nested(MAX_METADATA_DEPTH)).is_ok());
    assert_eq!(
        metadata_code(&nested(MAX_METADATA_DEPTH + 1)),
        codes::METADATA_LIMIT_EXCEEDED
    );

    // Nodes: root + name + description + x-n's sequences and leaves.
    // 15 sequences of 256 leaves plus one of the remainder.
    let nodes = |total: usize| {
        let mut left = total - 3 - 1; // root, name, description, x-n's outer sequence
        let mut parts = Vec::new();
        while left > 0 {
            let leaves = (left - 1).min(MAX_SEQUENCE_ITEMS);
            parts.push(format!("[{}]", vec!["0"; leaves].join(",")));
            left -= leaves + 1;
        }
        doc(&format!("x-n: [{}]\n", parts.join(",")))
    };
    assert!(with_flow_md(&nodes(MAX_METADATA_NODES)).is_ok());
    assert_eq!(
        metadata_code(&nodes(MAX_METADATA_NODES + 1)),
        codes::METADATA_LIMIT_EXCEEDED
    );
}

#[test]
fn conventional_schemas_compile_during_staging() {
    let tree = files(&[
        ("FLOW.md", FLOW_MD),
        ("input.schema.json", &data("input.schema.json")),
        ("settings.schema.json", &data("settings.schema.json")),
        ("result.schema.json", &data("result.schema.json")),
    ]);
    let p = Package::from_files(tree.clone()).unwrap();
    assert!(
        p.input_schema().is_some() && p.settings_schema().is_some() && p.result_schema().is_some()
    );
    for (file, bytes, code) in [
        (
            "input.schema.json",
            &b"{\"$schema\": \"https://flow.jig.md/schemas/schema-1.json\", \"format\": \"x\"}"[..],
            "SCHEMA_KEYWORD_UNSUPPORTED",
        ),
        ("settings.schema.json", b"{", "SCHEMA_INVALID_JSON"),
        ("result.schema.json", b"{}", "SCHEMA_INVALID"),
    ] {
        let mut t = tree.clone();
        t.insert(file.into(), bytes.to_vec());
        let e = Package::from_files(t).unwrap_err();
        assert_eq!((e.code, e.path.as_deref()), (code, Some(file)));
    }
    // Other *.schema.json files are ordinary resources.
    let p = Package::from_files(files(&[
        ("FLOW.md", FLOW_MD),
        ("output.schema.json", b"nonsense"),
    ]))
    .unwrap();
    assert!(p.input_schema().is_none());
}

// ---- staging from a directory ----

fn write(root: &Path, path: &str, content: &[u8]) {
    let full = root.join(path);
    fs::create_dir_all(full.parent().unwrap()).unwrap();
    fs::write(full, content).unwrap();
}

fn sample(root: &Path) {
    write(root, "FLOW.md", FLOW_MD);
    write(root, "flow.py", b"#!/usr/bin/env python3\n");
    write(root, "data/\u{e9}t\u{e9}.txt", b"summer\n");
}

#[test]
fn staging_matches_the_in_memory_tree() {
    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    fs::create_dir_all(dir.path().join("empty/nested")).unwrap();
    let staged = Package::stage_dir(dir.path()).unwrap();
    let expected = files(&[
        ("FLOW.md", FLOW_MD),
        ("flow.py", b"#!/usr/bin/env python3\n"),
        ("data/\u{e9}t\u{e9}.txt", b"summer\n"),
    ]);
    assert_eq!(staged.files(), &expected);
    assert_eq!(staged.digest(), digest_files(&expected));

    // Modes and timestamps do not change identity; a second tree created in
    // another order has the same digest.
    fs::set_permissions(
        dir.path().join("flow.py"),
        fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let other = tempfile::tempdir().unwrap();
    write(other.path(), "data/\u{e9}t\u{e9}.txt", b"summer\n");
    write(other.path(), "flow.py", b"#!/usr/bin/env python3\n");
    write(other.path(), "FLOW.md", FLOW_MD);
    assert_eq!(
        Package::stage_dir(dir.path()).unwrap().digest(),
        staged.digest()
    );
    assert_eq!(
        Package::stage_dir(other.path()).unwrap().digest(),
        staged.digest()
    );
}

#[test]
fn staging_excludes_what_the_host_asks() {
    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    write(dir.path(), "node_modules/x/index.js", b"x");
    symlink("/etc/passwd", dir.path().join("node_modules/link")).unwrap();
    let p = Package::stage_dir_excluding(dir.path(), &|p| p == "node_modules").unwrap();
    assert!(p.files().keys().all(|k| !k.starts_with("node_modules")));
    let e = Package::stage_dir(dir.path()).unwrap_err();
    assert_eq!(e.code, codes::PACKAGE_SYMLINK);
}

#[test]
fn staging_rejects_symlinks_and_special_files() {
    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    symlink("flow.py", dir.path().join("alias.py")).unwrap();
    let e = Package::stage_dir(dir.path()).unwrap_err();
    assert_eq!(
        (e.code, e.path.as_deref()),
        (codes::PACKAGE_SYMLINK, Some("alias.py"))
    );

    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    symlink("data", dir.path().join("linked-dir")).unwrap();
    assert_eq!(
        Package::stage_dir(dir.path()).unwrap_err().code,
        codes::PACKAGE_SYMLINK
    );

    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    nix::unistd::mkfifo(&dir.path().join("pipe"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let e = Package::stage_dir(dir.path()).unwrap_err();
    assert_eq!(
        (e.code, e.path.as_deref()),
        (codes::PACKAGE_SPECIAL_FILE, Some("pipe"))
    );

    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    let _listener = std::os::unix::net::UnixListener::bind(dir.path().join("sock")).unwrap();
    assert_eq!(
        Package::stage_dir(dir.path()).unwrap_err().code,
        codes::PACKAGE_SPECIAL_FILE
    );
}

#[test]
fn staging_hardlinks_need_every_alias_inside() {
    let outer = tempfile::tempdir().unwrap();
    let tree = outer.path().join("pkg");
    sample(&tree);
    fs::hard_link(tree.join("flow.py"), tree.join("data/copy.py")).unwrap();
    let p = Package::stage_dir(&tree).unwrap();
    assert_eq!(p.files()["data/copy.py"], p.files()["flow.py"]);

    fs::hard_link(tree.join("flow.py"), outer.path().join("outside.py")).unwrap();
    let e = Package::stage_dir(&tree).unwrap_err();
    assert_eq!(e.code, codes::PACKAGE_HARDLINK);
}

#[test]
fn staging_checks_names_and_sizes() {
    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    write(dir.path(), "Data/x", b"");
    assert_eq!(
        Package::stage_dir(dir.path()).unwrap_err().code,
        codes::PACKAGE_PATH_COLLISION
    );

    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    write(dir.path(), "e\u{301}", b"");
    assert_eq!(
        Package::stage_dir(dir.path()).unwrap_err().code,
        codes::PACKAGE_PATH_INVALID
    );

    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    write(dir.path(), "back\\slash", b"");
    assert_eq!(
        Package::stage_dir(dir.path()).unwrap_err().code,
        codes::PACKAGE_PATH_INVALID
    );

    // A sparse file one byte over the per-file ceiling is refused unread.
    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    let big = fs::File::create(dir.path().join("big.bin")).unwrap();
    big.set_len(flow::package::MAX_FILE_BYTES + 1).unwrap();
    let e = Package::stage_dir(dir.path()).unwrap_err();
    assert_eq!(
        (e.code, e.path.as_deref()),
        (codes::PACKAGE_LIMIT_EXCEEDED, Some("big.bin"))
    );

    let e = Package::stage_dir(&dir.path().join("missing")).unwrap_err();
    assert_eq!(e.code, codes::PACKAGE_IO);
}

#[test]
fn staging_non_utf8_names_reject() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    fs::write(dir.path().join(OsStr::from_bytes(b"bad\xff")), b"").unwrap();
    assert_eq!(
        Package::stage_dir(dir.path()).unwrap_err().code,
        codes::PACKAGE_PATH_INVALID
    );
}

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn mutated_flow_md_never_panics() {
    let seed = "---\nname: a\ndescription: \"b\\n\"\nuses:\n  s:\n    local: true\nx-v: [1, {k: 'v'}, |\n    text\n  ]\noutcomes: {ok: fine}\n---\nbody\n";
    let alphabet = b"-:{}[],'\"!&*|>#%@`?\n\r\t \\xa1\xff.~";
    let mut rng = XorShift(0x2545f4914f6cdd1d);
    for _ in 0..5_000 {
        let mut bytes = seed.as_bytes().to_vec();
        for _ in 0..1 + rng.next() % 4 {
            let pos = (rng.next() as usize) % bytes.len();
            let b = alphabet[(rng.next() as usize) % alphabet.len()];
            if rng.next().is_multiple_of(2) {
                bytes[pos] = b;
            } else {
                bytes.insert(pos, b);
            }
        }
        let _ = flow::package::parse_metadata(&bytes);
    }
}

#[test]
fn staging_never_returns_a_torn_file() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    let versions: Vec<Vec<u8>> = (0..4u8).map(|v| vec![b'a' + v; 1 << 20]).collect();
    write(dir.path(), "hot.bin", &versions[0]);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        let path = dir.path().join("hot.bin");
        let versions = versions.clone();
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                fs::write(&path, &versions[i % versions.len()]).unwrap();
            }
        })
    };
    let (mut staged, mut changed) = (0, 0);
    for _ in 0..20 {
        match Package::stage_dir(dir.path()) {
            Ok(p) => {
                let content = &p.files()["hot.bin"];
                // Truncate-then-write makes the empty file a real state too.
                assert!(
                    content.is_empty() || versions.contains(content),
                    "torn read of {} bytes",
                    content.len()
                );
                staged += 1;
            }
            Err(e) => {
                assert_eq!(e.code, codes::PACKAGE_SOURCE_CHANGED);
                changed += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert_eq!(staged + changed, 20);
}

#[test]
fn staging_restarts_when_a_directory_changes_mid_walk() {
    use std::sync::atomic::{AtomicUsize, Ordering};

    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    for i in 0..50 {
        write(dir.path(), &format!("many/{i:02}"), b"x");
    }
    // The exclusion callback runs during the walk: use it to add an entry
    // to a directory after it was listed, on the first attempt only.
    let calls = AtomicUsize::new(0);
    let many = dir.path().join("many");
    let hook = |path: &str| {
        if path.starts_with("many/") && calls.fetch_add(1, Ordering::SeqCst) == 0 {
            fs::write(many.join("late"), b"late").unwrap();
        }
        false
    };
    let p = Package::stage_dir_excluding(dir.path(), &hook).unwrap();
    assert_eq!(p.files()["many/late"], b"late");
    assert!(calls.load(Ordering::SeqCst) > 51, "the walk was restarted");

    // A directory that never stops changing exhausts the bounded retries.
    let counter = AtomicUsize::new(0);
    let always = |path: &str| {
        if path.starts_with("many/") {
            let n = counter.fetch_add(1, Ordering::SeqCst);
            fs::write(many.join(format!("churn-{n}")), b"").unwrap();
        }
        false
    };
    let e = Package::stage_dir_excluding(dir.path(), &always).unwrap_err();
    assert_eq!(e.code, codes::PACKAGE_SOURCE_CHANGED);
}

#[test]
fn run_values_follow_the_conventional_schemas() {
    use flow::schema::Invalid;
    use serde_json::json;

    let bare = Package::from_files(files(&[("FLOW.md", FLOW_MD)])).unwrap();
    assert!(bare.validate_input(&json!([1, "any"])).is_ok());
    assert!(matches!(
        bare.validate_input(&json!(9007199254740992u64)),
        Err(Invalid::Json(_))
    ));
    assert!(bare.validate_settings(&json!({})).is_ok());
    let Err(Invalid::Diagnostic(d)) = bare.validate_settings(&json!({"a/b": 1})) else {
        panic!("settings without a schema must be {{}}");
    };
    assert_eq!(d.instance_pointer, "/a~1b");
    assert!(bare.validate_settings(&json!([])).is_err());
    assert!(bare.validate_settings(&json!(null)).is_err());
    assert!(bare
        .validate_result(&json!({"outcome": "done", "output": null}))
        .is_ok());

    let full = Package::from_files(files(&[
        ("FLOW.md", FLOW_MD),
        ("input.schema.json", &data("input.schema.json")),
        ("settings.schema.json", &data("settings.schema.json")),
        ("result.schema.json", &data("result.schema.json")),
    ]))
    .unwrap();
    assert!(full.validate_settings(&json!([])).is_err());
    assert!(full
        .validate_settings(&json!({"maxRetries": 3, "minimumScore": 0.5}))
        .is_ok());
    assert!(full
        .validate_settings(&json!({"maxRetries": 0, "minimumScore": 0.5}))
        .is_err());
    assert!(full.validate_input(&json!("not an object")).is_err());
    assert!(full
        .validate_result(&json!({"outcome": "blocked", "output": {"reason": "r"}}))
        .is_ok());
    let Err(invalid) = full.validate_result(&json!({"outcome": "blocked", "output": {}})) else {
        panic!("result must match the schema");
    };
    assert_eq!(invalid.code("INVALID_RESULT"), "INVALID_RESULT");
}
