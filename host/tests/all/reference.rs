//! The guide's Reference (`docs/src/reference.md`) against the code it
//! describes, so neither can change without the other.
//!
//! - The command reference, between `<!-- commands: begin -->` and
//!   `<!-- commands: end -->`, is rendered from `jig`'s clap definition:
//!   every command that is not hidden, nested ones too, with its synopsis,
//!   its about-text and every option that is not hidden with its help. A
//!   test compares it; run the test with `JIG_BLESS=1` in the environment
//!   and it rewrites that part of the file instead:
//!   `JIG_BLESS=1 cargo test -p jig --test all -- reference::`.
//! - The exit statuses: every code of the command line's exit table
//!   (`jig::cli::Code`, `REQUEST_FAULT_CODES`) is listed with the status
//!   `exit_status` gives it, and every code the table lists has that status.
//! - The Run terminal codes (`flow::wire::ErrorCode` and the host's own,
//!   `jig_engine::code::HostCode`), every key the host
//!   configuration parser accepts, every environment variable the Agent
//!   endpoint, the ACP clients and installation verification read, and
//!   every route the daemon serves are documented.

use std::collections::BTreeSet;
use std::path::PathBuf;

use clap::CommandFactory;
use jig::cli::{exit_status, CliError, Code, REQUEST_FAULT_CODES};

use crate::support::workspace;

const BLESS: &str = "JIG_BLESS";
const BEGIN: &str = "<!-- commands: begin -->";
const END: &str =
    "<!-- commands: end (generated from the clap definition by host/tests/all/reference.rs) -->";

fn reference_path() -> PathBuf {
    workspace().join("docs/src/reference.md")
}

fn chapter(name: &str) -> String {
    std::fs::read_to_string(workspace().join("docs/src").join(name)).unwrap()
}

/// Text for markdown outside code: `<` and `>` are not HTML.
fn prose(text: &str) -> String {
    text.replace('<', "&lt;").replace('>', "&gt;")
}

/// A table cell: one line, `|` escaped.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// One argument as a user types it: `--lang typescript|python|rust`,
/// `-C DIR`, `DIRECTORY`.
fn spelling(arg: &clap::Arg) -> String {
    let values: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| v.get_name().to_string())
        .collect();
    let value = if !values.is_empty() {
        values.join("|")
    } else {
        arg.get_value_names()
            .and_then(|names| names.first().map(|n| n.to_string()))
            .unwrap_or_else(|| arg.get_id().as_str().to_uppercase())
    };
    if arg.is_positional() {
        return value;
    }
    let name = match (arg.get_long(), arg.get_short()) {
        (Some(long), _) => format!("--{long}"),
        (None, Some(short)) => format!("-{short}"),
        (None, None) => unreachable!("an option has a name"),
    };
    if arg.get_action().takes_values() {
        format!("{name} {value}")
    } else {
        name
    }
}

/// In a synopsis: optional in brackets, repeatable with `…`.
fn synopsis_part(arg: &clap::Arg) -> String {
    let mut part = spelling(arg);
    if matches!(arg.get_action(), clap::ArgAction::Append) {
        part.push('…');
    }
    if arg.is_required_set() {
        part
    } else {
        format!("[{part}]")
    }
}

fn shown(arg: &clap::Arg) -> bool {
    !arg.is_hide_set() && !matches!(arg.get_id().as_str(), "help" | "version")
}

fn help(arg: &clap::Arg) -> String {
    arg.get_help().map(|h| h.to_string()).unwrap_or_default()
}

fn options_table(out: &mut String, args: &[&clap::Arg]) {
    out.push_str("| option | meaning |\n| --- | --- |\n");
    for arg in args {
        let mut spelled = spelling(arg);
        if matches!(arg.get_action(), clap::ArgAction::Append) {
            spelled.push('…');
        }
        out.push_str(&format!(
            "| `{}` | {} |\n",
            cell(&spelled),
            prose(&cell(&help(arg)))
        ));
    }
}

/// Every command a user can run, depth first: its words after `jig`, the
/// command, and the global options of its ancestors below the root.
fn commands(
    words: &[String],
    command: &clap::Command,
    inherited: &[clap::Arg],
    out: &mut Vec<(Vec<String>, clap::Command, Vec<clap::Arg>)>,
) {
    for sub in command.get_subcommands().filter(|c| !c.is_hide_set()) {
        let mut path = words.to_vec();
        path.push(sub.get_name().to_string());
        let mut args = inherited.to_vec();
        args.extend(sub.get_arguments().filter(|a| a.is_global_set()).cloned());
        if sub.get_subcommands().next().is_none() || !sub.is_subcommand_required_set() {
            out.push((path.clone(), sub.clone(), inherited.to_vec()));
        }
        commands(&path, sub, &args, out);
    }
}

/// The command reference as markdown: the global options, a table of the
/// commands, then each command with its synopsis and options.
fn render_commands() -> String {
    let root = jig::cli::Cli::command();
    let mut out = String::new();
    out.push_str(
        "Global options, accepted by every command (and `--help`, which every \
         command has):\n\n",
    );
    let global: Vec<&clap::Arg> = root.get_arguments().filter(|a| shown(a)).collect();
    options_table(&mut out, &global);
    let mut listed = Vec::new();
    commands(&[], &root, &[], &mut listed);
    out.push_str("\n| command | what it does |\n| --- | --- |\n");
    for (words, command, _) in &listed {
        let name = words.join(" ");
        out.push_str(&format!(
            "| [`jig {name}`](#jig-{}) | {} |\n",
            words.join("-"),
            prose(&cell(&about(command)))
        ));
    }
    for (words, command, inherited) in &listed {
        let args: Vec<&clap::Arg> = command
            .get_arguments()
            .chain(inherited.iter())
            .filter(|a| shown(a))
            .collect();
        // Options first, then positionals, as a user would read them.
        let mut synopsis = format!("jig {}", words.join(" "));
        for arg in args.iter().filter(|a| !a.is_positional()) {
            synopsis.push(' ');
            synopsis.push_str(&synopsis_part(arg));
        }
        for arg in args.iter().filter(|a| a.is_positional()) {
            synopsis.push(' ');
            synopsis.push_str(&synopsis_part(arg));
        }
        if command.get_subcommands().next().is_some() {
            synopsis.push_str(" [COMMAND]");
        }
        out.push_str(&format!(
            "\n### jig {}\n\n```text\n{synopsis}\n```\n\n{}\n",
            words.join(" "),
            prose(&long_about(command))
        ));
        if !args.is_empty() {
            out.push('\n');
            options_table(&mut out, &args);
        }
    }
    out
}

fn about(command: &clap::Command) -> String {
    command
        .get_about()
        .map(|a| a.to_string())
        .unwrap_or_default()
}

/// The whole doc comment, paragraphs kept, lines joined.
fn long_about(command: &clap::Command) -> String {
    let text = command
        .get_long_about()
        .map(|a| a.to_string())
        .unwrap_or_else(|| about(command));
    text.split("\n\n")
        .map(|paragraph| paragraph.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[test]
fn the_command_reference_is_the_clap_definition() {
    let path = reference_path();
    let text = std::fs::read_to_string(&path).unwrap();
    let start = text
        .find(BEGIN)
        .expect("reference.md has the commands: begin marker")
        + BEGIN.len();
    let end = text
        .find(END)
        .expect("reference.md has the commands: end marker");
    let rendered = format!("\n\n{}\n", render_commands());
    if std::env::var_os(BLESS).is_some_and(|v| v == "1") {
        let updated = format!("{}{rendered}{}", &text[..start], &text[end..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    let documented = &text[start..end];
    if documented != rendered {
        // The first line that differs, numbered from the begin marker.
        let documented_lines: Vec<&str> = documented.lines().collect();
        let rendered_lines: Vec<&str> = rendered.lines().collect();
        let diff = (0..documented_lines.len().max(rendered_lines.len()))
            .find(|&n| documented_lines.get(n) != rendered_lines.get(n))
            .map(|n| {
                format!(
                    "line {}: documented {:?}, clap {:?}",
                    n + 1,
                    documented_lines.get(n),
                    rendered_lines.get(n)
                )
            })
            .unwrap_or_else(|| "they differ in line endings".into());
        panic!(
            "reference.md's commands differ from the clap definition; \
             rewrite them with {BLESS}=1 cargo test -p jig --test all -- reference::\n{diff}"
        );
    }
}

#[test]
fn the_command_reference_lists_every_option_and_hides_the_hidden() {
    let rendered = render_commands();
    let mut listed = Vec::new();
    let root = jig::cli::Cli::command();
    commands(&[], &root, &[], &mut listed);
    let names: BTreeSet<String> = listed.iter().map(|(w, _, _)| w.join(" ")).collect();
    for nested in [
        "package inspect",
        "provider call",
        "runs show",
        "config check",
    ] {
        assert!(names.contains(nested), "{names:?}");
    }
    assert!(!names.iter().any(|n| n.starts_with("manpage")), "{names:?}");
    assert!(!rendered.contains("manpage"), "a hidden command is shown");
    // What the reference would show without words: a doc comment is due.
    let mut unexplained = Vec::new();
    for (words, command, _) in &listed {
        if about(command).trim().is_empty() {
            unexplained.push(format!("jig {}", words.join(" ")));
        }
        for arg in command.get_arguments().filter(|a| shown(a)) {
            let spelled = cell(&spelling(arg));
            assert!(
                rendered.contains(&format!("| `{spelled}")),
                "jig {} {spelled} is not in the reference",
                words.join(" ")
            );
            if help(arg).trim().is_empty() {
                unexplained.push(format!("jig {} {spelled}", words.join(" ")));
            }
        }
    }
    assert!(
        unexplained.is_empty(),
        "without help text (give them doc comments): {unexplained:#?}"
    );
}

/// The cells of the Reference's row for exit status `status`.
fn exit_row(status: u8) -> String {
    let text = std::fs::read_to_string(reference_path()).unwrap();
    let section = &text[text.find("## Exit statuses").unwrap()..];
    let prefix = format!("| {status} |");
    section
        .lines()
        .find(|line| line.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no row for exit status {status}"))
        .to_string()
}

/// The backticked codes of a text (`ABC_DEF`), and its `PREFIX_*` wildcards.
fn codes_in(text: &str) -> (BTreeSet<String>, Vec<String>) {
    let mut codes = BTreeSet::new();
    let mut wildcards = Vec::new();
    let parts: Vec<&str> = text.split('`').collect();
    for (i, part) in parts.iter().enumerate() {
        // `PACKAGE_*` except `PACKAGE_IO`: an exception is not a member.
        if i % 2 == 0 || parts[i - 1].ends_with("except ") {
            continue;
        }
        if let Some(prefix) = part.strip_suffix('*') {
            wildcards.push(prefix.to_string());
        } else if !part.is_empty() && part.bytes().all(|b| b.is_ascii_uppercase() || b == b'_') {
            codes.insert(part.to_string());
        }
    }
    (codes, wildcards)
}

fn listed_in(row: &str, code: &str) -> bool {
    let (codes, wildcards) = codes_in(row);
    codes.contains(code) || wildcards.iter().any(|prefix| code.starts_with(prefix))
}

#[test]
fn every_exit_code_is_in_the_reference_with_its_status() {
    let troubleshooting = chapter("troubleshooting.md");
    for code in Code::ALL {
        let status = exit_status(&CliError::new(code, ""));
        assert!(
            listed_in(&exit_row(status), code.as_str()),
            "{} (exit status {status}) is not in the Reference's row for {status}",
            code.as_str()
        );
        assert!(
            troubleshooting.contains(&format!("`{}`", code.as_str())),
            "{} is not in troubleshooting.md",
            code.as_str()
        );
    }
    let answered = |code: &str| {
        exit_status(&CliError::Answered {
            code: code.to_string(),
            message: String::new(),
        })
    };
    for code in REQUEST_FAULT_CODES {
        assert!(
            listed_in(&exit_row(1), code),
            "{code} exits 1 and is not in the Reference's row for 1"
        );
    }
    // Each code a row names exits as that row says: as the command line's
    // own code, else as an answered code (or `jig init`'s one refusal).
    for status in [1, 2] {
        let (codes, _) = codes_in(&exit_row(status));
        for code in codes {
            let actual = Code::ALL
                .iter()
                .find(|c| c.as_str() == code)
                .map(|c| exit_status(&CliError::new(*c, "")))
                .unwrap_or_else(|| match code.as_str() {
                    "JIG_INIT_DESTINATION_EXISTS" => 1,
                    _ => answered(&code),
                });
            assert_eq!(
                actual, status,
                "{code} is in the Reference's row for {status}"
            );
        }
    }
}

#[test]
fn every_run_terminal_code_is_in_the_reference() {
    let text = std::fs::read_to_string(reference_path()).unwrap();
    let section =
        &text[text.find("### Run terminals").unwrap()..text.find("## Host configuration").unwrap()];
    let registry = flow::wire::ErrorCode::ALL.map(|c| c.as_str());
    let host = jig_engine::code::HostCode::ALL.map(|c| c.as_str());
    for code in registry.iter().chain(&host) {
        assert!(
            section.contains(&format!("| `{code}` |")),
            "{code} is not in the Reference's Run terminal codes"
        );
    }
}

/// The keys a table of the host configuration accepts, as its parser says
/// when it refuses an unknown one.
fn accepted_keys(prefix: &str, table: &str) -> Vec<String> {
    let text = format!("{prefix}{table}zz-unknown = 1\n");
    let message = jig_engine::config::HostConfig::parse(&text).unwrap_err();
    let list = message
        .split("expected one of ")
        .nth(1)
        .or_else(|| message.split("expected ").nth(1))
        .unwrap_or_else(|| panic!("{message}"));
    let list = list.lines().next().unwrap();
    list.split(", ")
        .flat_map(|part| part.split(" or "))
        .map(|key| key.trim().trim_matches('`').to_string())
        .collect()
}

/// The keys the Reference's configuration table documents: `[table] key`
/// rows, later backticked words in the first cell being keys of that table.
fn documented_keys() -> BTreeSet<String> {
    let text = std::fs::read_to_string(reference_path()).unwrap();
    let section =
        &text[text.find("## Host configuration").unwrap()..text.find("## Environment").unwrap()];
    let mut keys = BTreeSet::new();
    for line in section.lines().filter(|l| l.starts_with("| `[")) {
        let first = line.split(" | ").next().unwrap();
        let mut table: Option<&str> = None;
        for (i, part) in first.split('`').enumerate() {
            if i % 2 == 0 {
                continue;
            }
            let key = match part.rsplit_once("] ") {
                Some((name, key)) => {
                    table = Some(name.trim_matches(['[', ']']));
                    key
                }
                None if table.is_none() => {
                    keys.insert(part.trim_matches(['[', ']']).to_string());
                    continue;
                }
                None => part,
            };
            keys.insert(format!("{}.{key}", table.unwrap()));
        }
    }
    keys
}

#[test]
fn every_host_configuration_key_is_in_the_reference() {
    let documented = documented_keys();
    let mut missing = Vec::new();
    let mut check = |key: String| {
        if !documented.contains(&key) {
            missing.push(key);
        }
    };
    let tables = accepted_keys("", "");
    assert!(tables.contains(&"serve".to_string()), "{tables:?}");
    let provider = "[[providers]]\nname = \"p\"\nkind = \"wasm\"\n";
    for table in &tables {
        match table.as_str() {
            // Maps of secret name to file: any key.
            "secrets" => check("secrets".into()),
            "providers" => {
                for key in accepted_keys(provider, "") {
                    if key != "grants" {
                        check(format!("providers.{key}"));
                        continue;
                    }
                    for grant in accepted_keys(provider, "[providers.grants]\n") {
                        match grant.as_str() {
                            "http" | "limits" => {
                                let sub = format!("[providers.grants.{grant}]\n");
                                for leaf in accepted_keys(provider, &sub) {
                                    check(format!("providers.grants.{grant}.{leaf}"));
                                }
                            }
                            _ => check(format!("providers.grants.{grant}")),
                        }
                    }
                }
            }
            "projects" => {
                for key in accepted_keys("[[projects]]\n", "") {
                    check(format!("projects.{key}"));
                }
            }
            _ => {
                for key in accepted_keys(&format!("[{table}]\n"), "") {
                    check(format!("{table}.{key}"));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "host configuration keys missing from the Reference: {missing:?} (documented: {documented:?})"
    );
}

#[test]
fn every_served_route_is_in_the_guide() {
    let serving = chapter("serving.md");
    let section = &serving[serving.find("## The HTTP API").unwrap()..];
    let section = &section[..section[3..].find("\n## ").unwrap()];
    let documented: BTreeSet<String> = section
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|rest| rest.split_once('`').map(|(route, _)| route.to_string()))
        .collect();
    let served: BTreeSet<String> = jig_server::serve::ROUTES
        .iter()
        .map(|(method, path)| format!("{method} {path}"))
        .collect();
    assert_eq!(documented, served, "serving.md's HTTP API table");
}

#[test]
fn every_variable_jig_reads_for_agents_and_verification_is_in_the_reference() {
    let text = std::fs::read_to_string(reference_path()).unwrap();
    let section =
        &text[text.find("## Environment").unwrap()..text.find("## HTTP endpoints").unwrap()];
    let (documented, _) = codes_in(section);
    let read = jig_provider_builtin::agent::endpoint::ENV_VARS
        .iter()
        .chain(&jig_provider_builtin::agent::acp::ENV_VARS)
        .chain(&[jig_verify::VARIABLE]);
    let missing: BTreeSet<&str> = read
        .filter(|v| !documented.contains(**v))
        .copied()
        .collect();
    assert!(
        missing.is_empty(),
        "not in the Reference's Environment: {missing:?}"
    );
}
