//! `jig init`: make a project from a template (the greeting Flow in
//! TypeScript, Python or Rust, or a bare project) and say what to do next.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use jig_engine::plan;

use super::{sdk, terminal, CliError, Code};

/// `jig init --lang`: the greeting Flow's recipe.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub(super) enum InitLang {
    Typescript,
    Python,
    Rust,
}

/// Where an installed jig keeps the Rust SDK's sources, from its executable.
const INSTALLED_RUST_SDK: &str = "../share/jig/sdk-rust";

pub(super) fn init(
    destination: &Path,
    bare: bool,
    lang: Option<InitLang>,
    sdk: Option<PathBuf>,
) -> Result<u8, CliError> {
    let usage = |m: String| CliError::new(Code::Usage, m);
    let rust_sdk = match lang {
        Some(InitLang::Rust) => Some(rust_sdk(sdk)?),
        _ if sdk.is_some() => return Err(usage("--sdk is for --lang rust".into())),
        _ => None,
    };
    let template = match (bare, lang) {
        (true, _) => jig_project::Template::Bare,
        (false, None | Some(InitLang::Typescript)) => jig_project::Template::TypeScript {
            sdk_revision: plan::prepare::BUNDLED_SDK_VERSION,
        },
        (false, Some(InitLang::Python)) => jig_project::Template::Python,
        (false, Some(InitLang::Rust)) => jig_project::Template::Rust {
            sdk: rust_sdk.as_deref().unwrap_or_default(),
        },
    };
    jig_project::init(destination, template).map_err(CliError::from)?;
    if bare {
        // The reference's exact line; where the project is and what to do
        // next go to a person's terminal only, so redirected streams carry
        // what they always did.
        outln!("created bare Jig project");
        if std::io::stderr().is_terminal() {
            let at = terminal::escape(&destination.display().to_string());
            eprintln!(
                "  at {at}\n  next: add a Flow as {at}/flows/NAME/ (its FLOW.md and entrypoint), then cd {at} && jig review"
            );
        }
    } else if rust_sdk.is_some() {
        outln!(
            "created {}\nnext: cd {} && ./build.sh && jig review && jig run flow:flows/hello --input '\"Ada\"'",
            destination.display(),
            destination.display()
        );
    } else {
        outln!(
            "created {}\nnext: cd {} && jig review && jig run flow:flows/hello --input '\"Ada\"'",
            destination.display(),
            destination.display()
        );
    }
    Ok(0)
}

/// The Rust SDK a `--lang rust` greeting builds against, as an absolute
/// path safe inside Cargo.toml: `--sdk`, else the copy installed beside
/// this jig ([`INSTALLED_RUST_SDK`]), else a refusal that says to pass
/// `--sdk` (the guide's words). Never the checkout a jig was built in:
/// that path is the build machine's, not the user's.
fn rust_sdk(sdk: Option<PathBuf>) -> Result<String, CliError> {
    const CRATE: &str = "flow-sdk";
    let usage = |m: String| CliError::new(Code::Usage, m);
    let dir = match sdk {
        Some(dir) => dir,
        None => sdk::beside_executable(INSTALLED_RUST_SDK)
            .filter(|dir| sdk::is_crate(dir, CRATE))
            .ok_or_else(|| {
                usage(
                    "--lang rust needs the Rust SDK, and none is installed with this jig; \
                     pass --sdk PATH (the sdk-rust directory of a jig checkout)"
                        .into(),
                )
            })?,
    };
    if !sdk::is_crate(&dir, CRATE) {
        return Err(usage(format!(
            "--sdk {}: is not the Rust SDK (the sdk-rust directory of a jig checkout)",
            dir.display()
        )));
    }
    sdk::toml_path(&dir).map_err(|why| match why {
        sdk::Unwritable::Unresolved(e) => usage(format!("--sdk {}: {e}", dir.display())),
        sdk::Unwritable::Unquotable(absolute) => usage(format!(
            "--sdk {absolute}: the path cannot be written into Cargo.toml"
        )),
    })
}

/// `jig new flow --lang`: the new Flow's recipe.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub(super) enum FlowLang {
    Typescript,
    Python,
}

/// `jig new flow NAME`: a Flow package at `flows/NAME` of the project
/// found from `base`, a greeting with a fixture that `jig test` passes.
pub(super) fn new_flow(
    base: &Path,
    name: &str,
    lang: FlowLang,
    agent: bool,
) -> Result<u8, CliError> {
    if !flow::wire::is_local_name(name) {
        return Err(CliError::new(
            Code::Usage,
            format!(
                "{} is not a Flow name: a LocalName, like greet or price-order",
                terminal::escape(name)
            ),
        ));
    }
    let root = super::project_root(base)?;
    let relative = format!("flows/{name}");
    use jig_provider_builtin::agent;
    let agent = agent.then_some(jig_project::AgentContracts {
        capability: agent::DESCRIPTOR,
        updates_path: agent::UPDATES_PATH,
        updates: agent::UPDATES_DESCRIPTOR,
    });
    let template = match lang {
        FlowLang::Typescript => jig_project::Template::FlowTypeScript {
            name,
            sdk_revision: plan::prepare::BUNDLED_SDK_VERSION,
            agent,
        },
        FlowLang::Python => jig_project::Template::FlowPython { name, agent },
    };
    std::fs::create_dir_all(root.join("flows")).map_err(|e| {
        CliError::new(
            Code::Unavailable,
            format!("{}: {e}", root.join("flows").display()),
        )
    })?;
    jig_project::init(&root.join(&relative), template).map_err(CliError::from)?;
    let entry = match lang {
        FlowLang::Typescript => "flow.ts, package.json",
        FlowLang::Python => "flow.py",
    };
    match agent {
        Some(_) => outln!(
            "created {relative} (FLOW.md, {entry}, contracts/agent-run.capability.json: \
             the Agent Run {} this jig serves)\n\
             next: configure an Agent endpoint (jig doctor shows it), then jig review",
            agent::CONTRACT_VERSION
        ),
        None => outln!(
            "created {relative} (FLOW.md, {entry}, input.schema.json, fixtures/example/case.json)\n\
             next: jig test {relative}, then jig review"
        ),
    }
    Ok(0)
}
