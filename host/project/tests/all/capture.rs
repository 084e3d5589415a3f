use serde_json::json;

use crate::fixture::{located, Project};

#[test]
fn greeting_project_selects_hello() {
    let p = Project::init(false);
    let decl = p.capture().unwrap();
    assert_eq!(decl.flows, vec!["flows/hello"]);
    assert!(decl.bindings.is_empty());
    assert_eq!(
        serde_json::to_string(&decl.project).unwrap(),
        r#"{"bindings":{"kind":"discover","roots":["bindings"]},"flows":{"kind":"discover","roots":["flows"]}}"#
    );
    assert_eq!(decl.sources.keys().collect::<Vec<_>>(), vec!["jig.ts"]);
    assert_eq!(decl.sources["jig.ts"], jig_project::JIG_TS.as_bytes());
}

#[test]
fn missing_jig_ts_is_not_found() {
    let p = Project::init(true);
    std::fs::remove_file(p.path("jig.ts")).unwrap();
    assert_eq!(p.refused().code, "PROJECT_NOT_FOUND");
    p.mkdir("jig.ts");
    assert_eq!(p.refused().code, "PROJECT_NOT_FOUND");
    let gone = jig_project::capture(&p.path("no-such-dir")).unwrap_err();
    assert_eq!(gone.code, "PROJECT_NOT_FOUND");
}

#[test]
fn symlinked_jig_ts_is_unsafe() {
    let p = Project::init(true);
    std::fs::rename(p.path("jig.ts"), p.path("real.ts")).unwrap();
    p.symlink("real.ts", "jig.ts");
    assert_eq!(p.refused().code, "PROJECT_UNSAFE");
}

#[test]
fn omitted_fields_are_empty_sources() {
    let p = Project::with_jig(
        "import { defineJig } from \"@jigging/jig\";\nexport default defineJig({});\n",
    );
    p.flow("flows/a");
    p.write("bindings/b.ts", "export default {};");
    let decl = p.capture().unwrap();
    assert_eq!(decl.project, json!({}));
    assert!(decl.flows.is_empty());
    assert!(decl.bindings.is_empty());
}

#[test]
fn exact_member_lists_normalize() {
    let p = Project::with_jig(
        "import { defineJig } from \"@jigging/jig\";\nexport default defineJig({ flows: [\"./flows/b\", \"flows/a\"], bindings: [] });\n",
    );
    p.flow("flows/a");
    p.flow("flows/b");
    p.flow("flows/c");
    let decl = p.capture().unwrap();
    assert_eq!(decl.flows, vec!["flows/a", "flows/b"]);
    assert_eq!(
        decl.project,
        json!({"bindings": {"kind": "members", "paths": []}, "flows": {"kind": "members", "paths": ["flows/a", "flows/b"]}})
    );
}

/// `jig.ts` bodies whose helper call throws, and the reference's exact message.
#[test]
fn helper_errors_carry_the_documented_messages() {
    let cases = [
        (
            "defineJig({ flows: discover([]) })",
            "discover() requires at least one root",
        ),
        (
            "defineJig({ flows: discover([1]) })",
            "roots must be an array of strings",
        ),
        (
            "defineJig({ flows: discover(7) })",
            "roots must be an array of strings",
        ),
        (
            "defineJig({ flows: discover(\"./flows/*\") })",
            "root cannot contain glob characters",
        ),
        (
            "defineJig({ flows: discover([\"flows\", \"./Flows\"]) })",
            "root paths collide: Flows and flows",
        ),
        (
            "defineJig({ flows: discover(\"./flows\"), extra: 1 })",
            "Jig definition has unknown field extra",
        ),
        (
            "defineJig({ flows: { kind: \"members\", paths: [] } })",
            "flows source must come from discover()",
        ),
        (
            "defineJig({ flows: { kind: \"glob\", roots: [\"x\"] } })",
            "flows source has an invalid kind",
        ),
        (
            "defineJig({ bindings: { kind: \"discover\", roots: [] } })",
            "bindings discovery requires at least one root",
        ),
        (
            "defineJig({ flows: undefined })",
            "default export contains a non-JSON value",
        ),
    ];
    for (call, message) in cases {
        let p = Project::with_jig(&format!(
            "import {{ defineJig, discover }} from \"@jigging/jig\";\nexport default {call};\n"
        ));
        let e = p.refused();
        assert_eq!(
            (e.code.as_str(), e.path.as_deref()),
            ("PROJECT_DECLARATION_INVALID", Some("jig.ts")),
            "{call}: {e}"
        );
        assert_eq!(e.message, message, "{call}");
    }
}

#[test]
fn too_many_roots_hit_the_container_bound() {
    let p = Project::with_jig(
        "import { defineJig, discover } from \"@jigging/jig\";\nexport default defineJig({ flows: discover(Array.from({ length: 65537 }, (_, i) => `r${i}`)) });\n",
    );
    assert_eq!(
        p.refused().message,
        "root values exceed the JSON/1 container bound"
    );
}

#[test]
fn forged_helper_output_is_renormalized() {
    let p = Project::with_jig(
        "export default { flows: { kind: \"discover\", roots: [\"./flows\"] } };\n",
    );
    p.flow("flows/x");
    let decl = p.capture().unwrap();
    assert_eq!(
        decl.project,
        json!({"flows": {"kind": "discover", "roots": ["flows"]}})
    );
    assert_eq!(decl.flows, vec!["flows/x"]);

    let cases = [
        (
            "{ flows: { kind: \"members\", paths: [\"flows/x\", \"./flows/x\"] } }",
            (
                "PROJECT_MEMBER_COLLISION",
                Some("jig.ts"),
                Some("/flows/paths/1"),
            ),
        ),
        (
            "{ flows: { kind: \"discover\", roots: [\".jig\"] } }",
            (
                "PROJECT_DECLARATION_INVALID",
                Some("jig.ts"),
                Some("/flows/roots/0"),
            ),
        ),
        (
            "{ flows: [\"flows/x\"] }",
            (
                "PROJECT_DECLARATION_INVALID",
                Some("jig.ts"),
                Some("/flows"),
            ),
        ),
        (
            "{ flows: { kind: \"discover\", roots: [\"a\"], extra: true } }",
            (
                "PROJECT_DECLARATION_INVALID",
                Some("jig.ts"),
                Some("/flows/extra"),
            ),
        ),
        (
            "[]",
            ("PROJECT_DECLARATION_INVALID", Some("jig.ts"), Some("")),
        ),
    ];
    for (value, expected) in cases {
        p.write("jig.ts", &format!("export default {value};\n"));
        assert_eq!(located(&p.refused()), expected, "{value}");
    }
}

#[test]
fn helper_outputs_are_deeply_frozen_with_sorted_keys() {
    let p = Project::with_jig(
        r#"import { defineJig, discover, defineBinding } from "@jigging/jig";
const check = (ok: boolean, what: string) => { if (!ok) throw new Error(what); };
const d = discover(["./b", "a"]);
check(Object.isFrozen(d) && Object.isFrozen(d.roots), "discover frozen");
check(JSON.stringify(d) === '{"kind":"discover","roots":["a","b"]}', JSON.stringify(d));
const j = defineJig({ flows: ["./z", "y"], bindings: d });
check(Object.isFrozen(j) && Object.isFrozen(j.flows) && Object.isFrozen(j.flows.paths), "defineJig frozen");
check(JSON.stringify(j) === '{"bindings":{"kind":"discover","roots":["a","b"]},"flows":{"kind":"members","paths":["y","z"]}}', JSON.stringify(j));
const b = defineBinding({ slots: { z: "flow:./f", a: "binding:x" }, settings: { y: [1, { b: 2, a: 1 }], x: null }, package: "./p" });
check(Object.isFrozen(b) && Object.isFrozen(b.settings) && Object.isFrozen(b.settings.y) && Object.isFrozen(b.settings.y[1]), "defineBinding frozen");
check(JSON.stringify(b) === '{"kind":"package","package":"p","settings":{"x":null,"y":[1,{"a":1,"b":2}]},"slots":{"a":"binding:x","z":"flow:f"}}', JSON.stringify(b));
const keys = Object.keys({ ...{ only: 1 } });
check(keys.length === 1, "spread");
export default defineJig({});
"#,
    );
    p.capture().unwrap();
}
