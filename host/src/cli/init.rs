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
