//! Author modules (seed 002 §3): the static import closure of `jig.ts` and of
//! each Binding file, read without following links, bounded, acyclic, and
//! stripped of TypeScript types so the evaluator sees plain ES modules.
//!
//! Only `@jigging/jig` and explicit relative `./x.ts` / `../x.ts` specifiers
//! that stay inside the project are accepted. Dynamic `import()`, `require`,
//! `import x = require()`, bare specifiers and suffix-less paths reject the
//! candidate before anything is evaluated.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use oxc_allocator::Allocator;
use oxc_ast::ast::Statement;
use oxc_codegen::Codegen;
use oxc_parser::Parser;
use oxc_semantic::SemanticBuilder;
use oxc_span::SourceType;
use oxc_transformer::{TransformOptions, Transformer};

use crate::tree::{self, Kind, ReadError};
use crate::{paths, ProjectCode, ProjectError};

/// The one bare specifier an author module may import.
pub const SDK_SPECIFIER: &str = "@jigging/jig";
/// Most modules in one entry's closure (the entry included).
pub const MAX_CLOSURE_MODULES: usize = 64;
/// Most source bytes in one entry's closure.
pub const MAX_CLOSURE_BYTES: usize = 1 << 20;
/// Most source bytes in one module. Parsing and stripping recurse once per
/// nesting level and a level can cost one byte, so this bounds the stack the
/// compiler needs (see `CAPTURE_STACK_BYTES`).
pub const MAX_MODULE_BYTES: usize = 64 << 10;

const INVALID: ProjectCode = ProjectCode::DeclarationInvalid;

/// One captured author module.
#[derive(Debug)]
pub(crate) struct AuthorModule {
    /// Exact bytes read from the project.
    pub bytes: Vec<u8>,
    /// The module with its types stripped, as given to the evaluator.
    pub script: String,
    /// Canonical paths of the relative modules it imports statically.
    pub imports: Vec<String>,
}

/// Every module read during one capture attempt, by canonical path. Shared by
/// all entries so a module imported twice is read (and judged) once.
#[derive(Debug, Default)]
pub(crate) struct ModuleSet {
    pub modules: BTreeMap<String, AuthorModule>,
}

/// Where an import specifier leads.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Target {
    Sdk,
    Module(String),
}

/// Resolves `specifier` imported by the module at canonical path `importer`.
pub(crate) fn resolve(importer: &str, specifier: &str) -> Result<Target, String> {
    if specifier == SDK_SPECIFIER {
        return Ok(Target::Sdk);
    }
    let quoted = paths::escape(specifier);
    let rest = if let Some(rest) = specifier.strip_prefix("./") {
        rest
    } else if specifier.starts_with("../") {
        specifier
    } else {
        return Err(format!(
            "import {quoted} is not allowed: only \"@jigging/jig\" and explicit relative \".ts\" modules may be imported"
        ));
    };
    if !specifier.ends_with(".ts") {
        return Err(format!(
            "import {quoted} must name a \".ts\" file explicitly"
        ));
    }
    let mut segments: Vec<&str> = importer.split('/').collect();
    segments.pop();
    for segment in rest.split('/') {
        match segment {
            ".." => {
                if segments.pop().is_none() {
                    return Err(format!("import {quoted} leaves the project"));
                }
            }
            "" | "." => return Err(format!("import {quoted} is not a canonical relative path")),
            _ => segments.push(segment),
        }
    }
    let joined = segments.join("/");
    match paths::normalize(&joined) {
        Ok(path) => Ok(Target::Module(path)),
        Err(e) => Err(format!("import {quoted} is invalid: {}", e.message)),
    }
}

impl ModuleSet {
    /// Captures the closure of `entry` (a canonical `.ts` path already known to
    /// exist as a regular file) and returns its module paths in load order.
    pub(crate) fn capture(
        &mut self,
        root: &Path,
        entry: &str,
    ) -> Result<Vec<String>, ProjectError> {
        let mut order = Vec::new();
        let mut bytes = 0usize;
        // Depth-first with an explicit stack; `active` is the current import chain.
        let mut active: Vec<String> = Vec::new();
        let mut stack: Vec<(String, usize)> = vec![(entry.to_owned(), 0)];
        self.load(root, entry, entry)?;
        bytes += self.modules[entry].bytes.len();
        order.push(entry.to_owned());
        active.push(entry.to_owned());
        while let Some((path, next)) = stack.pop() {
            let imports = &self.modules[&path].imports;
            if next >= imports.len() {
                active.pop();
                continue;
            }
            let child = imports[next].clone();
            stack.push((path.clone(), next + 1));
            if active.contains(&child) {
                let mut chain =
                    active[active.iter().position(|p| *p == child).unwrap_or(0)..].to_vec();
                chain.push(child.clone());
                return Err(ProjectError::new(
                    INVALID,
                    format!("import cycle: {}", chain.join(" -> ")),
                )
                .at(&path));
            }
            if order.contains(&child) {
                continue;
            }
            if order.len() == MAX_CLOSURE_MODULES {
                return Err(ProjectError::new(
                    INVALID,
                    format!("the module graph of {entry} exceeds {MAX_CLOSURE_MODULES} modules"),
                )
                .at(entry));
            }
            self.load(root, &child, &path)?;
            bytes += self.modules[&child].bytes.len();
            if bytes > MAX_CLOSURE_BYTES {
                return Err(ProjectError::new(
                    INVALID,
                    format!(
                        "the module graph of {entry} exceeds {MAX_CLOSURE_BYTES} bytes of source"
                    ),
                )
                .at(entry));
            }
            order.push(child.clone());
            active.push(child.clone());
            stack.push((child, 0));
        }
        Ok(order)
    }

    fn load(&mut self, root: &Path, path: &str, importer: &str) -> Result<(), ProjectError> {
        if self.modules.contains_key(path) {
            return Ok(());
        }
        let bytes = match tree::read_file(root, path, MAX_MODULE_BYTES) {
            Ok(bytes) => bytes,
            Err(ReadError::Project(e)) => return Err(e.at(importer)),
            Err(ReadError::TooLarge) => {
                return Err(ProjectError::new(
                    INVALID,
                    format!("{} exceeds {MAX_MODULE_BYTES} bytes", paths::escape(path)),
                )
                .at(path))
            }
            Err(ReadError::NotAFile(Kind::Symlink)) => {
                return Err(ProjectError::new(
                    ProjectCode::Unsafe,
                    format!(
                        "{} is a symlink; Jig never follows links in project sources",
                        paths::escape(path)
                    ),
                )
                .at(importer))
            }
            Err(ReadError::NotAFile(_)) => {
                return Err(ProjectError::new(
                    INVALID,
                    format!(
                        "imported module {} is not a regular file in the project",
                        paths::escape(path)
                    ),
                )
                .at(importer))
            }
        };
        let module = compile(path, bytes)?;
        self.modules.insert(path.to_owned(), module);
        Ok(())
    }

    /// Re-reads every captured module and reports the first whose bytes changed.
    pub(crate) fn changed(&self, root: &Path) -> Option<String> {
        self.modules
            .iter()
            .find(
                |(path, module)| match tree::read_file(root, path, MAX_MODULE_BYTES) {
                    Ok(bytes) => bytes != module.bytes,
                    Err(_) => true,
                },
            )
            .map(|(path, _)| path.clone())
    }
}

/// `path:line:column` of where `diagnostic` points in `text` (its primary
/// label, else its first), as editors and compilers name a place; the
/// path alone when it points nowhere.
fn located(path: &str, text: &str, diagnostic: &oxc_diagnostics::OxcDiagnostic) -> String {
    let labels = &diagnostic.labels;
    match labels.iter().find(|l| l.primary()).or(labels.first()) {
        Some(label) => {
            let at = flow::json::Position::of(text.as_bytes(), label.offset() as usize);
            paths::escape(&format!("{path}:{}:{}", at.line, at.column))
        }
        None => paths::escape(path),
    }
}

/// Parses one module, checks its imports, and strips its types.
pub(crate) fn compile(path: &str, bytes: Vec<u8>) -> Result<AuthorModule, ProjectError> {
    let invalid = |message: String| ProjectError::new(INVALID, message).at(path);
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| invalid(format!("{} is not valid UTF-8", paths::escape(path))))?;
    let allocator = Allocator::default();
    let source_type = SourceType::ts().with_module(true);
    let parsed = Parser::new(&allocator, text, source_type).parse();
    if parsed.panicked || !parsed.diagnostics.is_empty() {
        let (at, first) = match parsed.diagnostics.first() {
            Some(first) => (located(path, text, first), first.to_string()),
            None => (paths::escape(path), String::new()),
        };
        return Err(invalid(format!("{at} is not valid TypeScript: {first}")));
    }
    if let Some(dynamic) = parsed.module_record.dynamic_imports.first() {
        let snippet = dynamic.span.source_text(text);
        return Err(invalid(format!(
            "dynamic import is not allowed: {}",
            paths::escape(snippet)
        )));
    }
    for statement in &parsed.program.body {
        match statement {
            Statement::TSImportEqualsDeclaration(_) => {
                return Err(invalid("`import ... = require(...)` is not allowed".into()))
            }
            Statement::TSExportAssignment(_) => {
                return Err(invalid("`export =` is not allowed".into()))
            }
            _ => {}
        }
    }
    let mut requested: Vec<(u32, &str)> = parsed
        .module_record
        .requested_modules
        .iter()
        .map(|(specifier, uses)| {
            let first = uses.iter().map(|u| u.span.start).min().unwrap_or(0);
            (first, specifier.as_str())
        })
        .collect();
    requested.sort();
    let mut imports = Vec::new();
    for (_, specifier) in requested {
        match resolve(path, specifier).map_err(invalid)? {
            Target::Sdk => {}
            Target::Module(target) => imports.push(target),
        }
    }

    let mut program = parsed.program;
    let semantic = SemanticBuilder::new().build(&program);
    if let Some(first) = semantic.diagnostics.first() {
        return Err(invalid(format!(
            "{} is not valid TypeScript: {first}",
            located(path, text, first)
        )));
    }
    let scoping = semantic.semantic.into_scoping();
    if scoping
        .root_unresolved_references()
        .keys()
        .any(|name| name.as_str() == "require")
    {
        return Err(invalid(
            "`require` is not available; use a static import".into(),
        ));
    }
    let options = TransformOptions::default();
    let transformed = Transformer::new(&allocator, &PathBuf::from(path), &options)
        .build_with_scoping(scoping, &mut program);
    if let Some(first) = transformed.diagnostics.first() {
        return Err(invalid(format!(
            "{} cannot be compiled: {first}",
            located(path, text, first)
        )));
    }
    let script = Codegen::new().build(&program).code;
    Ok(AuthorModule {
        bytes,
        script,
        imports,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolution() {
        assert_eq!(resolve("jig.ts", "@jigging/jig"), Ok(Target::Sdk));
        assert_eq!(
            resolve("jig.ts", "./lib/a.ts"),
            Ok(Target::Module("lib/a.ts".into()))
        );
        assert_eq!(
            resolve("lib/a.ts", "../b.ts"),
            Ok(Target::Module("b.ts".into()))
        );
        assert_eq!(
            resolve("lib/a.ts", "./c.ts"),
            Ok(Target::Module("lib/c.ts".into()))
        );
        for bad in [
            "fs",
            "node:fs",
            "@jigging/flow",
            "./a",
            "./a.js",
            "../a.ts",
            "/abs.ts",
            "./a/../../b.ts",
            "./.jig/x.ts",
            "./a//b.ts",
            "./a/./b.ts",
            ".\\a.ts",
        ] {
            assert!(resolve("jig.ts", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn types_are_stripped_and_esm_kept() {
        let src = "import { defineJig } from \"@jigging/jig\";\ntype T = { a: number };\nconst x: T = { a: 1 };\nexport default defineJig({ flows: [] as string[] });\nexport const y = x satisfies T;\n";
        let module = compile("jig.ts", src.as_bytes().to_vec()).unwrap();
        assert!(
            module
                .script
                .contains("import { defineJig } from \"@jigging/jig\""),
            "{}",
            module.script
        );
        assert!(module.script.contains("export default"));
        assert!(!module.script.contains("type T"));
        assert!(module.imports.is_empty());
    }

    #[test]
    fn forbidden_forms_are_rejected_before_evaluation() {
        for src in [
            "export default import(\"fs\");",
            "const fs = require(\"fs\"); export default 1;",
            "import fs = require(\"fs\"); export default 1;",
            "import x from \"fs\"; export default x;",
            "export * from \"./lib\";",
            "export default {",
        ] {
            let err = compile("jig.ts", src.as_bytes().to_vec()).unwrap_err();
            assert_eq!(err.code, INVALID, "{src}");
            assert_eq!(err.path.as_deref(), Some("jig.ts"));
        }
    }

    #[test]
    fn a_typescript_error_names_its_file_line_and_column() {
        let src = "import { defineBinding } from \"@jigging/jig\";\nexport default defineBinding({\n  package: \"./flows/a\" settings: {},\n});\n";
        let err = compile("bindings/a.ts", src.as_bytes().to_vec()).unwrap_err();
        assert_eq!(err.code, INVALID);
        assert!(
            err.message
                .starts_with("\"bindings/a.ts:3:24\" is not valid TypeScript: "),
            "{}",
            err.message
        );
        // A semantic error is placed too: here where `a` was first declared.
        let err = compile("jig.ts", b"let a = 1;\nlet a = 2;\n".to_vec()).unwrap_err();
        assert!(
            err.message
                .starts_with("\"jig.ts:1:5\" is not valid TypeScript: "),
            "{}",
            err.message
        );
    }

    #[test]
    fn local_require_binding_is_fine() {
        let src = "const require = (x: string) => x; export default require(\"a\");";
        assert!(compile("jig.ts", src.as_bytes().to_vec()).is_ok());
    }
}
