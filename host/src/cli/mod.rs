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
mod dev;
mod doctor;
mod door;
mod editor;
mod exec;
mod exit;
mod explain;
mod fixtures;
mod gc;
mod init;
mod logs;
mod provider;
mod review;
pub(crate) mod run;
mod runs;
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

use jig_engine::config::HostConfig;
use jig_engine::exec::receive;
use jig_engine::exec::submit::{parse_timeout, DEFAULT_TIMEOUT};
use jig_verify::{Policy, Verifier};

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
        lang: Option<init::InitLang>,
        /// For --lang rust: the Rust SDK (sdk-rust) to build against; default: the
        /// one installed with this jig.
        #[arg(long, value_name = "PATH", requires = "lang")]
        sdk: Option<PathBuf>,
        /// The project directory to create; it must not exist.
        directory: PathBuf,
    },
    /// Review, admit and run TARGET now and again after each save, until Ctrl-C
    /// (the project this process holds; admits only with consent for this session).
    Dev {
        /// flow:<path> or binding:<id>: what runs after each review.
        target: String,
        /// The input of each Run: JSON text, or @FILE (read again for each Run).
        #[arg(long, value_name = "JSON|@FILE")]
        input: Option<String>,
        /// Each Run's deadline: a positive integer with ms, s, m or h (at most 24h).
        #[arg(long, value_name = "DURATION")]
        timeout: Option<String>,
        /// Consent for this session: admit each reviewed change without asking.
        #[arg(long)]
        yes: bool,
    },
    /// Write the bundled SDKs where editors and type checkers find them, offline:
    /// each JavaScript Flow's node_modules/@jigging/flow and .jig-sdk/python, with
    /// tsconfig.json, pyrightconfig.json and mypy.ini where none exists.
    Editor,
    /// Resolve a package's npm dependencies into its bun.lock (Bun in the envelope,
    /// the configured registry only; the bundled @jigging/flow left out).
    Lock {
        /// The Flow's package directory (with its package.json).
        package: PathBuf,
    },
    /// Print the guide's Troubleshooting entry for an error code (offline).
    Explain {
        /// The code, as a refusal or a failed terminal gives it (e.g. JIG_RUN_TARGET_INVALID).
        #[arg(required_unless_present = "list")]
        code: Option<String>,
        /// List every code the guide explains.
        #[arg(long, conflicts_with = "code")]
        list: bool,
    },
    /// Add to the project: `jig new flow NAME` scaffolds a Flow with a fixture.
    New {
        #[command(subcommand)]
        what: NewAction,
    },
    /// Capture the project, show what would change, and admit it.
    Review {
        /// The project directory (default: the current directory's project,
        /// the nearest directory with a jig.ts at or above it).
        project: Option<PathBuf>,
        /// Admit without asking.
        #[arg(long)]
        yes: bool,
        /// Show the complete current and proposed policy and each changed
        /// package's files with their diffs; when review refuses, explain
        /// each diagnostic after the refusal line.
        #[arg(long)]
        details: bool,
        /// Show each changed package's files and the unified diff of its
        /// text files, new packages' files too (on a terminal the files and
        /// the diffs against the admitted bytes are always shown).
        #[arg(long)]
        diff: bool,
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
        #[command(flatten)]
        files: FileArgs,
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
        #[command(flatten)]
        files: FileArgs,
    },
    /// Run each Flow's fixtures (fixtures/<case>/case.json beside its FLOW.md) as
    /// `jig exec` runs a package; admits nothing.
    Test {
        /// Package directories (default: the Flows the project's jig.ts declares).
        packages: Vec<PathBuf>,
        /// Also write the results as JUnit XML to FILE.
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
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
        action: Option<runs::RunsAction>,
        #[command(flatten)]
        filter: runs::RunsFilter,
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

/// A file Run's options, as `jig run` and `jig exec` take them.
#[derive(clap::Args, Debug)]
struct FileArgs {
    /// Give read attachment NAME the files of DIR (repeatable).
    #[arg(long = "attach", value_name = "NAME=DIR")]
    attach: Vec<String>,
    /// Capture only FILE (relative to NAME's DIR) instead of the whole tree (repeatable).
    #[arg(long = "select", value_name = "NAME=FILE")]
    select: Vec<String>,
    /// Publish the packet (delivered files and result.json) as the new directory DIR.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum NewAction {
    /// A Flow package at flows/NAME (FLOW.md, entrypoint, input schema and a
    /// fixture that `jig test` passes).
    Flow {
        /// The Flow's name (a LocalName): its directory and FLOW.md name.
        name: String,
        /// The entrypoint's language: flow.ts with its package.json (default) or flow.py.
        #[arg(long, value_enum, default_value = "typescript")]
        lang: init::FlowLang,
        /// A Flow that asks the Agent: its `agent` slot on the exact Agent Run
        /// descriptor this jig serves, written beside it (no fixture).
        #[arg(long)]
        agent: bool,
    },
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
        Command::Exec { .. }
        | Command::Test { .. }
        | Command::Dev { .. }
        | Command::Lock { .. } => (None, true, true, false),
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
        } => init::init(&base.join(directory), bare, lang, sdk.map(|p| base.join(p))),
        Command::New {
            what: NewAction::Flow { name, lang, agent },
        } => init::new_flow(&base, &name, lang, agent),
        Command::Editor => editor::editor(&base),
        Command::Lock { package } => editor::lock(&base, &package, cli.config.as_deref()),
        Command::Explain { code, list } => explain::explain(code.as_deref(), list),
        Command::Dev {
            target,
            input,
            timeout,
            yes,
        } => dev::dev(dev::DevArgs {
            target: &target,
            input: input.as_deref(),
            timeout: timeout.as_deref(),
            yes,
            dir: &base,
            config: cli.config.as_deref(),
        }),
        Command::Review {
            project,
            yes,
            details,
            diff,
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
                    diff,
                    files: false,
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
            files:
                FileArgs {
                    attach,
                    select,
                    out,
                },
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
        } => runs::runs(&base, action, filter, server),
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
            files:
                FileArgs {
                    attach,
                    select,
                    out,
                },
        } => exec::exec(exec::ExecArgs {
            package: &package,
            input: input.as_deref(),
            settings: settings.as_deref(),
            children: &children,
            timeout: timeout.as_deref(),
            json,
            receive: &receive,
            attach: &attach,
            select: &select,
            out: out.as_deref(),
            config: cli.config.as_deref(),
            base: &base,
        }),
        Command::Test { packages, junit } => fixtures::test(fixtures::TestArgs {
            packages: &packages,
            junit: junit.as_deref(),
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

/// Whether an interrupted command still prints its terminal on stdout: for
/// a person (stdout a terminal, no `--json`), or as the last line of a
/// `--receive` stream, which always ends with one. A script reading
/// stdout gets nothing, as from the reference; the exit status and
/// `JIG_COMMAND_INTERRUPTED` on stderr say what happened.
pub(crate) fn shows_interrupted(json_output: bool, stream: &Option<receive::Stream>) -> bool {
    stream.is_some() || (!json_output && std::io::stdout().is_terminal())
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
}
