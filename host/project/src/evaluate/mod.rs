//! Evaluation of captured author modules (seed 002 §3) in QuickJS.
//!
//! One runtime per capture attempt, with a memory limit, a stack limit and a
//! deadline enforced by the interrupt handler. Each entry module gets a fresh
//! context, so module state never leaks from one declaration into another.
//! The module loader serves only the captured closure and the built-in
//! `@jigging/jig`; QuickJS itself has no file, environment, network, process
//! or timer API, and none is added here.
//!
//! The default export is snapshotted to JSON text by a function created
//! before any author code runs, then parsed as strict JSON/1 in Rust.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use rquickjs::loader::{ImportAttributes, Loader, Resolver};
use rquickjs::module::Declared;
use rquickjs::{Context, Ctx, Function, Module, Object, Runtime, Value};
use serde_json::Value as Json;

use crate::modules::{self, Target, SDK_SPECIFIER};
use crate::{ProjectCode, ProjectError};

/// Wall-clock budget for evaluating every declaration of one capture attempt
/// (docs/src/containment.md, Ceilings: evaluating `jig.ts`, 3 s).
pub const EVALUATION_DEADLINE: Duration = Duration::from_secs(3);
/// Heap limit of the evaluation runtime.
pub const EVALUATION_MEMORY_LIMIT: usize = 64 << 20;
/// Native stack limit of the evaluation runtime.
pub const EVALUATION_STACK_LIMIT: usize = 512 << 10;
/// Largest snapshot of one default export, in bytes of JSON text.
pub const MAX_SNAPSHOT_BYTES: usize = flow::json::MAX_DOCUMENT_BYTES;

const JSON_VALUE_JS: &str = include_str!("json_value.js");
const SDK_JS: &str = include_str!("sdk.js");

/// Captured scripts shared by the evaluator and its loader.
type Scripts = Rc<RefCell<BTreeMap<String, String>>>;

const FAILED: ProjectCode = ProjectCode::EvaluationFailed;
const INVALID: ProjectCode = ProjectCode::DeclarationInvalid;

/// An evaluation runtime for one capture attempt.
pub(crate) struct Evaluator {
    runtime: Runtime,
    scripts: Scripts,
    /// When the running evaluation must stop; read by the interrupt handler.
    deadline: Rc<Cell<Instant>>,
    /// Evaluation time left for this attempt. Only time spent inside
    /// `evaluate` counts, not reading and compiling Binding files between.
    remaining: Cell<Duration>,
    timed_out: Rc<Cell<bool>>,
}

impl Evaluator {
    /// Creates a runtime serving `scripts` (canonical path -> type-stripped module).
    /// The deadline starts now.
    pub(crate) fn new() -> Result<Self, ProjectError> {
        Self::with_deadline(EVALUATION_DEADLINE)
    }

    pub(crate) fn with_deadline(budget: Duration) -> Result<Self, ProjectError> {
        let runtime = Runtime::new()
            .map_err(|e| ProjectError::new(FAILED, format!("cannot start the evaluator: {e}")))?;
        runtime.set_memory_limit(EVALUATION_MEMORY_LIMIT);
        runtime.set_max_stack_size(EVALUATION_STACK_LIMIT);
        let deadline = Rc::new(Cell::new(Instant::now() + budget));
        let timed_out = Rc::new(Cell::new(false));
        let flag = timed_out.clone();
        let stop_at = deadline.clone();
        runtime.set_interrupt_handler(Some(Box::new(move || {
            if Instant::now() >= stop_at.get() {
                flag.set(true);
                true
            } else {
                false
            }
        })));
        let scripts = Scripts::default();
        runtime.set_loader(
            CapturedResolver {
                scripts: scripts.clone(),
            },
            CapturedLoader {
                scripts: scripts.clone(),
            },
        );
        Ok(Self {
            runtime,
            scripts,
            deadline,
            remaining: Cell::new(budget),
            timed_out,
        })
    }

    /// Makes more captured modules (canonical path -> type-stripped script) loadable.
    pub(crate) fn add_scripts(&self, scripts: impl IntoIterator<Item = (String, String)>) {
        self.scripts.borrow_mut().extend(scripts);
    }

    /// Evaluates module `entry` in a fresh context and returns its default
    /// export as a JSON/1 value. Failures are located at `entry`.
    pub(crate) fn evaluate(&self, entry: &str) -> Result<Json, ProjectError> {
        let context = Context::full(&self.runtime).map_err(|e| {
            ProjectError::new(FAILED, format!("cannot start the evaluator: {e}")).at(entry)
        })?;
        let started = Instant::now();
        self.deadline.set(started + self.remaining.get());
        let text = context.with(|ctx| self.run(&ctx, entry));
        self.remaining
            .set(self.remaining.get().saturating_sub(started.elapsed()));
        // Free this context's objects now so the next entry starts with the full heap.
        drop(context);
        self.runtime.run_gc();
        let text = text?;
        flow::json::parse_with_limit(text.as_bytes(), MAX_SNAPSHOT_BYTES).map_err(|e| {
            ProjectError::new(
                INVALID,
                format!("the default export is not a JSON/1 value: {e}"),
            )
            .at(entry)
        })
    }

    fn run<'js>(&self, ctx: &Ctx<'js>, entry: &str) -> Result<String, ProjectError> {
        let fail = |e: rquickjs::Error| self.failure(ctx, entry, e);
        // Created before any author code runs, so tampering cannot reach it.
        let prelude = format!(
            "(function (jsonValue) {{ return function snapshot(value) {{ return jsonValue.toJson(jsonValue.copy(value, \"default export\", false)); }}; }})(({JSON_VALUE_JS})())"
        );
        let snapshot: Function = ctx.eval(prelude).map_err(fail)?;
        let script = self.scripts.borrow().get(entry).cloned().ok_or_else(|| {
            ProjectError::new(FAILED, format!("{entry} was not captured")).at(entry)
        })?;
        let module = Module::declare(ctx.clone(), entry, script).map_err(fail)?;
        let (module, promise) = module.eval().map_err(fail)?;
        promise.finish::<()>().map_err(fail)?;
        let namespace: Object = module.namespace().map_err(fail)?;
        if !namespace.contains_key("default").map_err(fail)? {
            return Err(
                ProjectError::new(INVALID, format!("{entry} has no default export")).at(entry),
            );
        }
        let value: Value = namespace.get("default").map_err(fail)?;
        snapshot.call::<_, String>((value,)).map_err(fail)
    }

    fn failure<'js>(&self, ctx: &Ctx<'js>, entry: &str, error: rquickjs::Error) -> ProjectError {
        if self.timed_out.get() {
            return ProjectError::new(
                FAILED,
                format!(
                    "evaluation exceeded its {} s deadline",
                    EVALUATION_DEADLINE.as_secs()
                ),
            )
            .at(entry);
        }
        let thrown = match error {
            rquickjs::Error::Exception => ctx.catch(),
            rquickjs::Error::Allocation => {
                return ProjectError::new(FAILED, "evaluation exceeded its memory limit").at(entry)
            }
            rquickjs::Error::WouldBlock => {
                return ProjectError::new(
                    FAILED,
                    format!(
                    "{entry} never finished evaluating (it awaits a promise that cannot settle)"
                ),
                )
                .at(entry)
            }
            other => {
                return ProjectError::new(FAILED, format!("evaluation failed: {other}")).at(entry)
            }
        };
        let Some(object) = thrown.as_object() else {
            let shown = thrown
                .as_string()
                .and_then(|s| s.to_string().ok())
                .unwrap_or_else(|| thrown.type_name().to_owned());
            return ProjectError::new(FAILED, format!("{entry} threw {shown}")).at(entry);
        };
        let text =
            |key: &str| -> Option<String> { object.get::<_, Option<String>>(key).ok().flatten() };
        let message = text("message").unwrap_or_default();
        if message == "out of memory" {
            return ProjectError::new(FAILED, "evaluation exceeded its memory limit").at(entry);
        }
        let declaration = object
            .get::<_, Option<bool>>("jigDeclaration")
            .ok()
            .flatten()
            == Some(true);
        if declaration {
            let mut error = ProjectError::new(INVALID, message).at(entry);
            if let Some(pointer) = text("pointer") {
                error = error.pointer(pointer);
            }
            return error;
        }
        let name = text("name").unwrap_or_else(|| "Error".to_owned());
        ProjectError::new(FAILED, format!("{name}: {message}")).at(entry)
    }
}

/// Resolves specifiers against the importing module's canonical path; only
/// the built-in SDK and captured modules resolve.
struct CapturedResolver {
    scripts: Scripts,
}

impl Resolver for CapturedResolver {
    fn resolve<'js>(
        &mut self,
        ctx: &Ctx<'js>,
        base: &str,
        name: &str,
        _attributes: Option<ImportAttributes<'js>>,
    ) -> rquickjs::Result<String> {
        let refuse = |why: String| Err(rquickjs::Exception::throw_reference(ctx, &why));
        if base == SDK_SPECIFIER {
            return refuse(format!("module {name} is not available"));
        }
        match modules::resolve(base, name) {
            Ok(Target::Sdk) => Ok(SDK_SPECIFIER.to_owned()),
            Ok(Target::Module(path)) if self.scripts.borrow().contains_key(&path) => Ok(path),
            Ok(Target::Module(path)) => refuse(format!("module {path} was not captured")),
            Err(why) => refuse(why),
        }
    }
}

/// Serves the built-in SDK and the captured, type-stripped modules. Nothing
/// is ever read from disk here.
struct CapturedLoader {
    scripts: Scripts,
}

impl Loader for CapturedLoader {
    fn load<'js>(
        &mut self,
        ctx: &Ctx<'js>,
        name: &str,
        _attributes: Option<ImportAttributes<'js>>,
    ) -> rquickjs::Result<Module<'js, Declared>> {
        if name == SDK_SPECIFIER {
            let source = format!("const jsonValue = ({JSON_VALUE_JS})();\n{SDK_JS}");
            return Module::declare(ctx.clone(), name, source);
        }
        let script = self.scripts.borrow().get(name).cloned();
        match script {
            Some(script) => Module::declare(ctx.clone(), name, script),
            None => Err(rquickjs::Exception::throw_reference(
                ctx,
                &format!("module {name} was not captured"),
            )),
        }
    }
}
