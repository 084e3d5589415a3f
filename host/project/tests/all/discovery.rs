use crate::fixture::{located, Project, CONVENTIONAL};

fn flows_jig(source: &str) -> String {
    format!("import {{ defineJig, discover }} from \"@jigging/jig\";\nexport default defineJig({{ flows: {source} }});\n")
}

fn bindings_jig(source: &str) -> String {
    format!("import {{ defineJig, discover }} from \"@jigging/jig\";\nexport default defineJig({{ flows: discover(\"./flows\"), bindings: {source} }});\n")
}

#[test]
fn flow_discovery_is_shallow_and_exact() {
    let p = Project::with_jig(CONVENTIONAL);
    p.flow("flows/a");
    p.flow("flows/a/nested"); // beneath a member: not a member itself
    p.flow("flows/deep/er"); // flows/deep has no FLOW.md: inert, not searched
    p.write(
        "flows/lower/flow.md",
        "---\nname: lower\ndescription: x\n---\n",
    ); // wrong case
    p.write("flows/file", "inert");
    p.write("flows/FLOW.md", "the root itself is not a member");
    p.mkdir("flows/empty");
    p.flow("elsewhere/b");
    p.symlink("../elsewhere/b", "flows/linked"); // never followed
    let decl = p.capture().unwrap();
    assert_eq!(decl.flows, vec!["flows/a"]);
}

#[test]
fn missing_root_is_empty_but_a_file_root_is_invalid() {
    let p = Project::with_jig(&flows_jig("discover([\"./flows\", \"./vendor\"])"));
    p.flow("flows/a");
    assert_eq!(p.capture().unwrap().flows, vec!["flows/a"]);
    p.write("vendor", "not a directory");
    assert_eq!(
        located(&p.refused()),
        (
            "PROJECT_DECLARATION_INVALID",
            Some("jig.ts"),
            Some("/flows/roots/1")
        )
    );
}

#[test]
fn multiple_roots_form_a_union() {
    let p = Project::with_jig(&flows_jig("discover([\"./vendor\", \"./flows\"])"));
    p.flow("flows/a");
    p.flow("vendor/b");
    assert_eq!(p.capture().unwrap().flows, vec!["flows/a", "vendor/b"]);
}

#[test]
fn overlapping_roots_are_rejected() {
    let p = Project::with_jig(
        "export default { flows: { kind: \"discover\", roots: [\"flows\", \"flows/a\"] } };\n",
    );
    p.flow("flows/a/b");
    assert_eq!(
        located(&p.refused()),
        (
            "PROJECT_DECLARATION_INVALID",
            Some("jig.ts"),
            Some("/flows/roots/1")
        )
    );
}

#[test]
fn symlinks_reject() {
    // A root reached through a symlink.
    let p = Project::with_jig(&flows_jig("discover(\"./link/flows\")"));
    p.flow("real/flows/a");
    p.symlink("real", "link");
    assert_eq!(p.refused().code, "PROJECT_UNSAFE");

    // A member whose FLOW.md is a symlink.
    let p = Project::with_jig(CONVENTIONAL);
    p.write("outside.md", "---\nname: a\ndescription: x\n---\n");
    p.mkdir("flows/a");
    p.symlink("../../outside.md", "flows/a/FLOW.md");
    assert_eq!(p.refused().code, "PROJECT_UNSAFE");

    // An exact member that is a symlink.
    let p = Project::with_jig(&flows_jig("[\"flows/a\"]"));
    p.flow("real/a");
    p.symlink("../real/a", "flows/a");
    assert_eq!(
        located(&p.refused()),
        ("PROJECT_UNSAFE", Some("jig.ts"), Some("/flows/paths/0"))
    );

    // A Binding declaration that is a symlink.
    let p = Project::with_jig(CONVENTIONAL);
    p.write("real.ts", "export default { package: \"flows/a\" };");
    p.flow("flows/a");
    p.symlink("../real.ts", "bindings/intake.ts");
    assert_eq!(
        located(&p.refused()),
        ("PROJECT_UNSAFE", Some("jig.ts"), Some("/bindings/roots/0"))
    );
}

#[test]
fn case_fold_collisions_reject() {
    let p = Project::with_jig(CONVENTIONAL);
    p.flow("flows/hello");
    p.flow("flows/HELLO");
    assert_eq!(p.refused().code, "PROJECT_MEMBER_COLLISION");

    let p = Project::with_jig(CONVENTIONAL);
    p.flow("flows/stra\u{df}e");
    p.flow("flows/STRASSE");
    assert_eq!(p.refused().code, "PROJECT_MEMBER_COLLISION");

    let p = Project::with_jig(&flows_jig("[\"flows/a\", \"flows/A\"]"));
    p.flow("flows/a");
    p.flow("flows/A");
    assert_eq!(
        located(&p.refused()),
        ("PROJECT_DECLARATION_INVALID", Some("jig.ts"), None)
    );
}

#[test]
fn forged_case_colliding_members_reject_in_rust() {
    let p = Project::with_jig(
        "export default { flows: { kind: \"members\", paths: [\"flows/a\", \"flows/A\"] } };\n",
    );
    p.flow("flows/a");
    p.flow("flows/A");
    assert_eq!(
        located(&p.refused()),
        (
            "PROJECT_MEMBER_COLLISION",
            Some("jig.ts"),
            Some("/flows/paths/1")
        )
    );
}

#[test]
fn non_nfc_member_names_reject() {
    let p = Project::with_jig(CONVENTIONAL);
    p.flow("flows/cafe\u{301}");
    let e = p.refused();
    assert_eq!(
        located(&e),
        (
            "PROJECT_DECLARATION_INVALID",
            Some("jig.ts"),
            Some("/flows/roots/0")
        )
    );
}

#[test]
fn protected_state_cannot_be_a_root_or_member() {
    for source in ["discover(\".jig\")", "[\".JIG/x\"]"] {
        let p = Project::with_jig(&flows_jig(source));
        p.flow(".jig/x");
        let e = p.refused();
        assert_eq!(e.code, "PROJECT_DECLARATION_INVALID", "{source}");
    }
    let p = Project::with_jig(
        "export default { flows: { kind: \"members\", paths: [\".jig/x\"] } };\n",
    );
    assert_eq!(
        located(&p.refused()),
        (
            "PROJECT_DECLARATION_INVALID",
            Some("jig.ts"),
            Some("/flows/paths/0")
        )
    );
}

#[test]
fn exact_members_fail_closed() {
    let cases = [
        ("[\"flows/missing\"]", "PROJECT_MEMBER_MISSING"),
        ("[\"flows/nofm\"]", "PROJECT_MEMBER_MISSING"),
        ("[\"flows/file\"]", "PROJECT_MEMBER_MISSING"),
        ("[\"../outside\"]", "PROJECT_DECLARATION_INVALID"),
        (
            "[\"flows/a\", \"./flows/a\"]",
            "PROJECT_DECLARATION_INVALID",
        ),
    ];
    for (source, code) in cases {
        let p = Project::with_jig(&flows_jig(source));
        p.flow("flows/a");
        p.mkdir("flows/nofm");
        p.write("flows/file", "x");
        assert_eq!(p.refused().code, code, "{source}");
    }
    let p = Project::with_jig(&flows_jig("[\"flows/a\"]"));
    p.flow("flows/a");
    assert_eq!(p.capture().unwrap().flows, vec!["flows/a"]);
}

#[test]
fn binding_discovery_selects_local_name_files_only() {
    let p = Project::with_jig(CONVENTIONAL);
    p.flow("flows/a");
    let decl = "export default { package: \"flows/a\" };\n";
    p.write("bindings/intake.ts", decl);
    p.write("bindings/two-words.ts", decl);
    p.write("bindings/Upper.ts", "this is not parsed");
    p.write("bindings/script.js", "this is not parsed");
    p.write("bindings/nested/deep.ts", "this is not parsed");
    p.mkdir("bindings/dir.ts");
    let decl = p.capture().unwrap();
    assert_eq!(
        decl.bindings.keys().collect::<Vec<_>>(),
        vec!["intake", "two-words"]
    );
}

#[test]
fn binding_ids_collide_across_roots() {
    let p = Project::with_jig(&bindings_jig("discover([\"./bindings\", \"./more\"])"));
    p.flow("flows/a");
    p.write(
        "bindings/intake.ts",
        "export default { package: \"flows/a\" };\n",
    );
    p.write(
        "more/intake.ts",
        "export default { package: \"flows/a\" };\n",
    );
    assert_eq!(
        located(&p.refused()),
        (
            "PROJECT_MEMBER_COLLISION",
            Some("jig.ts"),
            Some("/bindings/roots/1")
        )
    );
}

#[test]
fn exact_binding_members() {
    let p = Project::with_jig(&bindings_jig("[\"./bindings/intake.ts\"]"));
    p.flow("flows/a");
    p.write(
        "bindings/intake.ts",
        "export default { package: \"flows/a\" };\n",
    );
    p.write(
        "bindings/other.ts",
        "export default { package: \"flows/a\" };\n",
    );
    let decl = p.capture().unwrap();
    assert_eq!(decl.bindings.keys().collect::<Vec<_>>(), vec!["intake"]);

    for (source, code) in [
        ("[\"bindings/missing.ts\"]", "PROJECT_MEMBER_MISSING"),
        ("[\"bindings/Intake.ts\"]", "PROJECT_DECLARATION_INVALID"),
        ("[\"bindings/intake.js\"]", "PROJECT_DECLARATION_INVALID"),
    ] {
        let p = Project::with_jig(&bindings_jig(source));
        p.flow("flows/a");
        p.write(
            "bindings/intake.ts",
            "export default { package: \"flows/a\" };\n",
        );
        assert_eq!(p.refused().code, code, "{source}");
    }
}

#[test]
fn member_count_limit_is_inclusive() {
    let p = Project::with_jig(CONVENTIONAL);
    for i in 0..jig_project::MAX_MEMBERS {
        p.flow(&format!("flows/f{i}"));
    }
    assert_eq!(p.capture().unwrap().flows.len(), jig_project::MAX_MEMBERS);
    p.flow("flows/one-more");
    assert_eq!(
        located(&p.refused()),
        (
            "PROJECT_DECLARATION_INVALID",
            Some("jig.ts"),
            Some("/flows")
        )
    );
}
