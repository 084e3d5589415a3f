use std::time::{Duration, Instant};

use jig_project::EVALUATION_DEADLINE;

use crate::fixture::{located, Project};

const HEAD: &str = "import { defineJig } from \"@jigging/jig\";\n";

fn jig(body: &str) -> Project {
    Project::with_jig(&format!("{HEAD}{body}\n"))
}

#[test]
fn no_host_authority_is_reachable() {
    // Every name a runtime could use to reach files, environment, network,
    // processes or timers is absent.
    let p = jig(
        r#"const names = ["process", "require", "std", "os", "Deno", "Bun", "fetch", "XMLHttpRequest",
  "WebSocket", "setTimeout", "setInterval", "print", "console", "scriptArgs", "module", "exports"];
const present = names.filter((n) => typeof (globalThis as any)[n] !== "undefined");
if (present.length > 0) throw new Error("reachable: " + present.join(","));
export default defineJig({});"#,
    );
    p.capture().unwrap();
}

#[test]
fn reading_the_environment_fails_evaluation() {
    let p = jig("const home = (globalThis as any).process.env.HOME;\nexport default defineJig({ flows: [home] });");
    let e = p.refused();
    assert_eq!(
        located(&e),
        ("PROJECT_EVALUATION_FAILED", Some("jig.ts"), None)
    );
    assert!(e.message.starts_with("TypeError"), "{}", e.message);
}

#[test]
fn dynamic_import_through_eval_cannot_load_anything() {
    for specifier in ["fs", "./jig.ts", "/etc/passwd"] {
        let p = jig(&format!(
            "const load = new Function(\"s\", \"return import(s)\");\nawait load(\"{specifier}\");\nexport default defineJig({{}});"
        ));
        let e = p.refused();
        assert_eq!(
            located(&e),
            ("PROJECT_EVALUATION_FAILED", Some("jig.ts"), None),
            "{specifier}: {e}"
        );
    }
}

#[test]
fn an_infinite_loop_is_interrupted_at_the_deadline() {
    let p = jig("while (true) {}\nexport default defineJig({});");
    let started = Instant::now();
    let e = p.refused();
    let took = started.elapsed();
    assert_eq!(
        located(&e),
        ("PROJECT_EVALUATION_FAILED", Some("jig.ts"), None)
    );
    assert!(e.message.contains("deadline"), "{}", e.message);
    assert!(took >= EVALUATION_DEADLINE, "{took:?}");
    assert!(
        took < EVALUATION_DEADLINE + Duration::from_secs(3),
        "{took:?}"
    );
}

#[test]
fn a_loop_that_catches_everything_is_still_interrupted() {
    let p = jig("for (;;) { try { while (true) {} } catch {} }\nexport default defineJig({});");
    let e = p.refused();
    assert_eq!(e.code, "PROJECT_EVALUATION_FAILED");
    assert!(e.message.contains("deadline"), "{}", e.message);
}

#[test]
fn a_memory_bomb_is_stopped() {
    let p = jig("const hoard: string[][] = [];\nfor (;;) hoard.push(new Array(1 << 20).fill(\"x\"));\nexport default defineJig({});");
    let started = Instant::now();
    let e = p.refused();
    assert_eq!(
        located(&e),
        ("PROJECT_EVALUATION_FAILED", Some("jig.ts"), None)
    );
    assert!(e.message.contains("memory"), "{}", e.message);
    assert!(
        started.elapsed() < EVALUATION_DEADLINE,
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn unbounded_recursion_is_stopped() {
    let p = jig("function down(n: number): number { return down(n + 1) + 1; }\ndown(0);\nexport default defineJig({});");
    assert_eq!(p.refused().code, "PROJECT_EVALUATION_FAILED");
}

#[test]
fn a_promise_that_never_settles_fails() {
    let p = jig("await new Promise(() => {});\nexport default defineJig({});");
    assert_eq!(p.refused().code, "PROJECT_EVALUATION_FAILED");
}

#[test]
fn thrown_errors_fail_evaluation() {
    let p = jig("throw new RangeError(\"nope\");\nexport default defineJig({});");
    let e = p.refused();
    assert_eq!(e.code, "PROJECT_EVALUATION_FAILED");
    assert_eq!(e.message, "RangeError: nope");
}

#[test]
fn a_missing_default_export_is_invalid() {
    let p = Project::with_jig("export const flows = [];\n");
    assert_eq!(
        located(&p.refused()),
        ("PROJECT_DECLARATION_INVALID", Some("jig.ts"), None)
    );
}

/// Default exports that are not inert JSON values, and where the snapshot points.
#[test]
fn non_json_default_exports_are_rejected_with_pointers() {
    let cases = [
        ("() => 1", ""),
        ("{ flows: () => 1 }", "/flows"),
        ("{ flows: Symbol(\"x\") }", "/flows"),
        ("{ flows: 1n }", "/flows"),
        ("{ flows: NaN }", "/flows"),
        ("{ flows: Infinity }", "/flows"),
        ("{ flows: 9007199254740992 }", "/flows"),
        ("{ flows: undefined }", "/flows"),
        ("{ flows: new Date(0) }", "/flows"),
        ("{ flows: new Map() }", "/flows"),
        ("{ flows: [1, , 3] }", "/flows"),
        ("{ flows: Object.assign([1], { extra: 2 }) }", "/flows"),
        ("{ flows: new (class Roots {})() }", "/flows"),
        ("{ flows: new (class Items extends Array {})() }", "/flows"),
        ("{ get flows() { return []; } }", "/flows"),
        ("{ [Symbol.iterator]: 1 }", ""),
        (
            "(() => { const o: any = {}; o.self = o; return o; })()",
            "/self",
        ),
        ("{ \"\\ud800\": 1 }", "/\u{fffd}"),
        ("{ a: { \"x/y~\": () => 1 } }", "/a/x~1y~0"),
    ];
    for (value, pointer) in cases {
        let p = Project::with_jig(&format!("export default {value};\n"));
        let e = p.refused();
        if value.contains("ud800") {
            assert_eq!(e.code, "PROJECT_DECLARATION_INVALID", "{value}");
            continue;
        }
        assert_eq!(
            located(&e),
            ("PROJECT_DECLARATION_INVALID", Some("jig.ts"), Some(pointer)),
            "{value}: {e}"
        );
        assert_eq!(
            e.message, "default export contains a non-JSON value",
            "{value}"
        );
    }
}

#[test]
fn tampering_with_intrinsics_cannot_forge_the_snapshot() {
    // The author replaces the tools a naive snapshot would use; the value is
    // still read faithfully and judged in Rust.
    let p = Project::with_jig(
        r#"Object.keys = () => [];
Reflect.ownKeys = () => [];
JSON.stringify = () => "{}";
Object.defineProperty(Object.prototype, "toJSON", { value: () => ({}) });
export default { flows: { kind: "discover", roots: ["../escape"] } };
"#,
    );
    assert_eq!(
        located(&p.refused()),
        (
            "PROJECT_DECLARATION_INVALID",
            Some("jig.ts"),
            Some("/flows/roots/0")
        )
    );
}

#[test]
fn clock_and_randomness_are_ordinary_language_features() {
    let p = jig("const t = Date.now() + Math.random();\nif (!(t > 0)) throw new Error(\"no clock\");\nexport default defineJig({});");
    p.capture().unwrap();
}

#[test]
fn ordinary_allocations_fit_under_the_memory_limit() {
    // A quarter of the limit is fine; twice the limit is not.
    let quarter = jig_project::EVALUATION_MEMORY_LIMIT / 4;
    let p = jig(&format!("const s = \"x\".repeat({quarter});\nif (s.length !== {quarter}) throw new Error();\nexport default defineJig({{}});"));
    p.capture().unwrap();
    let double = jig_project::EVALUATION_MEMORY_LIMIT * 2;
    let p = jig(&format!(
        "const s = \"x\".repeat({double});\nexport default defineJig({{ flows: [s] }});"
    ));
    let e = p.refused();
    assert_eq!(e.code, "PROJECT_EVALUATION_FAILED");
    assert!(e.message.contains("memory"), "{}", e.message);
}

#[test]
fn the_deadline_is_shared_by_every_declaration_of_one_capture() {
    // Two Bindings each busy for 60% of the budget: together they exceed it.
    let p = Project::with_jig(crate::fixture::CONVENTIONAL);
    p.flow("flows/a");
    let spin = (EVALUATION_DEADLINE.as_millis() * 6 / 10) as u64;
    for id in ["one", "two"] {
        p.write(
            &format!("bindings/{id}.ts"),
            &format!("const end = Date.now() + {spin};\nwhile (Date.now() < end) {{}}\nexport default {{ package: \"flows/a\" }};\n"),
        );
    }
    let e = p.refused();
    assert_eq!(
        located(&e),
        ("PROJECT_EVALUATION_FAILED", Some("bindings/two.ts"), None)
    );
    assert!(e.message.contains("deadline"), "{}", e.message);
}
