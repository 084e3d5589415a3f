//! `jig exec <package-dir>`: run one package directory directly, in the same
//! envelope and with the same Run/1 host as `jig run`, for local testing of
//! your own code. It admits nothing: the packages are staged into a private
//! temporary store, planned like a one-Binding project, run once, and
//! forgotten. It is not a way to run someone else's package.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use flow::package::Package;
use jig_project::{BindingDecl, Declarations, SlotTarget};
use serde_json::json;

use super::{
    finish_output, load_config, read_input, receive, run_invocation, CliError, Code, CommandLine,
    DEFAULT_TIMEOUT,
};
use jig_engine::envelope::Envelope;
use jig_engine::exec::{Executor, TargetRef};
use jig_engine::plan::{self, Candidate};
use jig_engine::providers::ProviderSet;
use jig_engine::run::{self, NotConducted};
use jig_engine::state::Store;

/// Where the root package and child packages appear in the private plan.
const ROOT_PATH: &str = "exec/root";
const BINDING_ID: &str = "exec";

pub struct ExecArgs<'a> {
    pub package: &'a Path,
    pub input: Option<&'a str>,
    pub settings: Option<&'a str>,
    pub children: &'a [String],
    pub timeout: Option<&'a str>,
    pub json: bool,
    pub receive: &'a [String],
    pub config: Option<&'a Path>,
    pub base: &'a Path,
}

pub fn exec(args: ExecArgs<'_>) -> Result<u8, CliError> {
    let usage = |m: String| CliError::new(Code::Usage, m);
    let mut slots = BTreeMap::new();
    for child in args.children {
        let (slot, dir) = child
            .split_once('=')
            .ok_or_else(|| usage(format!("--child {child:?} is not SLOT=DIR")))?;
        if !flow::wire::is_local_name(slot) || slots.contains_key(slot) {
            return Err(usage(format!(
                "--child slot {slot:?} is not a unique LocalName"
            )));
        }
        slots.insert(slot.to_string(), args.base.join(dir));
    }
    let receive = receive::parse(args.receive)?;
    let timeout = match args.timeout {
        None => DEFAULT_TIMEOUT,
        Some(text) => super::parse_timeout(text).ok_or_else(|| {
            CliError::new(
                Code::TimeoutInvalid,
                "--timeout must be a positive integer followed by ms, s, m, or h, up to 24h",
            )
        })?,
    };
    let input = read_input(args.input, args.base)?;
    let settings = match args.settings {
        None => json!({}),
        Some(text) => flow::json::parse(text.as_bytes())
            .ok()
            .filter(|v| v.is_object())
            .ok_or_else(|| {
                CliError::new(Code::InvalidSettings, "--settings must be a JSON/1 object")
            })?,
    };
    let config = load_config(args.config)?;

    let stage = |dir: &Path, at: &str| {
        Package::stage_dir(dir).map_err(|e| {
            CliError::new(Code::InvalidCandidate, format!("{}: {e}", dir.display()))
                .with_location(at)
        })
    };
    let mut packages = BTreeMap::new();
    packages.insert(
        ROOT_PATH.to_string(),
        stage(&args.base.join(args.package), ROOT_PATH)?,
    );
    receive::check(&packages[ROOT_PATH], &receive)?;
    let mut slot_targets = BTreeMap::new();
    for (slot, dir) in &slots {
        let path = format!("exec/child/{slot}");
        packages.insert(path.clone(), stage(dir, &path)?);
        slot_targets.insert(slot.clone(), SlotTarget::Flow(path));
    }
    let binding = BindingDecl {
        file: "jig exec".into(),
        package: ROOT_PATH.into(),
        settings,
        slots: slot_targets,
        commands: None,
    };
    let declarations = Declarations {
        flows: packages.keys().cloned().collect(),
        bindings: BTreeMap::from([(BINDING_ID.to_string(), binding)]),
        project: json!(null),
        sources: BTreeMap::new(),
    };
    let candidate = Candidate {
        declarations,
        packages,
    };
    let providers = Arc::new(ProviderSet::new(config.providers.clone()));
    let planned = plan::plan(&candidate, &config, &providers, None).map_err(CliError::from)?;

    let temp = tempfile::Builder::new()
        .prefix("jig-exec-")
        .tempdir()
        .map_err(|e| {
            CliError::new(
                Code::Internal,
                format!("cannot create a private directory: {e}"),
            )
        })?;
    let store = Store::throwaway(temp.path().join("store"));
    for package in candidate.packages.values() {
        store.put_package(package).map_err(CliError::from)?;
    }
    let executor = Arc::new(
        Executor::new(
            store,
            temp.path().join("runs"),
            planned,
            providers,
            &Envelope::select(&config.containment)?,
            temp.path().to_path_buf(),
        )
        .with_support_writer(super::write_runtime_support)
        .with_agent(config.agent.table()),
    );
    let root = &candidate.packages[ROOT_PATH];
    let work_root = temp.path().join("runs");
    let door = CommandLine::new(!receive.is_empty());
    let ran = run_invocation(
        run::Root {
            run_id: None,
            executor,
            target: TargetRef::Binding(BINDING_ID.into()),
            input,
            deadline: run::Deadline::After(timeout),
            cancel: None,
            work_root: &work_root,
            files: None,
            package: root,
            receive: &receive,
            checkpoint: None,
        },
        &door,
    )?;
    let conducted = match ran.conducted {
        Ok(conducted) => conducted,
        Err(NotConducted::Stopped(e)) => return Err(e.into()),
        Err(NotConducted::Undispatched(failure)) => {
            return Err(CliError::new(Code::Internal, failure.message))
        }
    };
    let interrupted = conducted.interrupted;
    let terminal = conducted.terminal.to_value();
    let cleanup = conducted
        .cleanup
        .and_then(|()| temp.close())
        .map(|()| PathBuf::new());
    let status = finish_output(&terminal, args.json, conducted.stream);
    super::final_line(ran.shown, &terminal, cleanup.is_err());
    if let Err(e) = cleanup {
        return Err(CliError::new(
            Code::CleanupFailed,
            format!("the private directory could not be removed: {e}"),
        ));
    }
    if interrupted {
        return Err(super::exit::interrupted_error());
    }
    Ok(status)
}
