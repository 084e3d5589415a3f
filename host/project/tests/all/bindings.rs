use serde_json::json;

use jig_project::SlotTarget;

use crate::fixture::{located, Project, CONVENTIONAL};

fn review_project() -> Project {
    let p = Project::with_jig(CONVENTIONAL);
    for flow in [
        "flows/review",
        "flows/research",
        "flows/critique",
        "flows/repair",
    ] {
        p.flow(flow);
    }
    p.write(
        "bindings/reviewer.ts",
        r#"import { defineBinding } from "@jigging/jig";

export default defineBinding({
  package: "./flows/review",
  settings: {
    strict: true,
  },
  slots: {
    research: "flow:./flows/research",
    critique: "binding:critic",
  },
});
"#,
    );
    p.write(
        "bindings/critic.ts",
        "import { defineBinding } from \"@jigging/jig\";\nexport default defineBinding({ package: \"flows/critique\" });\n",
    );
    p
}

#[test]
fn bindings_with_slots_normalize() {
    let p = review_project();
    let decl = p.capture().unwrap();
    assert_eq!(
        decl.flows,
        vec![
            "flows/critique",
            "flows/repair",
            "flows/research",
            "flows/review"
        ]
    );
    assert_eq!(
        decl.bindings.keys().collect::<Vec<_>>(),
        vec!["critic", "reviewer"]
    );
    let reviewer = &decl.bindings["reviewer"];
    assert_eq!(reviewer.file, "bindings/reviewer.ts");
    assert_eq!(reviewer.package, "flows/review");
    assert_eq!(reviewer.settings, json!({"strict": true}));
    assert_eq!(
        reviewer.slots["research"],
        SlotTarget::Flow("flows/research".into())
    );
    assert_eq!(
        reviewer.slots["critique"],
        SlotTarget::Binding("critic".into())
    );
    assert_eq!(reviewer.commands, None);
    assert_eq!(
        serde_json::to_string(&reviewer.value()).unwrap(),
        r#"{"kind":"package","package":"flows/review","settings":{"strict":true},"slots":{"critique":"binding:critic","research":"flow:flows/research"}}"#
    );
    let critic = &decl.bindings["critic"];
    assert_eq!(
        (critic.settings.clone(), critic.slots.len()),
        (json!({}), 0)
    );
    assert_eq!(
        decl.sources.keys().collect::<Vec<_>>(),
        vec!["bindings/critic.ts", "bindings/reviewer.ts", "jig.ts"]
    );
}

#[test]
fn command_policy_normalizes() {
    let p = review_project();
    p.write(
        "bindings/specialist.ts",
        r#"import { defineBinding } from "@jigging/jig";
export default defineBinding({
  package: "flows/repair",
  commands: { tests: { test: ["test/project.test.ts"] }, cli: { run: "src/cli.ts" } },
});
"#,
    );
    let decl = p.capture().unwrap();
    assert_eq!(
        serde_json::to_string(&decl.bindings["specialist"].value()).unwrap(),
        r#"{"commands":{"cli":{"run":"src/cli.ts"},"tests":{"test":["test/project.test.ts"]}},"kind":"package","package":"flows/repair","settings":{},"slots":{}}"#
    );
}

#[test]
fn binding_helper_errors_carry_the_documented_messages() {
    let many_slots = (0..257)
        .map(|i| format!("s{i}: \"binding:critic\""))
        .collect::<Vec<_>>()
        .join(", ");
    let many_commands = (0..9)
        .map(|i| format!("c{i}: {{ run: \"a.ts\" }}"))
        .collect::<Vec<_>>()
        .join(", ");
    let cases = [
        ("{ settings: {} }".to_owned(), "Binding package is required"),
        (
            "{ package: \"flows/review\", settings: [] }".to_owned(),
            "settings must be an object",
        ),
        (
            "{ package: \"flows/review\", settings: { at: new Date(0) } }".to_owned(),
            "settings contains a non-JSON value",
        ),
        (
            format!("{{ package: \"flows/review\", slots: {{ {many_slots} }} }}"),
            "slots exceed 256 entries",
        ),
        (
            "{ package: \"flows/review\", slots: { Bad: \"binding:critic\" } }".to_owned(),
            "slot name must be a LocalName",
        ),
        (
            "{ package: \"flows/review\", slots: { a: 1 } }".to_owned(),
            "slot a must be a target selector",
        ),
        (
            "{ package: \"flows/review\", slots: { a: \"flows/research\" } }".to_owned(),
            "slot a must select flow:<path> or binding:<id>",
        ),
        (
            "{ package: \"flows/review\", slots: { a: \"binding:Critic\" } }".to_owned(),
            "slot a must select flow:<path> or binding:<id>",
        ),
        (
            format!("{{ package: \"flows/review\", commands: {{ {many_commands} }} }}"),
            "commands exceed eight entries",
        ),
        (
            "{ package: \"flows/review\", id: \"x\" }".to_owned(),
            "Binding definition has unknown field id",
        ),
    ];
    for (definition, message) in cases {
        let p = review_project();
        p.write(
            "bindings/reviewer.ts",
            &format!("import {{ defineBinding }} from \"@jigging/jig\";\nexport default defineBinding({definition});\n"),
        );
        let e = p.refused();
        assert_eq!(
            (e.code.as_str(), e.path.as_deref()),
            ("PROJECT_DECLARATION_INVALID", Some("bindings/reviewer.ts")),
            "{definition}: {e}"
        );
        assert_eq!(e.message, message, "{definition}");
    }
}

#[test]
fn package_must_be_a_selected_flow() {
    let p = review_project();
    p.write(
        "bindings/critic.ts",
        "export default { package: \"flows/nowhere\" };\n",
    );
    assert_eq!(
        located(&p.refused()),
        (
            "PROJECT_BINDING_PACKAGE_MISSING",
            Some("bindings/critic.ts"),
            Some("/package")
        )
    );
}

#[test]
fn slot_targets_must_be_declared() {
    let p = review_project();
    std::fs::remove_file(p.path("bindings/critic.ts")).unwrap();
    assert_eq!(
        located(&p.refused()),
        (
            "PROJECT_BINDING_SLOT_MISSING",
            Some("bindings/reviewer.ts"),
            Some("/slots/critique")
        )
    );
    let p = review_project();
    p.write(
        "bindings/critic.ts",
        "export default { package: \"flows/critique\", slots: { x: \"flow:flows/missing\" } };\n",
    );
    assert_eq!(
        located(&p.refused()),
        (
            "PROJECT_BINDING_SLOT_MISSING",
            Some("bindings/critic.ts"),
            Some("/slots/x")
        )
    );
}

#[test]
fn forged_binding_values_are_renormalized() {
    let p = review_project();
    p.write(
        "bindings/critic.ts",
        "export default { kind: \"package\", package: \"./flows/critique\", settings: {}, slots: {} };\n",
    );
    let decl = p.capture().unwrap();
    assert_eq!(decl.bindings["critic"].package, "flows/critique");
    p.write(
        "bindings/critic.ts",
        "export default { kind: \"flow\", package: \"flows/critique\" };\n",
    );
    assert_eq!(
        located(&p.refused()),
        (
            "PROJECT_DECLARATION_INVALID",
            Some("bindings/critic.ts"),
            Some("/kind")
        )
    );
}

#[test]
fn each_binding_evaluates_with_fresh_module_state() {
    let p = review_project();
    p.write(
        "lib/counter.ts",
        "let n = 0;\nexport function next(): number { n += 1; return n; }\n",
    );
    for (file, package) in [
        ("bindings/critic.ts", "flows/critique"),
        ("bindings/reviewer.ts", "flows/review"),
    ] {
        p.write(
            file,
            &format!("import {{ next }} from \"../lib/counter.ts\";\nexport default {{ package: \"{package}\", settings: {{ n: next() }} }};\n"),
        );
    }
    let decl = p.capture().unwrap();
    assert_eq!(decl.bindings["critic"].settings, json!({"n": 1}));
    assert_eq!(decl.bindings["reviewer"].settings, json!({"n": 1}));
    assert!(decl.sources.contains_key("lib/counter.ts"));
}
