//! Planning: from captured declarations and staged packages to one candidate,
//! linked, with a recipe and provider chosen for every target, the portable
//! lock derived, and the review text a person approves.
//!
//! Planning never runs package code and never grants authority; it only
//! produces a Plan value that `state` may retain and later admit.

pub mod builtin;
mod equivocation;
pub mod prepare;
mod recipe;
mod review;

pub(crate) use crate::state::lock::{lock_bytes, LOCK_FILE};
pub(crate) use recipe::Recipe;
pub use recipe::RecipeKind;
pub(crate) use review::{changed_targets, review_text};

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use flow::json::{ascii_quote, Value};
use flow::package::{Access, Package, Use};
use jig_project::{Declarations, SlotTarget};
use serde_json::json;

use crate::config::HostConfig;
use crate::providers::{
    builtin_contract, builtin_exact, is_project_command, portable_contract, ProviderSet,
};

/// Seed 002 §4 direct-target limits.
pub(crate) const MAX_DIRECT_ATTACHMENTS: usize = 8;
pub(crate) const MAX_DIRECT_WRITABLE_ATTACHMENTS: usize = 1;
/// `jig.lock` (Jig seed §7): direct targets plus Bindings.
pub(crate) const MAX_TARGETS: usize = 4096;

/// One finding that invalidates the candidate, with its location.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    pub code: String,
    pub path: Option<String>,
    pub pointer: Option<String>,
    pub message: String,
}

/// A review that cannot proceed. Its text is the reference's (host/tests/all/
/// reference_texts.rs): fixed guidance, then each diagnostic as `CODE at "path"`
/// and ` pointer "…"` when there is one, nothing after; each diagnostic's
/// own explanation is in [`PlanError::diagnostics`] for a person.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The candidate is invalid (`INVALID_CANDIDATE`).
    #[error("{}", render_diagnostics("the project definition is invalid", .0))]
    Invalid(Vec<Diagnostic>),
    /// Some target has no recipe, provider or Agent endpoint on this
    /// host, or its dependencies could not be prepared (`UNAVAILABLE`).
    #[error("{}", render_diagnostics(unavailable_guidance(.0), .0))]
    Unavailable(Vec<Diagnostic>),
}

/// The fixed guidance of unavailable targets (seed 002 §7: no
/// credentials, provider errors or installer output): the words for what
/// every diagnostic has in common, else the general ones.
fn unavailable_guidance(diagnostics: &[Diagnostic]) -> &'static str {
    let all = |codes: &[&str]| diagnostics.iter().all(|d| codes.contains(&d.code.as_str()));
    if all(&[builtin::AGENT_UNAVAILABLE]) {
        builtin::AGENT_GUIDANCE
    } else if all(&[
        prepare::codes::PREPARATION_FAILED,
        prepare::python_codes::PREPARATION_FAILED,
    ]) {
        UNPREPARED_GUIDANCE
    } else if all(&[
        prepare::codes::PERMISSION_REQUIRED,
        prepare::python_codes::PERMISSION_REQUIRED,
    ]) {
        UNRESOLVED_GUIDANCE
    } else {
        UNAVAILABLE_GUIDANCE
    }
}

/// Dependencies without a lock need resolution over the network.
pub(crate) const UNRESOLVED_GUIDANCE: &str =
    "dependencies without a lock need resolution; review again \
     with --allow-resolution-network to resolve them, or commit their lock";

/// Seed 002 §7: what to do when a target cannot run here, without
/// credentials or provider errors.
pub(crate) const UNAVAILABLE_GUIDANCE: &str =
    "this host cannot run every target; configure the runtime, \
     provider or Agent endpoint each diagnostic names, then review again";
/// Seed 002 §7, the reference's words.
pub(crate) const UNPREPARED_GUIDANCE: &str =
    "locked dependencies could not be prepared; check registry access and package availability";

impl PlanError {
    pub fn code(&self) -> &'static str {
        match self {
            PlanError::Invalid(_) => "INVALID_CANDIDATE",
            PlanError::Unavailable(_) => "UNAVAILABLE",
        }
    }

    /// Each diagnostic, with its own explanation.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        match self {
            PlanError::Invalid(d) | PlanError::Unavailable(d) => d,
        }
    }
}

/// `CODE at "path" pointer "…"`: where a diagnostic is, without its words.
pub fn locate(code: &str, path: Option<&str>, pointer: Option<&str>) -> String {
    let mut text = code.to_string();
    if let Some(path) = path {
        text.push_str(&format!(" at {}", ascii_quote(path)));
    }
    if let Some(pointer) = pointer {
        text.push_str(&format!(" pointer {}", ascii_quote(pointer)));
    }
    text
}

fn render_diagnostics(hint: &str, diagnostics: &[Diagnostic]) -> String {
    let mut text = hint.to_string();
    for d in diagnostics {
        text.push_str("; ");
        text.push_str(&locate(&d.code, d.path.as_deref(), d.pointer.as_deref()));
    }
    text
}

/// The staged candidate: every selected package, keyed by project path.
pub struct Candidate {
    pub declarations: Declarations,
    pub packages: BTreeMap<String, Package>,
}

/// Stage every selected Flow as a Package/1 tree (generated `node_modules`
/// excluded, seed 002 §4).
pub fn stage(root: &Path, declarations: Declarations) -> Result<Candidate, PlanError> {
    let mut packages = BTreeMap::new();
    let mut diagnostics = Vec::new();
    for path in &declarations.flows {
        let exclude = |p: &str| p == "node_modules" || p.starts_with("node_modules/");
        match Package::stage_dir_excluding(&root.join(path), &exclude) {
            Ok(package) => {
                packages.insert(path.clone(), package);
            }
            Err(e) => diagnostics.push(Diagnostic {
                code: e.code.to_string(),
                path: Some(match &e.path {
                    Some(inner) => format!("{path}/{inner}"),
                    None => path.clone(),
                }),
                pointer: e.pointer.clone(),
                message: e.message.clone(),
            }),
        }
    }
    if diagnostics.is_empty() {
        Ok(Candidate {
            declarations,
            packages,
        })
    } else {
        Err(PlanError::Invalid(diagnostics))
    }
}

/// Is this package a direct Run target (seed 002 §4)? Structural only.
pub(crate) fn direct_run(package: &Package) -> bool {
    let meta = package.metadata();
    if package.entrypoint().is_none() {
        return false;
    }
    let mut builtin_uses: BTreeMap<&'static str, usize> = BTreeMap::new();
    for slot in meta.uses.keys() {
        if let Some(contract) = package.contract(slot) {
            match builtin_contract(&contract.id) {
                name if is_project_command(name) => return false,
                Some(name) => *builtin_uses.entry(name).or_default() += 1,
                None => {}
            }
        }
    }
    if builtin_uses.values().any(|n| *n > 1) {
        return false;
    }
    let writable = meta
        .attachments
        .values()
        .filter(|a| matches!(a, Access::ReadWrite))
        .count();
    if meta.attachments.len() > MAX_DIRECT_ATTACHMENTS || writable > MAX_DIRECT_WRITABLE_ATTACHMENTS
    {
        return false;
    }
    refused_settings(package, &json!({})).is_none()
}

/// Does the package use Run Checkpoint? That makes it root-only (docs/src/
/// runs.md, Checkpoints): never a child selected by a Binding's slot, and run with `--out`.
pub(crate) fn uses_run_checkpoint(package: &Package) -> bool {
    !builtin::slots_using(package, "run-checkpoint").is_empty()
}

const ROOT_ONLY: &str = "the selected package uses Run Checkpoint, which only a root Run may use";

/// Whether `package` accepts a Binding's `settings`: the diagnostic in
/// words when it does not.
fn refused_settings(package: &Package, settings: &Value) -> Option<flow::schema::Diagnostic> {
    match package.validate_settings(settings) {
        Ok(()) => None,
        Err(flow::schema::Invalid::Diagnostic(d)) => Some(d),
        Err(other) => Some(flow::schema::Diagnostic {
            instance_pointer: String::new(),
            schema_pointer: String::new(),
            keyword: None,
            message: other.to_string(),
        }),
    }
}

/// Every package digest a Plan can run: each locked package's, and each
/// prepared package's (source plus its reviewed dependencies).
pub(crate) fn package_digests(plan: &Value) -> std::collections::BTreeSet<&str> {
    let locked = plan["lock"]["packages"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(_, entry)| entry["digest"].as_str());
    let prepared = plan["execution"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(_, entry)| entry["prepared"]["digest"].as_str());
    locked.chain(prepared).collect()
}

/// Link the candidate and choose recipes and providers: the complete Plan.
pub fn plan(
    candidate: &Candidate,
    config: &HostConfig,
    providers: &ProviderSet,
    base: Option<u64>,
) -> Result<Value, PlanError> {
    let mut invalid = Vec::new();
    let mut unavailable = Vec::new();
    let decl = &candidate.declarations;

    let mut lock_packages = serde_json::Map::new();
    let mut execution = serde_json::Map::new();
    for (path, package) in &candidate.packages {
        let direct = direct_run(package);
        invalid.extend(builtin::check(path, package));
        let mut uses = serde_json::Map::new();
        let mut served = serde_json::Map::new();
        let mut contract_uses = serde_json::Map::new();
        for (slot, use_) in &package.metadata().uses {
            let location = format!("{path}/FLOW.md");
            match use_ {
                Use::Local => unavailable.push(Diagnostic {
                    code: "PROJECT_CAPABILITY_UNAVAILABLE".into(),
                    path: Some(location),
                    pointer: Some(format!("/uses/{slot}")),
                    message: "a local capability seam has no provider on this host".into(),
                }),
                Use::Contract { .. } => {
                    let Some(contract) = package.contract(slot) else {
                        continue;
                    };
                    let identity = json!({ "id": contract.id, "version": contract.version, "digest": contract.digest });
                    // The portable lock names only the Jig contracts (its schema is
                    // closed to them); contracts served by configured providers are
                    // host policy, pinned in the execution section below.
                    if builtin_contract(&contract.id).is_some() && portable_contract(&contract.id) {
                        uses.insert(slot.clone(), identity.clone());
                    }
                    contract_uses.insert(slot.clone(), identity);
                    let builtin = builtin_exact(&contract.id, &contract.version, &contract.digest);
                    let configured = providers
                        .serves(&contract.id, &contract.version, &contract.digest)
                        .unwrap_or(true);
                    if let (Some(name), false) = (builtin, configured) {
                        match builtin::plan(name, path, slot, package, config) {
                            Ok(pin) => {
                                served.insert(slot.clone(), pin);
                            }
                            Err(diagnostic) => unavailable.push(diagnostic),
                        }
                        continue;
                    }
                    match providers.plan_for(&contract.id, &contract.version, &contract.digest) {
                        Ok(pin) => {
                            served.insert(slot.clone(), pin);
                        }
                        Err(reason) => unavailable.push(Diagnostic {
                            code: if builtin_contract(&contract.id) == Some("agent-run") {
                                "PROJECT_AGENT_UNAVAILABLE".into()
                            } else {
                                "PROJECT_CAPABILITY_UNAVAILABLE".into()
                            },
                            path: Some(location),
                            pointer: Some(format!("/uses/{slot}")),
                            message: reason,
                        }),
                    }
                }
            }
        }
        lock_packages.insert(
            path.clone(),
            json!({ "digest": package.digest(), "directRun": direct, "uses": Value::Object(uses) }),
        );
        let recipe = match package.entrypoint() {
            None => None,
            Some(entry) => match Recipe::select(entry, config) {
                Ok(recipe) => Some(recipe),
                Err(reason) => {
                    unavailable.push(Diagnostic {
                        code: "UNAVAILABLE".into(),
                        path: Some(format!("{path}/{}", entry.path)),
                        pointer: None,
                        message: reason,
                    });
                    None
                }
            },
        };
        execution.insert(
            path.clone(),
            json!({
                "recipe": recipe.map(|r| r.to_value()),
                "uses": Value::Object(contract_uses),
                "providers": Value::Object(served),
            }),
        );
    }

    let mut lock_bindings = serde_json::Map::new();
    for (id, binding) in &decl.bindings {
        let at = Some(binding.file.clone());
        let Some(package) = candidate.packages.get(&binding.package) else {
            invalid.push(Diagnostic {
                code: "PROJECT_BINDING_PACKAGE_MISSING".into(),
                path: at.clone(),
                pointer: Some("/package".into()),
                message: format!(
                    "{} is not a selected Flow package",
                    ascii_quote(&binding.package)
                ),
            });
            continue;
        };
        if package.entrypoint().is_none() {
            invalid.push(Diagnostic {
                code: "PROJECT_BINDING_PACKAGE_MISSING".into(),
                path: at.clone(),
                pointer: Some("/package".into()),
                message: "an instructions-only package cannot be bound".into(),
            });
        }
        if let Some(refused) = refused_settings(package, &binding.settings) {
            let said = match package.settings_schema() {
                Some(_) => "settings do not satisfy the package's settings.schema.json",
                None => "the package has no settings.schema.json, so only {} is valid",
            };
            let schema = match refused.keyword {
                Some(_) => format!(" (schema {})", refused.schema_pointer),
                None => String::new(),
            };
            invalid.push(Diagnostic {
                code: "PROJECT_BINDING_SETTINGS_INVALID".into(),
                path: at.clone(),
                pointer: Some("/settings".into()),
                message: format!("{said}: {}{schema}", refused.message),
            });
        }
        // Project Command policy belongs to a Binding of a command-capable
        // package, and such a Binding needs one (docs/src/commands.md).
        let command_capable = package.metadata().uses.keys().any(|slot| {
            package
                .contract(slot)
                .is_some_and(|c| is_project_command(builtin_contract(&c.id)))
        });
        match (&binding.commands, command_capable) {
            (Some(_), false) => invalid.push(Diagnostic {
                code: "PROJECT_DECLARATION_INVALID".into(),
                path: at.clone(),
                pointer: Some("/commands".into()),
                message: "commands need a package that declares the Project Command capability"
                    .into(),
            }),
            (None, true) => unavailable.push(Diagnostic {
                code: "PROJECT_COMMAND_UNCONFIGURED".into(),
                path: at.clone(),
                pointer: Some("/commands".into()),
                message: "the package uses Project Command and this Binding configures no commands"
                    .into(),
            }),
            _ => {}
        }
        let mut slots = serde_json::Map::new();
        for (slot, target) in &binding.slots {
            let pointer = Some(format!("/slots/{slot}"));
            let problem = match target {
                SlotTarget::Flow(path) => match candidate.packages.get(path) {
                    None => Some(format!("flow:{path} is not a selected Flow")),
                    Some(_) if *path == binding.package => {
                        Some("a slot cannot select its own package".into())
                    }
                    Some(child) if uses_run_checkpoint(child) => Some(ROOT_ONLY.into()),
                    Some(child) if !direct_run(child) => {
                        Some(format!("flow:{path} is not a direct Run target"))
                    }
                    Some(child) if !child.metadata().attachments.is_empty() => {
                        Some("the selected package requires attachments".into())
                    }
                    Some(_) => None,
                },
                SlotTarget::Binding(child_id) => match decl.bindings.get(child_id) {
                    None => Some(format!("binding:{child_id} is not declared")),
                    Some(_) if child_id == id => Some("a Binding cannot select itself".into()),
                    Some(child) if child.package == binding.package => {
                        Some("a slot cannot select its own package through a Binding".into())
                    }
                    Some(child) if !child.slots.is_empty() => {
                        Some(format!("binding:{child_id} has slots of its own"))
                    }
                    Some(child) => match candidate.packages.get(&child.package) {
                        Some(p) if uses_run_checkpoint(p) => Some(ROOT_ONLY.into()),
                        Some(p) if p.entrypoint().is_none() => {
                            Some("the selected package has no entrypoint".into())
                        }
                        Some(p) if !p.metadata().attachments.is_empty() => {
                            Some("the selected package requires attachments".into())
                        }
                        _ => None,
                    },
                },
            };
            if let Some(message) = problem {
                invalid.push(Diagnostic {
                    code: "PROJECT_BINDING_SLOT_MISSING".into(),
                    path: at.clone(),
                    pointer,
                    message,
                });
                continue;
            }
            slots.insert(
                slot.clone(),
                match target {
                    SlotTarget::Flow(path) => json!({ "kind": "flow", "path": path }),
                    SlotTarget::Binding(id) => json!({ "kind": "binding", "id": id }),
                },
            );
        }
        let mut entry = json!({
            "packagePath": binding.package,
            "settings": binding.settings,
            "slots": Value::Object(slots),
        });
        if let Some(commands) = &binding.commands {
            entry["commands"] = commands.clone();
        }
        lock_bindings.insert(id.clone(), entry);
    }

    let direct_targets = lock_packages
        .values()
        .filter(|p| p["directRun"] == json!(true))
        .count();
    if direct_targets + lock_bindings.len() > MAX_TARGETS {
        invalid.push(Diagnostic {
            code: "PROJECT_DECLARATION_INVALID".into(),
            path: None,
            pointer: None,
            message: format!("more than {MAX_TARGETS} targets"),
        });
    }
    invalid.extend(equivocation::check(&candidate.packages));
    if !invalid.is_empty() {
        return Err(PlanError::Invalid(invalid));
    }
    // Unavailability only matters for targets that could run.
    let needed: BTreeSet<&String> = lock_packages
        .iter()
        .filter(|(_, p)| p["directRun"] == json!(true))
        .map(|(path, _)| path)
        .chain(
            lock_bindings
                .values()
                .filter_map(|b| b["packagePath"].as_str())
                .map(|p| {
                    lock_packages
                        .keys()
                        .find(|k| k.as_str() == p)
                        .expect("linked")
                }),
        )
        .collect();
    let unavailable: Vec<Diagnostic> = unavailable
        .into_iter()
        .filter(|d| {
            d.path
                .as_deref()
                .map(|p| {
                    needed.iter().any(|n| p.starts_with(&format!("{n}/")))
                        || decl.bindings.values().any(|b| b.file == p)
                })
                .unwrap_or(true)
        })
        .collect();
    if !unavailable.is_empty() {
        return Err(PlanError::Unavailable(unavailable));
    }

    let lock = json!({ "packages": Value::Object(lock_packages), "bindings": Value::Object(lock_bindings) });
    check_lock(&lock).map_err(|message| {
        PlanError::Invalid(vec![Diagnostic {
            code: "LOCK_MISMATCH".into(),
            path: Some(LOCK_FILE.into()),
            pointer: None,
            message,
        }])
    })?;
    let sources: serde_json::Map<String, Value> = decl
        .sources
        .iter()
        .map(|(path, bytes)| (path.clone(), json!(flow::digest::sha256_digest(bytes))))
        .collect();
    Ok(json!({
        "base": base,
        "lock": lock,
        "execution": Value::Object(execution),
        "candidate": { "project": decl.project, "sources": Value::Object(sources) },
    }))
}

/// The lock value must satisfy the published Jig lock/1 schema.
pub(crate) fn check_lock(lock: &Value) -> Result<(), String> {
    static SCHEMA: std::sync::OnceLock<flow::schema::Schema> = std::sync::OnceLock::new();
    let schema = SCHEMA.get_or_init(|| {
        flow::schema::Schema::compile_file(include_bytes!("jig-lock-1.schema.json"))
            .expect("the lock schema compiles")
    });
    schema
        .validate(lock)
        .map_err(|e| format!("the derived lock does not satisfy Jig lock/1: {e}"))
}

/// The execution-relevant part of a Plan: what decides "unchanged".
pub fn meaning(plan: &Value) -> Value {
    json!({ "lock": plan["lock"], "execution": plan["execution"] })
}
