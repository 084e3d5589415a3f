use std::collections::BTreeMap;

use flow::package::{codes, digest_files, Package};

fn files(entries: &[(&str, &[u8])]) -> BTreeMap<String, Vec<u8>> {
    entries
        .iter()
        .map(|(p, c)| (p.to_string(), c.to_vec()))
        .collect()
}

const FLOW_MD: &[u8] = b"---\nname: hello\ndescription: Say hello.\n---\n# Hello\n";

#[test]
fn digest_matches_an_independent_computation() {
    // Computed with Python's hashlib from the Package/1 §6 formula.
    let tree = files(&[
        ("FLOW.md", FLOW_MD),
        ("flow.py", b"#!/usr/bin/env python3\nprint('hi')\n"),
        ("data/\u{e9}t\u{e9}.txt", b"summer\n"),
    ]);
    assert_eq!(
        digest_files(&tree),
        "sha256:e96ecb5e8b579013cbdfd34135c3a89ef16b75a349f30951313ecc0994580e10"
    );
    let p = Package::from_files(tree).unwrap();
    assert_eq!(
        p.digest(),
        "sha256:e96ecb5e8b579013cbdfd34135c3a89ef16b75a349f30951313ecc0994580e10"
    );
    let e = p.entrypoint().unwrap();
    assert_eq!((e.path.as_str(), e.suffix.as_str()), ("flow.py", "py"));
    assert_eq!(e.selector.as_deref(), Some("python3"));
    assert_eq!(p.metadata().name, "hello");
    assert_eq!(
        digest_files(&BTreeMap::new()),
        "sha256:549fadeaa80ceecc4630a44683ae46dfa232760aeb17ab584b477fbe80d70846"
    );
}

#[test]
fn flow_md_is_required_exact_case() {
    let e = Package::from_files(files(&[("flow.md", FLOW_MD)])).unwrap_err();
    assert_eq!(e.code, codes::PACKAGE_FLOW_MISSING);
}

#[test]
fn two_entrypoints_are_ambiguous() {
    let e = Package::from_files(files(&[
        ("FLOW.md", FLOW_MD),
        ("flow.py", b""),
        ("flow.ts", b""),
    ]))
    .unwrap_err();
    assert_eq!(e.code, codes::PACKAGE_ENTRYPOINT_AMBIGUOUS);
}
