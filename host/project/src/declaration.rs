//! Re-validation and re-normalization of evaluated declarations in Rust
//! (Jig seed §3, host/project/schemas/project-authoring-1.schema.json). Helper output is
//! never trusted: a forged or hand-written value passes exactly when it
//! normalizes under these rules.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::{json, Map, Value as Json};

use crate::paths::{self, escape};
use crate::{BindingDecl, ProjectCode, ProjectError, SlotTarget};

/// Largest `discover()` root list and exact member list (the JSON/1 container bound).
pub const MAX_SOURCE_ENTRIES: usize = flow::json::MAX_ARRAY_ITEMS;
/// Most slots in one Binding.
pub const MAX_SLOTS: usize = 256;
/// Most Project Command policy entries in one Binding.
pub const MAX_COMMANDS: usize = 8;
/// Longest command path, in bytes.
pub const MAX_COMMAND_PATH_BYTES: usize = 256;
/// Most segments of a command path.
pub const MAX_COMMAND_PATH_SEGMENTS: usize = 16;
/// Most test paths of one `test` command.
pub const MAX_COMMAND_TESTS: usize = 16;
/// Most characters a command's `tail` keeps (seed 003): all the Project
/// Command contract's `stdout.text` and `stderr.text` carry. The builtin
/// serving the contract bounds what it reads by the same number
/// (`jig_provider_builtin::command::MAX_TAIL`); jig-engine, the lowest
/// crate that sees both, holds the two equal in its tests.
pub const MAX_COMMAND_TAIL: u64 = 65_536;
/// Most environment variables one command entry names (ours: seed 003
/// gives none, and an unbounded map is not a policy a person reviews).
pub const MAX_COMMAND_ENV: usize = 32;
/// The variables the envelope sets itself, which a command's `env` may not
/// name (seed 003, ADR-0067).
const RESERVED_ENV: [&str; 3] = ["PATH", "HOME", "TMPDIR"];

/// Seed 003's refusal of a timeout that is not a positive duration.
fn timeout_refusal(shown: &str) -> String {
    format!(
        "command: timeout \"{shown}\" is not a positive duration (like \"90s\", \"10m\", \"1h\")."
    )
}

/// Seed 003's refusal of an env name the author may not set.
fn env_refusal(name: &str) -> String {
    format!(
        "command(argv, {{ env }}): \"{name}\" is not a variable the author sets — PATH, HOME and TMPDIR are the Effector's (ADR-0067)."
    )
}

/// Seed 003's refusal of `pin: true` on a command that names no secret.
const PIN_WITHOUT_SECRET: &str = "command(argv, { pin: true }) names no secret in its env: `pin` chooses the commit a credentialed command runs against in the Sandbox Effector, and a command that names no secret runs in the live Worktree (ADR-0067) — name its secret, command(argv, { env: { NAME: secret(\"x\") }, pin: true }), or drop `pin` .";

/// A variable name an author may set: `[A-Za-z_][A-Za-z0-9_]*`, not one
/// of [`RESERVED_ENV`].
fn author_variable(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !RESERVED_ENV.contains(&name)
}

const INVALID: ProjectCode = ProjectCode::DeclarationInvalid;
const GLOB_CHARS: &[char] = &['*', '?', '[', ']', '{', '}'];

fn invalid(pointer: impl Into<String>, message: impl Into<String>) -> ProjectError {
    ProjectError::new(INVALID, message).pointer(pointer)
}

/// How one field of `defineJig` selects members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    /// Shallow discovery under these canonical roots (sorted).
    Discover(Vec<String>),
    /// Exactly these canonical members (sorted).
    Members(Vec<String>),
}

/// A normalized `jig.ts` declaration.
#[derive(Debug, Clone)]
pub(crate) struct ProjectDecl {
    pub flows: Option<Source>,
    pub bindings: Option<Source>,
    pub value: Json,
}

/// Normalizes the default export of `jig.ts`.
pub(crate) fn project(value: &Json) -> Result<ProjectDecl, ProjectError> {
    let object = value.as_object().ok_or_else(|| {
        invalid(
            "",
            "the default export of jig.ts must be a Jig definition object",
        )
    })?;
    let mut normalized = Map::new();
    let mut decl = ProjectDecl {
        flows: None,
        bindings: None,
        value: Json::Null,
    };
    for (key, field) in object {
        let pointer = format!("/{}", pointer_token(key));
        let source = match key.as_str() {
            "flows" | "bindings" => source(key, field, &pointer)?,
            _ => {
                return Err(invalid(
                    pointer,
                    format!("Jig definition has unknown field {}", escape(key)),
                ))
            }
        };
        normalized.insert(key.clone(), source_value(&source));
        if key == "flows" {
            decl.flows = Some(source);
        } else {
            decl.bindings = Some(source);
        }
    }
    decl.value = Json::Object(normalized);
    Ok(decl)
}

fn source_value(source: &Source) -> Json {
    match source {
        Source::Discover(roots) => json!({ "kind": "discover", "roots": roots }),
        Source::Members(paths) => json!({ "kind": "members", "paths": paths }),
    }
}

fn source(name: &str, value: &Json, pointer: &str) -> Result<Source, ProjectError> {
    let object = value
        .as_object()
        .ok_or_else(|| invalid(pointer, format!("{name} source must come from discover()")))?;
    let kind = object.get("kind").and_then(Json::as_str);
    let (list_key, is_discover) = match kind {
        Some("discover") => ("roots", true),
        Some("members") => ("paths", false),
        _ => {
            return Err(invalid(
                format!("{pointer}/kind"),
                format!("{name} source has an invalid kind"),
            ))
        }
    };
    if let Some(extra) = object.keys().find(|k| *k != "kind" && *k != list_key) {
        return Err(invalid(
            format!("{pointer}/{}", pointer_token(extra)),
            format!("{name} source has unknown field {}", escape(extra)),
        ));
    }
    let list_pointer = format!("{pointer}/{list_key}");
    let items = object
        .get(list_key)
        .and_then(Json::as_array)
        .ok_or_else(|| {
            invalid(
                &list_pointer,
                format!("{name} {list_key} must be an array of strings"),
            )
        })?;
    if is_discover && items.is_empty() {
        return Err(invalid(
            &list_pointer,
            format!("{name} discovery requires at least one root"),
        ));
    }
    if items.len() > MAX_SOURCE_ENTRIES {
        return Err(invalid(
            &list_pointer,
            format!("{name} {list_key} exceed the JSON/1 container bound"),
        ));
    }
    let mut canonical: Vec<(String, usize)> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let item_pointer = format!("{list_pointer}/{i}");
        let text = item.as_str().ok_or_else(|| {
            invalid(
                &item_pointer,
                format!("{name} {list_key} must be an array of strings"),
            )
        })?;
        if is_discover && text.contains(GLOB_CHARS) {
            return Err(invalid(
                &item_pointer,
                "root cannot contain glob characters",
            ));
        }
        let path = paths::normalize(text).map_err(|e| e.pointer(&item_pointer))?;
        canonical.push((path, i));
    }
    canonical.sort();
    let collision_code = if is_discover {
        INVALID
    } else {
        ProjectCode::MemberCollision
    };
    let mut by_fold: BTreeMap<String, (&str, usize)> = BTreeMap::new();
    for (path, i) in &canonical {
        if let Some((other, j)) = by_fold.insert(paths::fold(path), (path, *i)) {
            let what = if is_discover {
                "root paths collide"
            } else {
                "members collide"
            };
            // Point at whichever of the two the author wrote later.
            return Err(ProjectError::new(
                collision_code,
                format!("{what}: {} and {}", escape(other), escape(path)),
            )
            .pointer(format!("{list_pointer}/{}", j.max(*i))));
        }
    }
    if is_discover {
        // Roots form an unordered union: one beneath another would overlap.
        // Each root's proper ancestors are looked up among the folded roots.
        for (path, i) in &canonical {
            let folded = paths::fold(path);
            let mut ancestor = folded.as_str();
            while let Some(cut) = ancestor.rfind('/') {
                ancestor = &ancestor[..cut];
                if let Some((outer, _)) = by_fold.get(ancestor) {
                    return Err(invalid(
                        format!("{list_pointer}/{i}"),
                        format!(
                            "discovery roots overlap: {} contains {}",
                            escape(outer),
                            escape(path)
                        ),
                    ));
                }
            }
        }
    }
    let sorted: Vec<String> = canonical.into_iter().map(|(p, _)| p).collect();
    Ok(if is_discover {
        Source::Discover(sorted)
    } else {
        Source::Members(sorted)
    })
}

/// Normalizes the default export of Binding file `file`.
pub(crate) fn binding(value: &Json, file: &str) -> Result<BindingDecl, ProjectError> {
    let object = value.as_object().ok_or_else(|| {
        invalid(
            "",
            format!("the default export of {file} must be a Binding definition object"),
        )
    })?;
    for key in object.keys() {
        if !matches!(
            key.as_str(),
            "kind" | "package" | "settings" | "slots" | "commands"
        ) {
            return Err(invalid(
                format!("/{}", pointer_token(key)),
                format!("Binding definition has unknown field {}", escape(key)),
            ));
        }
    }
    if let Some(kind) = object.get("kind") {
        if kind.as_str() != Some("package") {
            return Err(invalid("/kind", "Binding kind must be \"package\""));
        }
    }
    let package = match object.get("package") {
        None => return Err(invalid("/package", "Binding package is required")),
        Some(Json::String(text)) => paths::normalize(text).map_err(|e| e.pointer("/package"))?,
        Some(_) => {
            return Err(invalid(
                "/package",
                "Binding package must be a project path string",
            ))
        }
    };
    let settings = match object.get("settings") {
        None => Json::Object(Map::new()),
        Some(v @ Json::Object(_)) => v.clone(),
        Some(_) => return Err(invalid("/settings", "settings must be an object")),
    };
    let slots = match object.get("slots") {
        None => BTreeMap::new(),
        Some(Json::Object(map)) => slots(map)?,
        Some(_) => return Err(invalid("/slots", "slots must be an object")),
    };
    let commands = match object.get("commands") {
        None => None,
        Some(Json::Object(map)) => commands(map)?,
        Some(_) => return Err(invalid("/commands", "commands must be an object")),
    };
    Ok(BindingDecl {
        file: file.to_owned(),
        package,
        settings,
        slots,
        commands,
    })
}

fn slots(map: &Map<String, Json>) -> Result<BTreeMap<String, SlotTarget>, ProjectError> {
    if map.len() > MAX_SLOTS {
        return Err(invalid(
            "/slots",
            format!("slots exceed {MAX_SLOTS} entries"),
        ));
    }
    let mut out = BTreeMap::new();
    for (name, value) in map {
        let pointer = format!("/slots/{}", pointer_token(name));
        if !paths::is_local_name(name) {
            return Err(invalid(pointer, "slot name must be a LocalName"));
        }
        let text = value
            .as_str()
            .ok_or_else(|| invalid(&pointer, format!("slot {name} must be a target selector")))?;
        let selects = || {
            invalid(
                &pointer,
                format!("slot {name} must select flow:<path> or binding:<id>"),
            )
        };
        let target = if let Some(path) = text.strip_prefix("flow:") {
            SlotTarget::Flow(paths::normalize(path).map_err(|_| selects())?)
        } else if let Some(id) = text.strip_prefix("binding:") {
            if !paths::is_local_name(id) {
                return Err(selects());
            }
            SlotTarget::Binding(id.to_owned())
        } else {
            return Err(selects());
        };
        out.insert(name.clone(), target);
    }
    Ok(out)
}

/// A command path (docs/src/commands.md): canonical relative ASCII without shell syntax.
fn command_path(path: &str) -> bool {
    !path.is_empty()
        && path.len() <= MAX_COMMAND_PATH_BYTES
        && path.bytes().enumerate().all(|(i, b)| {
            b.is_ascii_alphanumeric() || b == b'_' || (i > 0 && matches!(b, b'.' | b'/' | b'-'))
        })
        && path.split('/').count() <= MAX_COMMAND_PATH_SEGMENTS
        && path.split('/').all(|s| !matches!(s, "" | "." | ".."))
}

fn is_test_path(path: &str) -> bool {
    [".test.ts", ".test.js", ".spec.ts", ".spec.js"]
        .iter()
        .any(|suffix| path.ends_with(suffix))
}

fn commands(map: &Map<String, Json>) -> Result<Option<Json>, ProjectError> {
    if map.len() > MAX_COMMANDS {
        return Err(invalid("/commands", "commands exceed eight entries"));
    }
    let mut out = Map::new();
    for (name, value) in map {
        let pointer = format!("/commands/{}", pointer_token(name));
        if !paths::is_local_name(name) {
            return Err(invalid(pointer, "command name must be a LocalName"));
        }
        let one_of = || {
            invalid(
                &pointer,
                format!("command {name} must have exactly one of run or test"),
            )
        };
        let entry = value.as_object().ok_or_else(one_of)?;
        if let Some(extra) = entry.keys().find(|k| !COMMAND_FIELDS.contains(&k.as_str())) {
            // `slot` included: a project has one repository (seed 003's
            // Repo Slots have no meaning here).
            return Err(invalid(
                format!("{pointer}/{}", pointer_token(extra)),
                format!("command {name} has unknown field {}", escape(extra)),
            ));
        }
        let mut normalized = match (entry.get("run"), entry.get("test")) {
            (Some(run), None) => match run.as_str() {
                Some(p) if command_path(p) && (p.ends_with(".ts") || p.ends_with(".js")) => {
                    json!({ "run": p })
                }
                _ => {
                    return Err(invalid(
                        format!("{pointer}/run"),
                        format!("command {name} run must be a relative .ts or .js path"),
                    ))
                }
            },
            (None, Some(test)) => {
                let tests_pointer = format!("{pointer}/test");
                let list = test
                    .as_array()
                    .filter(|l| !l.is_empty() && l.len() <= MAX_COMMAND_TESTS)
                    .ok_or_else(|| {
                        invalid(
                            &tests_pointer,
                            format!("command {name} test must list 1 to 16 paths"),
                        )
                    })?;
                let mut seen = std::collections::BTreeSet::new();
                for (i, item) in list.iter().enumerate() {
                    match item.as_str() {
                        Some(p) if command_path(p) && is_test_path(p) => {
                            if !seen.insert(p) {
                                return Err(invalid(
                                    format!("{tests_pointer}/{i}"),
                                    format!("command {name} test paths must be distinct"),
                                ));
                            }
                        }
                        _ => {
                            return Err(invalid(
                                format!("{tests_pointer}/{i}"),
                                format!("command {name} test paths must be relative *.test.ts, *.test.js, *.spec.ts or *.spec.js files"),
                            ))
                        }
                    }
                }
                json!({ "test": list })
            }
            _ => return Err(one_of()),
        };
        command_options(name, &pointer, entry, &mut normalized)?;
        out.insert(name.clone(), normalized);
    }
    Ok(if out.is_empty() {
        None
    } else {
        Some(Json::Object(out))
    })
}

/// The fields a command entry may have: one of `run`/`test`, and seed
/// 003's options.
const COMMAND_FIELDS: [&str; 6] = ["run", "test", "timeout", "tail", "env", "pin"];

/// Seed 003's options of one command entry, refused with its texts and
/// kept as written (defaults are not spelled out, so an entry without
/// options keeps the reference lock's spelling).
fn command_options(
    name: &str,
    pointer: &str,
    entry: &Map<String, Json>,
    normalized: &mut Json,
) -> Result<(), ProjectError> {
    if let Some(timeout) = entry.get("timeout") {
        match timeout.as_str() {
            Some(text) if flow::duration::parse(text).is_some() => {
                normalized["timeout"] = json!(text);
            }
            _ => {
                let shown = match timeout {
                    Json::String(text) => text.clone(),
                    other => flow::json::canonical_string(other),
                };
                return Err(invalid(
                    format!("{pointer}/timeout"),
                    timeout_refusal(&shown),
                ));
            }
        }
    }
    if let Some(tail) = entry.get("tail") {
        match tail.as_u64().filter(|t| *t <= MAX_COMMAND_TAIL) {
            Some(t) => normalized["tail"] = json!(t),
            None => {
                return Err(invalid(
                    format!("{pointer}/tail"),
                    format!(
                        "command {name} tail must be an integer from 0 to {}",
                        MAX_COMMAND_TAIL
                    ),
                ))
            }
        }
    }
    if let Some(env) = entry.get("env") {
        let env_pointer = format!("{pointer}/env");
        let map = env.as_object().ok_or_else(|| {
            invalid(
                &env_pointer,
                format!("command {name} env must be an object"),
            )
        })?;
        if map.len() > MAX_COMMAND_ENV {
            return Err(invalid(
                &env_pointer,
                format!("command {name} env exceeds {} entries", MAX_COMMAND_ENV),
            ));
        }
        let mut out = Map::new();
        for (var, value) in map {
            let var_pointer = format!("{env_pointer}/{}", pointer_token(var));
            if !author_variable(var) {
                return Err(invalid(var_pointer, env_refusal(var)));
            }
            let secret = secret_ref(value).ok_or_else(|| {
                invalid(
                    &var_pointer,
                    format!(
                        "command {name} env {var} must be secret(\"<name>\") or secret(\"<name>\").path"
                    ),
                )
            })?;
            out.insert(var.clone(), secret);
        }
        if !out.is_empty() {
            normalized["env"] = Json::Object(out);
        }
    }
    match entry.get("pin") {
        None | Some(Json::Bool(false)) => {}
        Some(Json::Bool(true)) if normalized.get("env").is_some() => {
            normalized["pin"] = json!(true);
        }
        Some(Json::Bool(true)) => {
            return Err(invalid(format!("{pointer}/pin"), PIN_WITHOUT_SECRET))
        }
        Some(_) => {
            return Err(invalid(
                format!("{pointer}/pin"),
                format!("command {name} pin must be a boolean"),
            ))
        }
    }
    Ok(())
}

/// A secret reference as `secret()` of `@jigging/jig` spells it, to its
/// normalized form: `{"kind":"secret","name"}` (the value; the helper's
/// `path` member is dropped) or `{"kind":"secretPath","name"}`.
fn secret_ref(value: &Json) -> Option<Json> {
    let object = value.as_object()?;
    let name = object
        .get("name")?
        .as_str()
        .filter(|n| paths::is_local_name(n))?;
    let kind = object.get("kind")?.as_str()?;
    let closed = match kind {
        "secret" => {
            object
                .keys()
                .all(|k| matches!(k.as_str(), "kind" | "name" | "path"))
                && object
                    .get("path")
                    .is_none_or(|p| p == &json!({ "kind": "secretPath", "name": name }))
        }
        "secretPath" => object.len() == 2,
        _ => false,
    };
    closed.then(|| json!({ "kind": kind, "name": name }))
}

/// The normalized JSON value of a Binding declaration (the authoring shape).
pub(crate) fn binding_value(decl: &BindingDecl) -> Json {
    let mut object = Map::new();
    if let Some(commands) = &decl.commands {
        object.insert("commands".into(), commands.clone());
    }
    object.insert("kind".into(), json!("package"));
    object.insert("package".into(), json!(decl.package));
    object.insert("settings".into(), decl.settings.clone());
    let slots: Map<String, Json> = decl
        .slots
        .iter()
        .map(|(k, v)| (k.clone(), json!(v.selector())))
        .collect();
    object.insert("slots".into(), Json::Object(slots));
    Json::Object(object)
}

/// The reference authoring value schema (host/project/schemas/), checked
/// after normalization as a second, independent statement of the shape.
const AUTHORING_SCHEMA: &[u8] = include_bytes!("../schemas/project-authoring-1.schema.json");

fn authoring_schema() -> Result<&'static flow::schema::Schema, ProjectError> {
    static SCHEMA: OnceLock<Result<flow::schema::Schema, String>> = OnceLock::new();
    SCHEMA
        .get_or_init(|| {
            flow::schema::Schema::compile_file(AUTHORING_SCHEMA).map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| {
            ProjectError::new(
                ProjectCode::Unavailable,
                format!("the authoring schema does not compile: {e}"),
            )
        })
}

/// Checks a normalized project or Binding value against project-authoring-1.
pub(crate) fn conform(value: &Json) -> Result<(), ProjectError> {
    authoring_schema()?.validate(value).map_err(|invalid| {
        let mut error = ProjectError::new(
            INVALID,
            format!("the declaration does not match project-authoring-1: {invalid}"),
        );
        if let flow::schema::Invalid::Diagnostic(d) = &invalid {
            error = error.pointer(d.instance_pointer.clone());
        }
        error
    })
}

/// Escapes one RFC 6901 reference token.
pub(crate) fn pointer_token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The code as the diagnostics print it.
    const INVALID: &str = super::INVALID.as_str();

    fn code(r: Result<ProjectDecl, ProjectError>) -> (&'static str, Option<String>) {
        let e = r.unwrap_err();
        (e.code.as_str(), e.pointer)
    }

    #[test]
    fn project_normalizes_forged_values() {
        let decl = project(&json!({"flows": {"kind": "discover", "roots": ["./vendor", "flows"]}}))
            .unwrap();
        assert_eq!(
            decl.value,
            json!({"flows": {"kind": "discover", "roots": ["flows", "vendor"]}})
        );
        assert_eq!(
            decl.flows,
            Some(Source::Discover(vec!["flows".into(), "vendor".into()]))
        );
        assert_eq!(decl.bindings, None);
    }

    #[test]
    fn project_rejections_carry_pointers() {
        let cases = [
            (json!([]), INVALID, ""),
            (json!({"flow": []}), INVALID, "/flow"),
            (json!({"flows": ["flows"]}), INVALID, "/flows"),
            (
                json!({"flows": {"kind": "glob", "roots": ["a"]}}),
                INVALID,
                "/flows/kind",
            ),
            (
                json!({"flows": {"kind": "discover", "roots": []}}),
                INVALID,
                "/flows/roots",
            ),
            (
                json!({"flows": {"kind": "discover", "roots": ["a*"]}}),
                INVALID,
                "/flows/roots/0",
            ),
            (
                json!({"flows": {"kind": "discover", "roots": ["a", "A"]}}),
                INVALID,
                "/flows/roots/1",
            ),
            (
                json!({"flows": {"kind": "discover", "roots": ["a", "a/b"]}}),
                INVALID,
                "/flows/roots/1",
            ),
            (
                json!({"flows": {"kind": "discover", "roots": [".jig"]}}),
                INVALID,
                "/flows/roots/0",
            ),
            (
                json!({"flows": {"kind": "discover", "roots": ["a"], "x": 1}}),
                INVALID,
                "/flows/x",
            ),
            (
                json!({"flows": {"kind": "members", "paths": ["a", "./a"]}}),
                "PROJECT_MEMBER_COLLISION",
                "/flows/paths/1",
            ),
        ];
        for (value, expected, pointer) in cases {
            let (c, p) = code(project(&value));
            assert_eq!((c, p.as_deref()), (expected, Some(pointer)), "{value}");
        }
    }

    #[test]
    fn source_entry_limit_is_inclusive() {
        let roots: Vec<String> = (0..MAX_SOURCE_ENTRIES).map(|i| format!("r{i}")).collect();
        assert!(project(&json!({"flows": {"kind": "discover", "roots": roots}})).is_ok());
        let mut past = roots.clone();
        past.push("extra".into());
        let (c, p) = code(project(
            &json!({"flows": {"kind": "discover", "roots": past}}),
        ));
        assert_eq!((c, p.as_deref()), (INVALID, Some("/flows/roots")));
    }

    #[test]
    fn binding_normalizes() {
        let decl = binding(
            &json!({"package": "./flows/review", "slots": {"research": "flow:./flows/research", "critique": "binding:critic"}}),
            "bindings/reviewer.ts",
        )
        .unwrap();
        assert_eq!(
            binding_value(&decl),
            json!({"kind":"package","package":"flows/review","settings":{},"slots":{"critique":"binding:critic","research":"flow:flows/research"}})
        );
        assert_eq!(
            decl.slots["research"],
            SlotTarget::Flow("flows/research".into())
        );
    }

    #[test]
    fn slot_and_command_limits_are_inclusive() {
        let slots: Map<String, Json> = (0..MAX_SLOTS)
            .map(|i| (format!("s{i}"), json!("binding:x")))
            .collect();
        assert!(binding(&json!({"package": "p", "slots": slots}), "b.ts").is_ok());
        let mut past = slots.clone();
        past.insert("extra".into(), json!("binding:x"));
        let e = binding(&json!({"package": "p", "slots": past}), "b.ts").unwrap_err();
        assert_eq!(
            (e.code.as_str(), e.pointer.as_deref()),
            (INVALID, Some("/slots"))
        );

        let cmds: Map<String, Json> = (0..MAX_COMMANDS)
            .map(|i| (format!("c{i}"), json!({"run": "src/a.ts"})))
            .collect();
        assert!(binding(&json!({"package": "p", "commands": cmds}), "b.ts").is_ok());
        let mut past = cmds.clone();
        past.insert("c9".into(), json!({"run": "a.js"}));
        assert!(binding(&json!({"package": "p", "commands": past}), "b.ts").is_err());

        let tests: Vec<String> = (0..MAX_COMMAND_TESTS)
            .map(|i| format!("t/{i}.test.ts"))
            .collect();
        assert!(binding(
            &json!({"package": "p", "commands": {"t": {"test": tests}}}),
            "b.ts"
        )
        .is_ok());
        let mut past = tests.clone();
        past.push("t/x.spec.js".into());
        assert!(binding(
            &json!({"package": "p", "commands": {"t": {"test": past}}}),
            "b.ts"
        )
        .is_err());

        let long = format!("{}.ts", "a".repeat(MAX_COMMAND_PATH_BYTES - 3));
        assert!(binding(
            &json!({"package": "p", "commands": {"c": {"run": long}}}),
            "b.ts"
        )
        .is_ok());
        let longer = format!("{}.ts", "a".repeat(MAX_COMMAND_PATH_BYTES - 2));
        assert!(binding(
            &json!({"package": "p", "commands": {"c": {"run": longer}}}),
            "b.ts"
        )
        .is_err());
        let deep = format!("{}a.ts", "d/".repeat(MAX_COMMAND_PATH_SEGMENTS - 1));
        assert!(binding(
            &json!({"package": "p", "commands": {"c": {"run": deep}}}),
            "b.ts"
        )
        .is_ok());
        let deeper = format!("{}a.ts", "d/".repeat(MAX_COMMAND_PATH_SEGMENTS));
        assert!(binding(
            &json!({"package": "p", "commands": {"c": {"run": deeper}}}),
            "b.ts"
        )
        .is_err());
    }

    #[test]
    fn binding_rejections() {
        let cases = [
            (json!({"settings": {}}), "/package"),
            (json!({"package": "p", "id": "x"}), "/id"),
            (json!({"package": "p", "kind": "flow"}), "/kind"),
            (json!({"package": "p", "settings": []}), "/settings"),
            (
                json!({"package": "p", "slots": {"Bad": "binding:x"}}),
                "/slots/Bad",
            ),
            (json!({"package": "p", "slots": {"a": 1}}), "/slots/a"),
            (
                json!({"package": "p", "slots": {"a": "flows/x"}}),
                "/slots/a",
            ),
            (
                json!({"package": "p", "slots": {"a": "binding:Bad"}}),
                "/slots/a",
            ),
            (
                json!({"package": "p", "slots": {"a": "flow:../x"}}),
                "/slots/a",
            ),
            (
                json!({"package": "p", "commands": {"c": {"run": "a.ts", "test": ["a.test.ts"]}}}),
                "/commands/c",
            ),
            (
                json!({"package": "p", "commands": {"c": {"run": "a.sh"}}}),
                "/commands/c/run",
            ),
            (
                json!({"package": "p", "commands": {"c": {"run": "a;b.ts"}}}),
                "/commands/c/run",
            ),
            (
                json!({"package": "p", "commands": {"c": {"run": "../a.ts"}}}),
                "/commands/c/run",
            ),
            (
                json!({"package": "p", "commands": {"c": {"test": []}}}),
                "/commands/c/test",
            ),
            (
                json!({"package": "p", "commands": {"c": {"test": ["a.ts"]}}}),
                "/commands/c/test/0",
            ),
            (
                json!({"package": "p", "commands": {"c": {"test": ["a.test.ts", "a.test.ts"]}}}),
                "/commands/c/test/1",
            ),
        ];
        for (value, pointer) in cases {
            let e = binding(&value, "bindings/b.ts").unwrap_err();
            assert_eq!(
                (e.code.as_str(), e.pointer.as_deref()),
                (INVALID, Some(pointer)),
                "{value}"
            );
        }
    }

    #[test]
    fn normalized_values_conform_to_the_reference_schema() {
        let project = project(&json!({"flows": {"kind": "discover", "roots": ["flows"]}, "bindings": {"kind": "members", "paths": []}})).unwrap();
        conform(&project.value).unwrap();
        conform(&json!({})).unwrap();
        let decl = binding(
            &json!({"package": "p", "settings": {"a": [1]}, "slots": {"s": "binding:x"}, "commands": {"t": {"test": ["a.test.ts"]}}}),
            "bindings/b.ts",
        )
        .unwrap();
        conform(&binding_value(&decl)).unwrap();
        // And the schema really is applied: a value no normalizer would emit fails it.
        let e = conform(&json!({"flows": {"kind": "discover", "roots": []}})).unwrap_err();
        assert_eq!(e.code, INVALID);
        assert!(conform(&json!({"kind": "package", "package": "p"})).is_err());
    }

    #[test]
    fn command_options_are_kept_as_written() {
        let decl = binding(
            &json!({"package": "p", "commands": {"c": {"run": "a.ts", "timeout": "90s", "tail": 65536, "env": {"TOKEN": {"kind": "secret", "name": "x", "path": {"kind": "secretPath", "name": "x"}}, "KEY_FILE": {"kind": "secretPath", "name": "y"}}, "pin": true}, "t": {"test": ["a.test.ts"], "pin": false, "tail": 0}}}),
            "bindings/b.ts",
        )
        .unwrap();
        let commands = decl.commands.clone().unwrap();
        assert_eq!(
            commands,
            json!({"c": {"run": "a.ts", "timeout": "90s", "tail": 65536, "env": {"KEY_FILE": {"kind": "secretPath", "name": "y"}, "TOKEN": {"kind": "secret", "name": "x"}}, "pin": true}, "t": {"test": ["a.test.ts"], "tail": 0}})
        );
        conform(&binding_value(&decl)).unwrap();
    }

    #[test]
    fn reserved_and_malformed_variables_are_refused() {
        assert!(author_variable("TOKEN"));
        assert!(author_variable("_a1"));
        for bad in ["PATH", "HOME", "TMPDIR", "", "1A", "A-B", "A B"] {
            assert!(!author_variable(bad), "{bad}");
        }
    }

    #[test]
    fn command_options_are_refused_with_seed_003s_texts() {
        let refused = |entry: Json| {
            let e =
                binding(&json!({"package": "p", "commands": {"c": entry}}), "b.ts").unwrap_err();
            (e.pointer.clone().unwrap_or_default(), e.message.clone())
        };
        for bad in ["0s", "10", "1d", "-5m", ""] {
            assert_eq!(
                refused(json!({"run": "a.ts", "timeout": bad})),
                ("/commands/c/timeout".into(), timeout_refusal(bad))
            );
        }
        assert_eq!(
            refused(json!({"run": "a.ts", "timeout": 90})).1,
            timeout_refusal("90")
        );
        for bad in ["PATH", "HOME", "TMPDIR", "1X", "A-B"] {
            assert_eq!(
                refused(json!({"run": "a.ts", "env": {bad: {"kind": "secret", "name": "x"}}})),
                (format!("/commands/c/env/{bad}"), env_refusal(bad))
            );
        }
        assert_eq!(
            refused(json!({"run": "a.ts", "pin": true})),
            ("/commands/c/pin".into(), PIN_WITHOUT_SECRET.into())
        );
        assert_eq!(
            refused(json!({"run": "a.ts", "slot": "main"})),
            (
                "/commands/c/slot".into(),
                "command c has unknown field \"slot\"".into()
            )
        );
        assert_eq!(
            refused(json!({"run": "a.ts", "tail": MAX_COMMAND_TAIL + 1})).0,
            "/commands/c/tail"
        );
        assert_eq!(
            refused(json!({"run": "a.ts", "tail": -1})).0,
            "/commands/c/tail"
        );
        assert_eq!(
            refused(json!({"run": "a.ts", "env": {"A": "plain value"}})).0,
            "/commands/c/env/A"
        );
        let env: Map<String, Json> = (0..MAX_COMMAND_ENV)
            .map(|i| (format!("V{i}"), json!({"kind": "secret", "name": "x"})))
            .collect();
        assert!(binding(
            &json!({"package": "p", "commands": {"c": {"run": "a.ts", "env": env}}}),
            "b.ts"
        )
        .is_ok());
        let mut past = env.clone();
        past.insert("EXTRA".into(), json!({"kind": "secret", "name": "x"}));
        assert_eq!(
            refused(json!({"run": "a.ts", "env": past})).0,
            "/commands/c/env"
        );
    }

    #[test]
    fn empty_commands_are_omitted() {
        let decl = binding(&json!({"package": "p", "commands": {}}), "b.ts").unwrap();
        assert_eq!(decl.commands, None);
        assert!(binding_value(&decl).get("commands").is_none());
    }
}
