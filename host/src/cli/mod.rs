//! The `jig` command line: parse, dispatch to the library, print, and exit
//! with the documented status. No command reads a file before its
//! arguments are fully parsed.

/// `print!` for the command's output on stdout, except that a reader that
/// has gone (`jig completions zsh | head`: EPIPE) ends nothing: the
/// command finishes as it would and exits with its own status. Any other
/// failure to write is said on stderr.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::write_out(format_args!($($arg)*))
    };
}

/// [`out!`] with a newline, as `println!`.
macro_rules! outln {
    () => {
        $crate::cli::write_out(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::cli::write_out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

mod author;
mod client;
mod config_check;
mod console;
mod doctor;
mod door;
mod exec;
mod exit;
mod gc;
mod logs;
mod provider;
mod review;
pub(crate) mod run;
mod sdk;
mod serve;
mod terminal;
pub(crate) mod worker;

use door::*;
pub use exit::{exit_status, CliError, Code, REQUEST_FAULT_CODES};
use review::*;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};
use flow::json::Value;
use serde_json::json;

use jig_engine::config::HostConfig;
use jig_engine::exec::receive;
use jig_engine::exec::submit::{parse_timeout, DEFAULT_TIMEOUT};
use jig_engine::plan;
use jig_engine::state::{self, ProjectState};
use jig_verify::{Policy, Verifier};

/// `--input @FILE` is JSON/1, so it is bounded by the JSON/1 document limit.
pub const MAX_INPUT_FILE_BYTES: u64 = flow::json::MAX_DOCUMENT_BYTES as u64;

#[derive(Parser, Debug)]
#[command(
    name = "jig",
    about = "A FLOW host: review, admit and run Flows",
    disable_version_flag = true
)]
pub struct Cli {
    /// Print the version and exit.
    #[arg(long = "version")]
    version: bool,
    /// Work in DIR instead of the current directory.
    #[arg(short = 'C', value_name = "DIR", global = true)]
    chdir: Option<PathBuf>,
    /// Host configuration file (else $JIG_CONFIG, else $XDG_CONFIG_HOME/jig/host.toml).
    #[arg(long, value_name = "PATH", global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Create a project: the greeting project, or with --bare only the skeleton.
    Init {
        /// Only the skeleton: jig.ts, flows/ and bindings/, no greeting.
        #[arg(long, conflicts_with = "lang")]
        bare: bool,
        /// The greeting's language: flow.ts with its package.json (default), flow.py,
        /// or a Rust crate that build.sh compiles to flow.wasm.
        #[arg(long, value_enum)]
        lang: Option<InitLang>,
        /// For --lang rust: the Rust SDK (sdk-rust) to build against; default: the
        /// one installed with this jig.
        #[arg(long, value_name = "PATH", requires = "lang")]
        sdk: Option<PathBuf>,
        /// The project directory to create; it must not exist.
        directory: PathBuf,
    },
    /// Capture the project, show what would change, and admit it.
    Review {
        /// The project directory (default: the current directory's project,
        /// the nearest directory with a jig.ts at or above it).
        project: Option<PathBuf>,
        /// Admit without asking.
        #[arg(long)]
        yes: bool,
        /// Show the complete current and proposed policy; when review
        /// refuses, explain each diagnostic after the refusal line.
        #[arg(long)]
        details: bool,
        /// Installation verification: cached (default), strict or fast (overrides $JIG_VERIFICATION).
        #[arg(long, value_name = "POLICY", value_parser = Policy::NAMES)]
        verification: Option<String>,
        /// Let Bun resolve dependencies of packages that have no bun.lock
        /// (this review only; Runs gain no network access).
        #[arg(long)]
        allow_resolution_network: bool,
    },
    /// Run an admitted target: flow:<path> or binding:<id>.
    Run {
        /// flow:<path> (an admitted package) or binding:<id>.
        target: String,
        /// The input: JSON text, or @FILE to read JSON from a file.
        #[arg(long, value_name = "JSON|@FILE")]
        input: Option<String>,
        /// Root deadline: a positive integer with ms, s, m or h (at most 24h).
        #[arg(long, value_name = "DURATION")]
        timeout: Option<String>,
        /// Idempotency key: the same key and content return the same Run.
        #[arg(long, value_name = "KEY")]
        key: Option<String>,
        /// Print the terminal as one JSON line even on a terminal.
        #[arg(long)]
        json: bool,
        /// Give read attachment NAME the files of DIR (repeatable).
        #[arg(long = "attach", value_name = "NAME=DIR")]
        attach: Vec<String>,
        /// Capture only FILE (relative to NAME's DIR) instead of the whole tree (repeatable).
        #[arg(long = "select", value_name = "NAME=FILE")]
        select: Vec<String>,
        /// Publish the packet (delivered files and result.json) as the new directory DIR.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Receive the target's send port CHANNEL; stdout becomes NDJSON (repeatable, up to 16).
        #[arg(long = "receive", value_name = "CHANNEL")]
        receive: Vec<String>,
        /// Installation verification: cached (default), strict or fast (overrides $JIG_VERIFICATION).
        #[arg(long, value_name = "POLICY", value_parser = Policy::NAMES)]
        verification: Option<String>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Run one package directory directly, for local testing of your own
    /// code (admits nothing).
    Exec {
        /// The package directory (Package/1).
        package: PathBuf,
        /// The input: JSON text, or @FILE to read JSON from a file.
        #[arg(long, value_name = "JSON|@FILE")]
        input: Option<String>,
        /// The Run's settings object (validated against settings.schema.json).
        #[arg(long, value_name = "JSON")]
        settings: Option<String>,
        /// Serve child slot SLOT with the package in DIR (repeatable).
        #[arg(long = "child", value_name = "SLOT=DIR")]
        children: Vec<String>,
        /// Root deadline: a positive integer with ms, s, m or h (at most 24h).
        #[arg(long, value_name = "DURATION")]
        timeout: Option<String>,
        /// Print the terminal as one JSON line even on a terminal.
        #[arg(long)]
        json: bool,
        /// Receive the package's send port CHANNEL; stdout becomes NDJSON (repeatable, up to 16).
        #[arg(long = "receive", value_name = "CHANNEL")]
        receive: Vec<String>,
    },
    /// Inspect or digest a package directory (Package/1).
    Package {
        #[command(subcommand)]
        action: PackageAction,
    },
    /// Digest a Capability or Channel Contract/1 descriptor.
    Contract {
        #[command(subcommand)]
        action: ContractAction,
    },
    /// Check a Schema/1 file, or validate an instance against it.
    Schema {
        #[command(subcommand)]
        action: SchemaAction,
    },
    /// Inspect or call a capability provider file (WASM component or native library).
    Provider {
        #[command(subcommand)]
        action: provider::ProviderAction,
    },
    /// Report which recipes this host can run and how they are contained.
    Doctor {
        /// Installation verification: cached (default), strict or fast (overrides $JIG_VERIFICATION).
        #[arg(long, value_name = "POLICY", value_parser = Policy::NAMES)]
        verification: Option<String>,
    },
    /// List recent Runs, or show one.
    Runs {
        #[command(subcommand)]
        action: Option<RunsAction>,
        #[command(flatten)]
        filter: RunsFilter,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Apply the host configuration's [retention] to this project now:
    /// remove settled Runs, their checkpoints and packets past the limits,
    /// then the stored Plans, packages and blobs nothing names any more.
    Gc {
        /// Say what would be removed and the bytes it would free; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Check a host configuration file without running anything.
    Config {
        #[command(subcommand)]
        action: config_check::ConfigAction,
    },
    /// Serve admitted projects over HTTP: on a Unix socket, on TCP with a
    /// token, and with --database through PostgreSQL and jig workers.
    Serve(serve::ServeArgs),
    /// Open jig serve's web console in a browser on this machine: prints a one-time link.
    Console(console::ConsoleArgs),
    /// Claim and execute Runs that jig serve --database queued in PostgreSQL.
    Worker(worker::WorkerArgs),
    /// Print a shell completion script: jig completions bash|zsh|fish.
    Completions {
        /// The shell to print the script for.
        #[arg(value_enum)]
        shell: CompletionShell,
    },
    /// Print the manual page (roff); the Nix package installs it as jig(1).
    #[command(hide = true)]
    Manpage,
}

/// Submit to / read from a `jig serve` daemon instead of the local project.
#[derive(clap::Args, Debug, Default)]
struct ServerArgs {
    /// The daemon: unix:/path/to.sock, http://host:port or
    /// https://host:port (default $JIG_SERVER).
    #[arg(long, value_name = "URL", global = true)]
    server: Option<String>,
    /// The bearer token file for an http:// or https:// server (default
    /// $JIG_SERVER_TOKEN_FILE).
    #[arg(long, value_name = "PATH", global = true)]
    token_file: Option<PathBuf>,
    /// Trust only these CA certificates (PEM) for an https:// server,
    /// instead of the system's roots (default $JIG_SERVER_CACERT).
    #[arg(long, value_name = "FILE", global = true)]
    cacert: Option<PathBuf>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Subcommand, Debug)]
enum PackageAction {
    /// Name, entrypoint, schemas, uses, attachments, outcomes, size and digest.
    Inspect {
        /// The package directory.
        dir: PathBuf,
        /// Print one JSON document instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The Package/1 digest.
    Digest {
        /// The package directory.
        dir: PathBuf,
        /// Print one JSON document instead of the digest alone.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
enum ContractAction {
    /// The Capability Contract/1 digest (Channel Contract/1 with --channel or by $schema).
    Digest {
        /// The descriptor (JSON).
        file: PathBuf,
        /// Digest it as a Channel Contract/1 descriptor.
        #[arg(long)]
        channel: bool,
        /// Print one JSON document instead of the digest alone.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
enum SchemaAction {
    /// Compile a Schema/1 file.
    Check {
        /// The Schema/1 file (JSON).
        file: PathBuf,
        /// Print one JSON document instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Validate an instance; prints the diagnostic and the work units spent.
    Validate {
        /// The Schema/1 file (JSON).
        schema: PathBuf,
        /// The instance document (JSON/1).
        instance: PathBuf,
        /// Print one JSON document instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// Which Runs `jig runs` lists: the newest `limit` of those with the
/// status and the target asked.
#[derive(clap::Args, Debug)]
pub(crate) struct RunsFilter {
    /// List only the Runs with this status.
    #[arg(long, value_name = "STATUS", value_parser = ["pending", "succeeded", "failed", "lost"])]
    status: Option<String>,
    /// List only the Runs of this target (flow:<path> or binding:<id>).
    #[arg(long, value_name = "TARGET")]
    target: Option<String>,
    /// List at most N Runs, the newest (1 to 1000).
    #[arg(long, value_name = "N", default_value_t = client::LISTED_RUNS,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new()
              .range(1..=client::MAX_LISTED_RUNS as u64))]
    limit: usize,
}

impl RunsFilter {
    /// Whether it narrows the listing beyond its length.
    fn narrows(&self) -> bool {
        self.status.is_some() || self.target.is_some()
    }

    /// The target as the records spell it, or a refusal of one that is
    /// not a target.
    fn checked(mut self) -> Result<RunsFilter, CliError> {
        if let Some(text) = self.target.take() {
            let target = jig_engine::exec::TargetRef::parse(&text).ok_or_else(|| {
                CliError::new(Code::Usage, "--target must be flow:<path> or binding:<id>")
            })?;
            self.target = Some(target.to_string());
        }
        Ok(self)
    }

    /// The records it lists, newest first, from a listing newest first.
    fn select<'a>(&self, listed: &'a [state::RunRecord]) -> Vec<&'a state::RunRecord> {
        listed
            .iter()
            .filter(|record| {
                self.status
                    .as_deref()
                    .is_none_or(|status| record.status().as_str() == status)
            })
            .filter(|record| {
                self.target
                    .as_deref()
                    .is_none_or(|target| record.value["target"].as_str() == Some(target))
            })
            .take(self.limit)
            .collect()
    }
}

#[derive(Subcommand, Debug)]
enum RunsAction {
    /// Print one Run record.
    Show {
        /// The Run ID (run-…), as `jig runs` lists it.
        id: String,
    },
}

/// Run the command line; returns the process exit status.
pub fn main() -> u8 {
    // The Agent worker (seed 002 §9) is this binary re-executed inside its
    // own envelope; it is not a command.
    if std::env::args_os().nth(1).as_deref()
        == Some(std::ffi::OsStr::new(
            jig_provider_builtin::agent::WORKER_ARG,
        ))
    {
        return jig_provider_builtin::agent::worker::main();
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => 0,
                _ => exit_status(&CliError::new(Code::Usage, e.to_string())),
            };
        }
    };
    if cli.version {
        outln!("{}", env!("CARGO_PKG_VERSION"));
        return 0;
    }
    let Some(command) = cli.command else {
        let e = CliError::new(Code::Usage, "a command is required; see jig --help");
        report_error(e.code(), &e.to_string(), &[]);
        return exit_status(&e);
    };
    if let Some(warning) = terminal::theme_warning() {
        if std::io::stderr().is_terminal() {
            eprintln!("{warning}");
        }
    }
    // The installation verification policy is captured once, before any
    // project is loaded, and kept for the whole command (seed 002 §9).
    // A daemon's every Run is its own verification boundary.
    let (flag, verifies, writes, daemon) = match &command {
        Command::Review { verification, .. } | Command::Run { verification, .. } => {
            (verification.as_deref(), true, true, false)
        }
        Command::Doctor { verification } => (verification.as_deref(), true, false, false),
        Command::Exec { .. } => (None, true, true, false),
        Command::Serve(_) | Command::Worker(_) => (None, true, true, true),
        _ => (None, false, false, false),
    };
    if verifies {
        let variable = std::env::var_os(jig_verify::VARIABLE);
        match Policy::effective(flag.and_then(Policy::parse), variable.as_deref()) {
            Ok(policy) if daemon => jig_verify::install(Verifier::for_daemon(policy)),
            Ok(policy) => jig_verify::install(Verifier::for_command(policy, writes)),
            Err(message) => {
                let e = CliError::new(Code::ConfigInvalid, message.to_string());
                report_error(e.code(), &e.to_string(), &[]);
                return exit_status(&e);
            }
        }
    }
    let base = cli.chdir.clone().unwrap_or_else(|| PathBuf::from("."));
    // `jig review --details` explains each diagnostic on redirected
    // stderr too, after the reference's line.
    let explain = matches!(command, Command::Review { details: true, .. });
    let result = match command {
        Command::Completions { shell } => completions(shell),
        Command::Config { action } => config_check::config(&base, action),
        Command::Manpage => manpage(),
        Command::Init {
            bare,
            lang,
            directory,
            sdk,
        } => init(&base.join(directory), bare, lang, sdk.map(|p| base.join(p))),
        Command::Review {
            project,
            yes,
            details,
            allow_resolution_network,
            ..
        } => match &project {
            Some(project) => named_project_root(&base.join(project)),
            None => project_root(&base),
        }
        .and_then(|root| {
            review(
                &root,
                cli.config.as_deref(),
                ReviewOptions {
                    yes,
                    details,
                    allow_resolution_network,
                },
            )
        }),
        Command::Run {
            target,
            input,
            timeout,
            key,
            json,
            attach,
            select,
            out,
            receive,
            server,
            ..
        } => run::run(run::RunArgs {
            dir: &base,
            config: cli.config.as_deref(),
            target: &target,
            input: input.as_deref(),
            timeout: timeout.as_deref(),
            key: key.as_deref(),
            json,
            attach: &attach,
            select: &select,
            out: out.as_deref(),
            receive: &receive,
            server: server.server.as_deref(),
            token_file: server.token_file.as_deref(),
            cacert: server.cacert.as_deref(),
        }),
        Command::Runs {
            action,
            filter,
            server,
        } => runs(&base, action, filter, server),
        Command::Serve(args) => serve::serve(cli.chdir.as_deref(), cli.config.as_deref(), args),
        Command::Console(args) => console::console(&base, args),
        Command::Worker(args) => worker::worker(cli.config.as_deref(), args),
        Command::Exec {
            package,
            input,
            settings,
            children,
            timeout,
            json,
            receive,
        } => exec::exec(exec::ExecArgs {
            package: &package,
            input: input.as_deref(),
            settings: settings.as_deref(),
            children: &children,
            timeout: timeout.as_deref(),
            json,
            receive: &receive,
            config: cli.config.as_deref(),
            base: &base,
        }),
        Command::Package { action } => match action {
            PackageAction::Inspect { dir, json } => author::package_inspect(&base.join(dir), json),
            PackageAction::Digest { dir, json } => author::package_digest(&base.join(dir), json),
        },
        Command::Contract {
            action:
                ContractAction::Digest {
                    file,
                    channel,
                    json,
                },
        } => author::contract_digest(&base.join(file), channel, json),
        Command::Schema { action } => match action {
            SchemaAction::Check { file, json } => author::schema_check(&base.join(file), json),
            SchemaAction::Validate {
                schema,
                instance,
                json,
            } => author::schema_validate(&base.join(schema), &base.join(instance), json),
        },
        Command::Provider { action } => provider::main(action, &base),
        Command::Doctor { .. } => {
            load_config(cli.config.as_deref()).map(|config| doctor::doctor(&config, &base))
        }
        Command::Gc { dry_run } => {
            load_config(cli.config.as_deref()).and_then(|config| gc::gc(&base, &config, dry_run))
        }
    };
    if verifies {
        jig_verify::current().persist();
    }
    match result {
        Ok(status) => status,
        Err(e) => {
            let details = e.details();
            report_error(e.code(), &e.to_string(), &details);
            if explain && !std::io::stderr().is_terminal() {
                for detail in &details {
                    eprintln!("  {detail}");
                }
            }
            e.exit_code()
        }
    }
}

/// A diagnostic on stderr: `CODE: message` when redirected (the form
/// scripts read, exactly the reference's), or for a person the
/// explanation, each diagnostic's own `details`, next action and code.
pub(crate) fn report_error(code: &str, message: &str, details: &[String]) {
    if std::io::stderr().is_terminal() {
        let style = terminal::Style::terminal();
        eprint!("{}", terminal::render_failure(code, message, &style));
        for detail in details {
            eprintln!("  {}", terminal::escape(detail));
        }
    } else {
        eprintln!("{code}: {message}");
    }
}

/// What [`out!`] writes: to stdout as [`send_out`], and any failure but
/// a reader that has gone is said on stderr.
pub(crate) fn write_out(text: std::fmt::Arguments) {
    if let Err(e) = send_out(text.to_string().as_bytes()) {
        report_error(e.code(), &e.to_string(), &[]);
    }
}

/// Bytes to stdout. A reader that has gone (EPIPE) is no failure: what
/// it did not read, it did not want, and `jig … | head` never panics.
pub(crate) fn send_out(bytes: &[u8]) -> Result<(), CliError> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(CliError::new(
            Code::OutputFailed,
            format!("stdout cannot be written: {e}"),
        )),
        _ => Ok(()),
    }
}

fn completions(shell: CompletionShell) -> Result<u8, CliError> {
    use clap::CommandFactory;
    let shell = match shell {
        CompletionShell::Bash => clap_complete::Shell::Bash,
        CompletionShell::Zsh => clap_complete::Shell::Zsh,
        CompletionShell::Fish => clap_complete::Shell::Fish,
    };
    let mut command = Cli::command();
    // Written whole, then sent: clap_complete panics on a write that fails.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "jig", &mut script);
    send_out(&script)?;
    Ok(0)
}

fn manpage() -> Result<u8, CliError> {
    use clap::CommandFactory;
    let man = clap_mangen::Man::new(Cli::command());
    let mut out = Vec::new();
    man.render(&mut out)
        .map_err(|e| CliError::new(Code::Internal, e.to_string()))?;
    send_out(&out)?;
    Ok(0)
}

/// `jig init --lang`: the greeting Flow's recipe.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum InitLang {
    Typescript,
    Python,
    Rust,
}

/// Where an installed jig keeps the Rust SDK's sources, from its executable.
const INSTALLED_RUST_SDK: &str = "../share/jig/sdk-rust";

fn init(
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

/// The project a command works in when none is named (`jig run`, `jig
/// runs`, `jig review` without PROJECT, `jig gc`, ...): `dir` or, as cargo
/// and git find theirs, the nearest directory above it with a `jig.ts`.
/// Its absolute path, without symbolic links.
pub(crate) fn project_root(dir: &Path) -> Result<PathBuf, CliError> {
    let start = std::fs::canonicalize(dir)
        .map_err(|e| CliError::new(Code::ProjectNotFound, format!("{}: {e}", dir.display())))?;
    start
        .ancestors()
        .find(|candidate| candidate.join("jig.ts").is_file())
        .map(Path::to_path_buf)
        .ok_or_else(|| {
            CliError::new(
                Code::ProjectNotFound,
                format!("no jig.ts in {} or any directory above it", start.display()),
            )
        })
}

/// The project a command was named (`jig review PROJECT`): exactly that
/// directory, never one above it.
pub(crate) fn named_project_root(dir: &Path) -> Result<PathBuf, CliError> {
    if !dir.join("jig.ts").is_file() {
        return Err(CliError::new(
            Code::ProjectNotFound,
            format!("no jig.ts in {}", dir.display()),
        ));
    }
    std::fs::canonicalize(dir).map_err(|e| CliError::new(Code::ProjectNotFound, e.to_string()))
}

pub(crate) fn load_config(path: Option<&Path>) -> Result<HostConfig, CliError> {
    HostConfig::load(path).map_err(CliError::from)
}

/// `--input JSON|@FILE`. A file is opened once, must be a regular
/// non-symlink file, is bounded, and is parsed as JSON/1.
pub fn read_input(text: Option<&str>, base: &Path) -> Result<Value, CliError> {
    // The reference's texts (tests/all/reference_texts.rs); a refusal about a local file
    // names no host path, since a message can reach logs and other people.
    let invalid = |m: &str| CliError::new(Code::InputInvalid, m);
    let Some(text) = text else {
        return Ok(json!({}));
    };
    let Some(file) = text.strip_prefix('@') else {
        return flow::json::parse(text.as_bytes())
            .map_err(|_| invalid("--input must be FLOW JSON/1"));
    };
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let unreadable = || invalid("the selected --input file cannot be read");
    let mut handle = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(base.join(file))
        .map_err(|e| match e.raw_os_error() {
            Some(nix::libc::ELOOP) => invalid("--input file cannot be a symbolic link"),
            Some(nix::libc::ENOENT) => invalid("the selected --input file does not exist"),
            _ => unreadable(),
        })?;
    let meta = handle.metadata().map_err(|_| unreadable())?;
    if !meta.is_file() {
        return Err(invalid("the selected --input file is not a regular file"));
    }
    if meta.len() > MAX_INPUT_FILE_BYTES {
        return Err(invalid(
            "the selected --input file is larger than a FLOW JSON/1 document may be",
        ));
    }
    let mut bytes = Vec::new();
    Read::by_ref(&mut handle)
        .take(MAX_INPUT_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| unreadable())?;
    let after = handle.metadata().map_err(|_| unreadable())?;
    if bytes.len() as u64 != meta.len()
        || after.len() != meta.len()
        || after.modified().ok() != meta.modified().ok()
    {
        return Err(invalid(
            "the selected --input file changed while it was read",
        ));
    }
    flow::json::parse(&bytes).map_err(|_| invalid("the selected --input file is not FLOW JSON/1"))
}

fn runs(
    dir: &Path,
    action: Option<RunsAction>,
    filter: RunsFilter,
    server: ServerArgs,
) -> Result<u8, CliError> {
    let show = action.as_ref().map(|RunsAction::Show { id }| id.as_str());
    if show.is_some() && (filter.narrows() || filter.limit != client::LISTED_RUNS) {
        return Err(CliError::new(
            Code::Usage,
            "--status, --target and --limit choose what jig runs lists; jig runs show takes only the Run ID",
        ));
    }
    let filter = filter.checked()?;
    if let Some(served) = client::named(
        server.server.as_deref(),
        server.token_file.as_deref(),
        server.cacert.as_deref(),
    )? {
        let local = project_root(dir).ok().map(|root| serve::local_name(&root));
        return client::runs(&served, show, &filter, local);
    }
    let root = project_root(dir)?;
    let state = match ProjectState::acquire(&root) {
        Ok(state) => state,
        Err(e @ state::StateError::Busy { .. }) => match client::holding(&root) {
            Some(served) => return client::runs(&served, show, &filter, None),
            None => return Err(e.into()),
        },
        Err(e) => return Err(e.into()),
    };
    let runs = state.runs();
    runs.fence_lost().map_err(CliError::from)?;
    match show {
        None => {
            let listed = runs.list().map_err(CliError::from)?;
            print_runs(&filter.select(&listed.records));
            Ok(report_unreadable(&listed.unreadable))
        }
        Some(id) => {
            let record = runs.load(id).map_err(CliError::from)?;
            print_record(&record.value);
            Ok(0)
        }
    }
}

/// One Run's record: on a terminal a summary with RFC 3339 times, then
/// the record indented; redirected, its canonical JSON line.
pub(crate) fn print_record(record: &Value) {
    if std::io::stdout().is_terminal() {
        out!(
            "{}",
            terminal::render_record(record, &terminal::Style::terminal())
        );
    } else {
        outln!("{}", flow::json::canonical_string(record));
    }
}

/// After the Runs listed: each record that cannot be read, named by its
/// file in the project (`PROJECT_STATE_INVALID` on stderr). The status:
/// 2 when there is one (the listing is not whole), else 0.
pub(crate) fn report_unreadable(unreadable: &[state::Unreadable]) -> u8 {
    for u in unreadable {
        report_error(
            "PROJECT_STATE_INVALID",
            &format!(
                "Run {} cannot be listed: its record is not readable; look at {}",
                u.id, u.file
            ),
            &[],
        );
    }
    match unreadable.is_empty() {
        true => 0,
        false => 2,
    }
}

/// Whether an interrupted command still prints its terminal on stdout: for
/// a person (stdout a terminal, no `--json`), or as the last line of a
/// `--receive` stream, which always ends with one. A script reading
/// stdout gets nothing, as from the reference; the exit status and
/// `JIG_COMMAND_INTERRUPTED` on stderr say what happened.
pub(crate) fn shows_interrupted(json_output: bool, stream: &Option<receive::Stream>) -> bool {
    stream.is_some() || (!json_output && std::io::stdout().is_terminal())
}

/// The Runs listed: a table on a terminal, else one tab-separated line each.
fn print_runs(listed: &[&state::RunRecord]) {
    if std::io::stdout().is_terminal() {
        let rows: Vec<terminal::RunRow> = listed
            .iter()
            .map(|record| {
                let at = |key: &str| record.value.get(key).and_then(Value::as_u64);
                let text = |pointer: &str| {
                    record
                        .value
                        .pointer(pointer)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string()
                };
                let submitted = at("submittedAtUnixMs");
                terminal::RunRow {
                    id: record.id.clone(),
                    created_unix_ms: submitted,
                    status: record.status().as_str().to_string(),
                    outcome: text("/terminal/outcome"),
                    target: text("/target"),
                    duration_ms: submitted
                        .zip(at("settledAtUnixMs"))
                        .map(|(from, to)| to.saturating_sub(from)),
                    code: text("/terminal/code"),
                }
            })
            .collect();
        out!(
            "{}",
            terminal::runs_table(&rows, &terminal::Style::terminal())
        );
        return;
    }
    for record in listed {
        let target = record.value["target"].as_str().unwrap_or("");
        let status = record.status().as_str();
        let code = record
            .value
            .pointer("/terminal/code")
            .and_then(Value::as_str)
            .unwrap_or("");
        outln!("{}\t{status}\t{target}\t{code}", record.id);
    }
}

/// The longest a daemon's duration option (`--shutdown-grace`, `--lease`,
/// `--cache-interval`, `[serve] shutdown-grace`) may be: a day, the longest
/// a Run may last.
pub const MAX_DURATION_OPTION: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

/// A duration option: `default` when it is absent, else a positive
/// duration in `ms`, `s`, `m` or `h` ([`flow::duration`]) of at most
/// [`MAX_DURATION_OPTION`], or a usage error naming `what` with an example
/// (`like`).
pub(crate) fn duration_option(
    text: Option<String>,
    default: std::time::Duration,
    what: &str,
    like: &str,
) -> Result<std::time::Duration, CliError> {
    match text {
        None => Ok(default),
        Some(text) => flow::duration::parse(&text)
            .filter(|d| *d <= MAX_DURATION_OPTION)
            .ok_or_else(|| {
                CliError::new(
                    Code::Usage,
                    format!("{what} {text:?} is not a positive duration like {like}"),
                )
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_option_takes_its_default_a_duration_or_refuses_with_its_name() {
        use std::time::Duration;
        let default = Duration::from_secs(30);
        let option = |text: Option<&str>| {
            duration_option(
                text.map(str::to_string),
                default,
                "shutdown grace",
                "30s or 2m",
            )
        };
        assert_eq!(option(None).unwrap(), default);
        assert_eq!(option(Some("2m")).unwrap(), Duration::from_secs(120));
        assert_eq!(option(Some("24h")).unwrap(), MAX_DURATION_OPTION);
        assert_eq!(option(Some("86400000ms")).unwrap(), MAX_DURATION_OPTION);
        for past in ["25h", "1441m", "86400001ms", "0s", "05s", "1d"] {
            assert!(option(Some(past)).is_err(), "{past}");
        }
        let refused = option(Some("soon")).unwrap_err();
        let usage = CliError::new(Code::Usage, "");
        assert_eq!(refused.code(), usage.code());
        let CliError::Command { message, .. } = refused else {
            panic!("not the command line's own refusal: {refused:?}");
        };
        assert_eq!(
            message,
            "shutdown grace \"soon\" is not a positive duration like 30s or 2m"
        );
    }

    #[test]
    fn a_quoted_at_string_is_inline_input() {
        let value = read_input(Some("\"@notes\""), Path::new("/nonexistent")).unwrap();
        assert_eq!(value, json!("@notes"));
        assert_eq!(read_input(None, Path::new(".")).unwrap(), json!({}));
        let err = read_input(Some("@/nonexistent/input.json"), Path::new(".")).unwrap_err();
        assert_eq!(err.code(), "JIG_RUN_INPUT_INVALID");
    }

    #[test]
    fn an_input_file_is_read_at_the_json1_document_limit_and_refused_past_it() {
        let dir = tempfile::tempdir().unwrap();
        // `{}` padded with whitespace: a JSON/1 document of exactly the size.
        let document = |bytes: u64| format!("{{}}{}", " ".repeat(bytes as usize - 2));
        std::fs::write(dir.path().join("at.json"), document(MAX_INPUT_FILE_BYTES)).unwrap();
        std::fs::write(
            dir.path().join("past.json"),
            document(MAX_INPUT_FILE_BYTES + 1),
        )
        .unwrap();
        assert_eq!(read_input(Some("@at.json"), dir.path()).unwrap(), json!({}));
        let err = read_input(Some("@past.json"), dir.path()).unwrap_err();
        assert_eq!(err.code(), "JIG_RUN_INPUT_INVALID");
        assert_eq!(
            err.to_string(),
            "the selected --input file is larger than a FLOW JSON/1 document may be"
        );
    }
}
