use jig_project::{MAX_CLOSURE_BYTES, MAX_CLOSURE_MODULES, MAX_MODULE_BYTES};

use crate::fixture::{located, Project};

const HEAD: &str = "import { defineJig, discover } from \"@jigging/jig\";\n";

#[test]
fn relative_ts_imports_are_captured() {
    let p = Project::with_jig(&format!(
        "{HEAD}import {{ roots }} from \"./config/roots.ts\";\nexport {{ helper }} from \"./config/helper.ts\";\nexport default defineJig({{ flows: discover(roots) }});\n"
    ));
    p.write(
        "config/roots.ts",
        "import { prefix } from \"../shared/prefix.ts\";\nimport type { Shape } from \"./types.ts\";\nexport const roots: string[] = [`${prefix}flows`];\nconst s: Shape = { x: 1 };\nvoid s;\n",
    );
    p.write("config/types.ts", "export interface Shape { x: number }\n");
    p.write("config/helper.ts", "export const helper = 1;\n");
    p.write(
        "shared/prefix.ts",
        "export const prefix: string = \"./\";\n",
    );
    p.flow("flows/a");
    let decl = p.capture().unwrap();
    assert_eq!(decl.flows, vec!["flows/a"]);
    assert_eq!(
        decl.sources.keys().collect::<Vec<_>>(),
        vec![
            "config/helper.ts",
            "config/roots.ts",
            "config/types.ts",
            "jig.ts",
            "shared/prefix.ts"
        ]
    );
    assert_eq!(
        decl.sources["shared/prefix.ts"],
        b"export const prefix: string = \"./\";\n"
    );
}

#[test]
fn forbidden_imports_reject_before_evaluation() {
    let cases = [
        ("import fs from \"fs\";", "jig.ts"),
        ("import x from \"node:fs\";", "jig.ts"),
        ("import x from \"@jigging/flow\";", "jig.ts"),
        ("import x from \"./lib/x\";", "jig.ts"),
        ("import x from \"./lib/x.js\";", "jig.ts"),
        ("import x from \"../outside.ts\";", "jig.ts"),
        ("import x from \"./.jig/x.ts\";", "jig.ts"),
        ("export * from \"fs\";", "jig.ts"),
        ("const m = await import(\"./lib/x.ts\");", "jig.ts"),
        ("const fs = require(\"fs\");", "jig.ts"),
        ("import x from \"./lib/missing.ts\";", "jig.ts"),
        ("import x from \"./lib/dir.ts\";", "jig.ts"),
    ];
    for (line, path) in cases {
        // A throw first proves nothing was evaluated: evaluation would fail differently.
        let p = Project::with_jig(&format!(
            "{HEAD}throw new Error(\"evaluated\");\n{line}\nexport default defineJig({{}});\n"
        ));
        p.write("lib/x.ts", "export default 1;\n");
        p.mkdir("lib/dir.ts");
        p.write("../outside.ts", "export default 1;\n");
        let e = p.refused();
        assert_eq!(
            (e.code.as_str(), e.path.as_deref()),
            ("PROJECT_DECLARATION_INVALID", Some(path)),
            "{line}: {e}"
        );
    }
}

#[test]
fn nested_module_errors_point_at_the_importer() {
    let p = Project::with_jig(&format!(
        "{HEAD}import \"./lib/a.ts\";\nexport default defineJig({{}});\n"
    ));
    p.write("lib/a.ts", "import \"os\";\n");
    assert_eq!(
        located(&p.refused()),
        ("PROJECT_DECLARATION_INVALID", Some("lib/a.ts"), None)
    );
}

#[test]
fn symlinked_modules_are_unsafe() {
    let p = Project::with_jig(&format!(
        "{HEAD}import \"./lib/a.ts\";\nexport default defineJig({{}});\n"
    ));
    p.write("real.ts", "export {};\n");
    p.symlink("../real.ts", "lib/a.ts");
    assert_eq!(p.refused().code, "PROJECT_UNSAFE");

    let p = Project::with_jig(&format!(
        "{HEAD}import \"./lib/a.ts\";\nexport default defineJig({{}});\n"
    ));
    p.write("real/a.ts", "export {};\n");
    p.symlink("real", "lib");
    assert_eq!(p.refused().code, "PROJECT_UNSAFE");
}

#[test]
fn import_cycles_reject() {
    let p = Project::with_jig(&format!(
        "{HEAD}import \"./a.ts\";\nexport default defineJig({{}});\n"
    ));
    p.write("a.ts", "import \"./b.ts\";\n");
    p.write("b.ts", "import \"./a.ts\";\n");
    let e = p.refused();
    assert_eq!(e.code, "PROJECT_DECLARATION_INVALID");
    assert!(e.message.contains("a.ts -> b.ts -> a.ts"), "{}", e.message);

    let p = Project::with_jig(&format!(
        "{HEAD}import \"./jig.ts\";\nexport default defineJig({{}});\n"
    ));
    assert_eq!(p.refused().code, "PROJECT_DECLARATION_INVALID");
}

#[test]
fn shared_modules_are_not_cycles() {
    let p = Project::with_jig(&format!(
        "{HEAD}import \"./a.ts\";\nimport \"./b.ts\";\nexport default defineJig({{}});\n"
    ));
    p.write("a.ts", "import \"./c.ts\";\n");
    p.write("b.ts", "import \"./c.ts\";\n");
    p.write("c.ts", "export {};\n");
    assert_eq!(p.capture().unwrap().sources.len(), 4);
}

#[test]
fn module_count_limit_is_inclusive() {
    // jig.ts plus a chain of (limit - 1) modules is exactly the limit.
    let build = |modules: usize| {
        let p = Project::with_jig(&format!(
            "{HEAD}import \"./m/1.ts\";\nexport default defineJig({{}});\n"
        ));
        for i in 1..modules {
            let next = if i + 1 < modules {
                format!("import \"./{}.ts\";\n", i + 1)
            } else {
                String::new()
            };
            p.write(
                &format!("m/{i}.ts"),
                &format!("{next}export const v{i} = {i};\n"),
            );
        }
        p
    };
    assert_eq!(
        build(MAX_CLOSURE_MODULES).capture().unwrap().sources.len(),
        MAX_CLOSURE_MODULES
    );
    let e = build(MAX_CLOSURE_MODULES + 1).refused();
    assert_eq!(
        located(&e),
        ("PROJECT_DECLARATION_INVALID", Some("jig.ts"), None)
    );
}

#[test]
fn module_byte_limit_is_inclusive() {
    let body = format!("{HEAD}import \"./pad.ts\";\nexport default defineJig({{}});\n");
    let p = Project::with_jig(&body);
    p.write("pad.ts", &comment_of(MAX_MODULE_BYTES));
    assert!(p.capture().is_ok());
    p.write("pad.ts", &comment_of(MAX_MODULE_BYTES + 1));
    assert_eq!(
        located(&p.refused()),
        ("PROJECT_DECLARATION_INVALID", Some("pad.ts"), None)
    );
}

/// A line comment of exactly `bytes` bytes.
fn comment_of(bytes: usize) -> String {
    format!("//{}\n", "x".repeat(bytes - 3))
}

#[test]
fn closure_byte_limit_is_inclusive() {
    // jig.ts plus full-size modules, with the last one sized to land exactly on the limit.
    let full = MAX_CLOSURE_BYTES / MAX_MODULE_BYTES;
    let imports: String = (0..full)
        .map(|i| format!("import \"./pad/{i}.ts\";\n"))
        .collect();
    let body = format!("{HEAD}{imports}export default defineJig({{}});\n");
    let p = Project::with_jig(&body);
    for i in 0..full - 1 {
        p.write(&format!("pad/{i}.ts"), &comment_of(MAX_MODULE_BYTES));
    }
    let last = MAX_CLOSURE_BYTES - body.len() - (full - 1) * MAX_MODULE_BYTES;
    p.write(&format!("pad/{}.ts", full - 1), &comment_of(last));
    assert_eq!(
        p.capture()
            .unwrap()
            .sources
            .values()
            .map(Vec::len)
            .sum::<usize>(),
        MAX_CLOSURE_BYTES
    );
    p.write(&format!("pad/{}.ts", full - 1), &comment_of(last + 1));
    assert_eq!(
        located(&p.refused()),
        ("PROJECT_DECLARATION_INVALID", Some("jig.ts"), None)
    );
}

/// Nesting as deep as a module can hold fails cleanly instead of exhausting
/// the stack (the test binary would abort).
#[test]
fn deep_nesting_is_refused_without_crashing() {
    // As many repetitions of `open`..`close` around `mid` as fit in one module.
    let nest = |head: &str, open: &str, mid: &str, close: &str, tail: &str| {
        let n =
            (MAX_MODULE_BYTES - head.len() - mid.len() - tail.len()) / (open.len() + close.len());
        format!("{head}{}{mid}{}{tail}", open.repeat(n), close.repeat(n))
    };
    let d = "export default ";
    let sources = [
        nest(d, "[", "", "]", ";"),
        nest(d, "(", "1", ")", ";"),
        nest(d, "{a:", "{}", "}", ";"),
        nest(d, "!", "1", "", ";"),
        nest(d, "", "1", "+1", ";"),
        nest(d, "a=>", "1", "", ";"),
        nest(d, "a?1:", "1", "", ";"),
        nest(d, "", "a", "()", ";"),
        nest(d, "", "a", ".b", ";"),
        nest("type T = ", "A<", "1", ">", ";\nexport default 1;"),
        nest(d, "`${", "1", "}`", ";"),
    ];
    for source in sources {
        assert!(source.len() <= MAX_MODULE_BYTES, "{}", source.len());
        let p = Project::with_jig(&source);
        let e = p.refused();
        assert!(
            matches!(
                e.code.as_str(),
                "PROJECT_DECLARATION_INVALID" | "PROJECT_EVALUATION_FAILED"
            ),
            "{}: {e}",
            &source[..40]
        );
    }
}

#[test]
fn invalid_typescript_and_utf8_reject() {
    let p = Project::with_jig("export default {");
    assert_eq!(
        located(&p.refused()),
        ("PROJECT_DECLARATION_INVALID", Some("jig.ts"), None)
    );
    std::fs::write(p.path("jig.ts"), b"export default \"\xff\";").unwrap();
    assert_eq!(
        located(&p.refused()),
        ("PROJECT_DECLARATION_INVALID", Some("jig.ts"), None)
    );
}
