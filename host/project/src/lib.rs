//! Jig projects: `jig init`, and capture of a project's declarations
//! (seed 002 §1–3, §5): the `jig.ts` module closure and every Binding file,
//! evaluated without authority, re-validated in Rust, and resolved to exact
//! Flow and Binding membership.
//!
//! This crate owns the project's source side only. It never reads `.jig/`,
//! never stages or inspects Flow packages (the host does, from the member
//! list returned here), never executes anything but author declarations in
//! the bounded evaluator, and never writes outside `jig init`'s destination.

mod declaration;
mod discovery;
mod error;
mod evaluate;
mod init;
mod modules;
pub mod paths;
mod tree;

use std::collections::BTreeMap;
use std::path::Path;

pub use declaration::{
    MAX_COMMANDS, MAX_COMMAND_ENV, MAX_COMMAND_PATH_BYTES, MAX_COMMAND_PATH_SEGMENTS,
    MAX_COMMAND_TAIL, MAX_COMMAND_TESTS, MAX_SLOTS, MAX_SOURCE_ENTRIES,
};
pub use discovery::{FLOW_MD, MAX_MEMBERS};
pub use error::{InitError, ProjectCode, ProjectError};
pub use evaluate::{EVALUATION_DEADLINE, EVALUATION_MEMORY_LIMIT, EVALUATION_STACK_LIMIT};
pub use init::{init, AgentContracts, Template, GITIGNORE, JIG_TS};
pub use modules::{MAX_CLOSURE_BYTES, MAX_CLOSURE_MODULES, MAX_MODULE_BYTES, SDK_SPECIFIER};

use serde_json::Value as Json;

/// The project declaration file at the project root.
pub const JIG_TS_PATH: &str = "jig.ts";
/// How many times capture starts over when source changes underneath it
/// before reporting `PROJECT_BUSY`.
pub const CAPTURE_ATTEMPTS: u32 = 3;
/// Stack of the capture thread. The parser, type stripping and code
/// generation recurse once per nesting level; a [`MAX_MODULE_BYTES`] module
/// nests at most that many levels, which measured under 1 KiB each in an
/// unoptimized build, so this leaves a wide margin. Only touched pages are
/// ever committed.
pub const CAPTURE_STACK_BYTES: usize = 256 << 20;

/// Everything a project declares, captured from one consistent view of its
/// sources.
#[derive(Debug, Clone, PartialEq)]
pub struct Declarations {
    /// Canonical project-relative Flow directories, sorted by UTF-8 bytes.
    pub flows: Vec<String>,
    /// Binding ID (file basename) -> declaration.
    pub bindings: BTreeMap<String, BindingDecl>,
    /// The normalized `defineJig` value, e.g.
    /// `{"bindings":{"kind":"discover","roots":["bindings"]},"flows":{"kind":"discover","roots":["flows"]}}`.
    /// An omitted field stays omitted (an empty source).
    pub project: Json,
    /// The captured author module closure: canonical path -> exact bytes.
    pub sources: BTreeMap<String, Vec<u8>>,
}

/// One normalized Binding declaration.
#[derive(Debug, Clone, PartialEq)]
pub struct BindingDecl {
    /// The declaration file, e.g. `bindings/intake.ts`.
    pub file: String,
    /// Canonical project path of the selected Flow.
    pub package: String,
    /// The complete settings object (`{}` when omitted).
    pub settings: Json,
    /// Slot name -> target.
    pub slots: BTreeMap<String, SlotTarget>,
    /// The Project Command policy as normalized; `None` when absent or empty.
    pub commands: Option<Json>,
}

impl BindingDecl {
    /// The normalized authoring value: `{"commands"?, "kind":"package", "package", "settings", "slots"}`.
    pub fn value(&self) -> Json {
        declaration::binding_value(self)
    }
}

/// What one Binding slot selects.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum SlotTarget {
    /// A direct Flow target, by canonical project path.
    Flow(String),
    /// A Binding, by LocalName.
    Binding(String),
}

impl SlotTarget {
    /// The canonical selector spelling: `flow:<path>` or `binding:<id>`.
    pub fn selector(&self) -> String {
        match self {
            SlotTarget::Flow(path) => format!("flow:{path}"),
            SlotTarget::Binding(id) => format!("binding:{id}"),
        }
    }
}

/// Captures the declarations of the project at `project_root`.
///
/// Reads `jig.ts` and its static import closure, evaluates it, selects Flow
/// and Binding members, then captures and evaluates each Binding file. After
/// evaluation every source and every discovery listing is read again; if any
/// changed the whole capture starts over, at most [`CAPTURE_ATTEMPTS`] times,
/// then `PROJECT_BUSY`.
///
/// Besides the shape of each declaration this checks that every Binding's
/// `package` is a selected Flow (`PROJECT_BINDING_PACKAGE_MISSING`) and that
/// every slot names a selected Flow or a declared Binding
/// (`PROJECT_BINDING_SLOT_MISSING`). Checks that need package contents
/// (settings schemas, direct eligibility, leaf Bindings, cycles, commands on a
/// package without the capability) belong to the host's linking.
///
/// Capture runs on its own thread with a [`CAPTURE_STACK_BYTES`] stack, so
/// deeply nested hostile source cannot overflow the caller's stack, and a
/// panic inside the parser or evaluator becomes an error instead of
/// unwinding into the host.
pub fn capture(project_root: &Path) -> Result<Declarations, ProjectError> {
    let root = project_root.to_path_buf();
    let worker = std::thread::Builder::new()
        .name("jig-capture".into())
        .stack_size(CAPTURE_STACK_BYTES)
        .spawn(move || capture_with(&root, &mut |_| {}))
        .map_err(|e| {
            ProjectError::new(
                ProjectCode::Unavailable,
                format!("cannot start project capture: {e}"),
            )
        })?;
    worker.join().unwrap_or_else(|_| {
        Err(ProjectError::new(
            ProjectCode::EvaluationFailed,
            "project capture stopped on an internal error",
        ))
    })
}

/// What one attempt looked at, so it can be compared with a later look.
#[derive(Default)]
struct Observation {
    modules: modules::ModuleSet,
    project: Option<declaration::ProjectDecl>,
    flows: Option<Result<Vec<String>, ProjectError>>,
    bindings: Option<Result<BTreeMap<String, String>, ProjectError>>,
}

impl Observation {
    /// Whether anything this attempt read is now different. Discovery
    /// outcomes are compared whole, failures included, so a failure caused
    /// by a concurrent edit is retried rather than reported.
    fn changed(&self, root: &Path) -> bool {
        if self.modules.changed(root).is_some() {
            return true;
        }
        let Some(project) = &self.project else {
            return false;
        };
        if let Some(flows) = &self.flows {
            if &discovery::flows(root, project.flows.as_ref()) != flows {
                return true;
            }
        }
        if let Some(bindings) = &self.bindings {
            if &discovery::bindings(root, project.bindings.as_ref()) != bindings {
                return true;
            }
        }
        false
    }
}

/// `capture` with a hook run after each attempt and before its re-read, so
/// tests can change sources at exactly that moment.
pub(crate) fn capture_with(
    root: &Path,
    after_attempt: &mut dyn FnMut(u32),
) -> Result<Declarations, ProjectError> {
    match tree::lookup(root, JIG_TS_PATH) {
        Ok(tree::Kind::File) => {}
        Ok(_) => {
            return Err(ProjectError::new(
                ProjectCode::NotFound,
                format!(
                    "{} has no jig.ts; create one with `jig init`",
                    root.display()
                ),
            ))
        }
        Err(e) if e.code == ProjectCode::Unsafe => return Err(e),
        Err(_) => {
            return Err(ProjectError::new(
                ProjectCode::NotFound,
                format!("{} cannot be read as a project", root.display()),
            ))
        }
    }
    for attempt in 0..CAPTURE_ATTEMPTS {
        let mut observed = Observation::default();
        let result = attempt_capture(root, &mut observed);
        after_attempt(attempt);
        if !observed.changed(root) {
            return result;
        }
    }
    Err(ProjectError::new(
        ProjectCode::Busy,
        format!("project sources kept changing during {CAPTURE_ATTEMPTS} capture attempts; try again when edits settle"),
    ))
}

fn attempt_capture(root: &Path, observed: &mut Observation) -> Result<Declarations, ProjectError> {
    let jig_closure = observed.modules.capture(root, JIG_TS_PATH)?;
    let evaluator = evaluate::Evaluator::new()?;
    evaluator.add_scripts(
        jig_closure
            .iter()
            .map(|p| (p.clone(), observed.modules.modules[p].script.clone())),
    );
    let value = evaluator.evaluate(JIG_TS_PATH)?;
    let project = declaration::project(&value)
        .and_then(|p| declaration::conform(&p.value).map(|()| p))
        .map_err(|e| e.at(JIG_TS_PATH))?;
    observed.project = Some(project.clone());

    let flows = discovery::flows(root, project.flows.as_ref());
    observed.flows = Some(flows.clone());
    let flows = flows.map_err(|e| e.at(JIG_TS_PATH))?;
    let binding_files = discovery::bindings(root, project.bindings.as_ref());
    observed.bindings = Some(binding_files.clone());
    let binding_files = binding_files.map_err(|e| e.at(JIG_TS_PATH))?;

    let mut bindings = BTreeMap::new();
    for (id, file) in &binding_files {
        let closure = observed.modules.capture(root, file)?;
        evaluator.add_scripts(
            closure
                .iter()
                .map(|p| (p.clone(), observed.modules.modules[p].script.clone())),
        );
        let value = evaluator.evaluate(file)?;
        let decl = declaration::binding(&value, file)
            .and_then(|d| declaration::conform(&d.value()).map(|()| d))
            .map_err(|e| e.at(file))?;
        bindings.insert(id.clone(), decl);
    }
    check_references(&flows, &bindings)?;

    Ok(Declarations {
        flows,
        bindings,
        project: project.value,
        sources: observed
            .modules
            .modules
            .iter()
            .map(|(p, m)| (p.clone(), m.bytes.clone()))
            .collect(),
    })
}

/// Structural references that need no package contents.
fn check_references(
    flows: &[String],
    bindings: &BTreeMap<String, BindingDecl>,
) -> Result<(), ProjectError> {
    let is_flow = |p: &str| flows.binary_search_by(|f| f.as_str().cmp(p)).is_ok();
    for decl in bindings.values() {
        if !is_flow(&decl.package) {
            return Err(ProjectError::new(
                ProjectCode::BindingPackageMissing,
                format!(
                    "Binding package {} is not a selected Flow",
                    paths::escape(&decl.package)
                ),
            )
            .at(&decl.file)
            .pointer("/package"));
        }
        for (slot, target) in &decl.slots {
            let known = match target {
                SlotTarget::Flow(path) => is_flow(path),
                SlotTarget::Binding(id) => bindings.contains_key(id),
            };
            if !known {
                return Err(ProjectError::new(
                    ProjectCode::BindingSlotMissing,
                    format!(
                        "slot {slot} selects {}, which the project does not declare",
                        target.selector()
                    ),
                )
                .at(&decl.file)
                .pointer(format!("/slots/{}", declaration::pointer_token(slot))));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn greeting() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        init(&tmp.path().join("p"), Template::Python).unwrap();
        tmp
    }

    #[test]
    fn a_change_during_every_attempt_is_busy() {
        let tmp = greeting();
        let root = tmp.path().join("p");
        let mut n = 0;
        let err = capture_with(&root, &mut |_| {
            n += 1;
            fs::write(root.join("jig.ts"), format!("{JIG_TS}// edit {n}\n")).unwrap();
        })
        .unwrap_err();
        assert_eq!(err.code, "PROJECT_BUSY");
        assert_eq!(n, CAPTURE_ATTEMPTS);
    }

    #[test]
    fn a_change_on_the_last_attempt_still_settles_on_the_retry_limit() {
        let tmp = greeting();
        let root = tmp.path().join("p");
        let mut changes_left = CAPTURE_ATTEMPTS - 1;
        let decl = capture_with(&root, &mut |_| {
            if changes_left > 0 {
                changes_left -= 1;
                fs::write(
                    root.join("jig.ts"),
                    format!("{JIG_TS}// edit {changes_left}\n"),
                )
                .unwrap();
            }
        })
        .unwrap();
        assert_eq!(decl.flows, vec!["flows/hello"]);
        assert_eq!(
            decl.sources["jig.ts"],
            format!("{JIG_TS}// edit 0\n").into_bytes()
        );
    }

    #[test]
    fn a_failure_caused_by_a_concurrent_edit_is_retried() {
        let tmp = greeting();
        let root = tmp.path().join("p");
        fs::create_dir(root.join("flows/bad")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", root.join("flows/bad/FLOW.md")).unwrap();
        let mut first = true;
        let decl = capture_with(&root, &mut |_| {
            if std::mem::take(&mut first) {
                fs::remove_dir_all(root.join("flows/bad")).unwrap();
            }
        })
        .unwrap();
        assert_eq!(decl.flows, vec!["flows/hello"]);
        // Without the edit the same failure is reported.
        fs::create_dir(root.join("flows/bad")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", root.join("flows/bad/FLOW.md")).unwrap();
        assert_eq!(capture(&root).unwrap_err().code, "PROJECT_UNSAFE");
    }

    /// The helper and the Rust side both take the largest root list within the
    /// evaluation budget. (A unit test, so it never shares the CPU with the
    /// integration tests that spin until the deadline.)
    #[test]
    fn the_largest_root_list_is_accepted_in_time() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let n = MAX_SOURCE_ENTRIES;
        fs::write(
            root.join("jig.ts"),
            format!(
                "import {{ defineJig, discover }} from \"@jigging/jig\";\nexport default defineJig({{ flows: discover(Array.from({{ length: {n} }}, (_, i) => `r${{{n} - i}}`)) }});\n"
            ),
        )
        .unwrap();
        let decl = capture(root).unwrap();
        let roots = decl.project["flows"]["roots"].as_array().unwrap();
        assert_eq!(roots.len(), n);
        assert_eq!(
            (roots[0].as_str(), roots[1].as_str()),
            (Some("r1"), Some("r10"))
        );
    }

    #[test]
    fn a_new_member_during_capture_is_retried() {
        let tmp = greeting();
        let root = tmp.path().join("p");
        let mut first = true;
        let decl = capture_with(&root, &mut |_| {
            if std::mem::take(&mut first) {
                fs::create_dir(root.join("flows/late")).unwrap();
                fs::write(
                    root.join("flows/late/FLOW.md"),
                    "---\nname: late\ndescription: x\n---\n",
                )
                .unwrap();
            }
        })
        .unwrap();
        assert_eq!(decl.flows, vec!["flows/hello", "flows/late"]);
    }
}
