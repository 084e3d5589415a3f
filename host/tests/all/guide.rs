//! The user guide's examples are tests: every shell example in
//! `docs/src/*.md` runs against the `jig` under test, and the output it
//! shows is compared with what the command prints.
//!
//! The markup, kept in HTML comments so the book renders none of it:
//!
//! - A ```` ```console ```` block is a terminal session: `$ COMMAND` lines
//!   (a line ending in `\` continues on the next), each followed by the
//!   output it shows, stdout and stderr together, as a terminal would.
//!   `[..]` matches the rest of a line and `...` on its own line any number
//!   of lines ([`matches`]); `[ROOT]` stands for the chapter's scratch directory,
//!   `[DIGEST]` for a `sha256:<64 hex>` digest and `[RUN]` for a Run ID
//!   (a local one, or one queued in PostgreSQL). A
//!   last output line `[exit status N]` says the command exits N; without
//!   it the command must exit 0.
//! - `<!-- guide: file PATH -->` before a fenced block writes the block's
//!   text to PATH (relative to the session's current directory).
//! - `<!-- guide: skip REASON -->` before a block says why it cannot run
//!   here. A `sh`, `bash` or `shell` block must carry it: an example either
//!   runs or says why not.
//! - `<!-- guide: interrupt AFTER -->` before a console block sends SIGINT
//!   to its first command's process group AFTER (`500ms`, `2s`) it
//!   started, as Ctrl-C in a terminal would; on a loaded machine, not
//!   before a process the command started handles SIGINT.
//! - `<!-- guide: fixture NAME -->` on a line of its own provides what an
//!   example needs from the test support, from there to the chapter's end:
//!   - `examples`: a copy of the checkout's `examples/` directory as
//!     `examples/` in the session's current directory;
//!   - `port`: `$PORT`, a loopback TCP port nothing listens on, shown in
//!     output as `[PORT]`;
//!   - `postgres`: a PostgreSQL of its own on a Unix socket (as
//!     host/tests/all/queue.rs starts one), its URL in `$DATABASE_URL`;
//!   - `agent-endpoint`: the local OpenAI-compatible (Responses API)
//!     endpoint of host/tests/all/agent.rs, answering every request with
//!     [`AGENT_ANSWER`]; its base URL in `$AGENT_BASE_URL`, shown as
//!     `[AGENT_BASE_URL]`;
//!   - `acp-agent`: the ACP test agent of host/tests/all/acp.rs (on the
//!     npm SDK `.ci/setup` installs) in `$ACP_AGENT`, shown as
//!     `[ACP_AGENT]`, and the ACP worker beside the `jig` under test.
//!
//! A chapter is one session in a scratch directory of its own, run by bash
//! (so `cd` and `export` carry over, as they would for a reader), with the
//! `jig` under test first on `PATH`, a private configuration home and no
//! inherited Agent or server variables.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::agent::{responses_text, Endpoint, Reply};
use crate::support::{acp_worker, catches, copy_dir, descendants, free_port, workspace, Postgres};

/// A command that takes longer than this is a hung example.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);

/// What `<!-- guide: fixture NAME -->` may name (see the header).
const FIXTURES: [&str; 5] = [
    "examples",
    "port",
    "postgres",
    "agent-endpoint",
    "acp-agent",
];

/// What the `agent-endpoint` fixture's model answers, to every request.
const AGENT_ANSWER: &str = r#"{"verdict":"approve","concerns":[]}"#;

#[derive(Debug)]
enum Block {
    Console {
        line: usize,
        steps: Vec<Step>,
        interrupt: Option<Duration>,
    },
    Fixture {
        name: String,
    },
    File {
        path: String,
        text: String,
    },
    Skipped {
        line: usize,
        reason: String,
    },
}

#[derive(Debug)]
struct Step {
    line: usize,
    command: String,
    expected: String,
    status: i32,
}

/// The chapters of the book, in `SUMMARY.md` order.
fn chapters() -> Vec<PathBuf> {
    let src = workspace().join("docs/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).expect("docs/src/SUMMARY.md");
    let mut chapters = Vec::new();
    for line in summary.lines() {
        if let Some(start) = line.find("](") {
            let rest = &line[start + 2..];
            let end = rest.find(')').expect("a closed link in SUMMARY.md");
            chapters.push(src.join(&rest[..end]));
        }
    }
    assert!(chapters.len() >= 10, "SUMMARY.md lists the chapters");
    chapters
}

/// The blocks of one chapter that the harness acts on.
fn parse(name: &str, text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    let mut marker: Option<(String, String)> = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim();
        if let Some(rest) = trimmed.strip_prefix("<!-- guide:") {
            let rest = rest
                .strip_suffix("-->")
                .unwrap_or_else(|| panic!("{name}:{}: an unclosed guide marker", i + 1))
                .trim();
            let (kind, arg) = rest.split_once(' ').unwrap_or((rest, ""));
            assert!(
                matches!(kind, "file" | "skip" | "interrupt" | "fixture") && !arg.trim().is_empty(),
                "{name}:{}: a guide marker is `file PATH`, `skip REASON`, `interrupt AFTER` \
                 or `fixture NAME`",
                i + 1
            );
            if kind == "fixture" {
                assert!(
                    FIXTURES.contains(&arg.trim()),
                    "{name}:{}: the fixtures are {FIXTURES:?}",
                    i + 1
                );
                blocks.push(Block::Fixture {
                    name: arg.trim().to_string(),
                });
                i += 1;
                continue;
            }
            marker = Some((kind.to_string(), arg.trim().to_string()));
            i += 1;
            continue;
        }
        let Some(info) = trimmed.strip_prefix("```") else {
            if !trimmed.is_empty() {
                marker = None;
            }
            i += 1;
            continue;
        };
        let fence_line = i + 1;
        let language = info.split([',', ' ']).next().unwrap_or("");
        let mut body = Vec::new();
        i += 1;
        while i < lines.len() && lines[i].trim() != "```" {
            body.push(lines[i]);
            i += 1;
        }
        assert!(i < lines.len(), "{name}:{fence_line}: an unclosed fence");
        i += 1;
        let text = body.join("\n") + "\n";
        match marker.take() {
            Some((kind, reason)) if kind == "skip" => blocks.push(Block::Skipped {
                line: fence_line,
                reason,
            }),
            Some((kind, after)) if kind == "interrupt" => {
                assert_eq!(
                    language, "console",
                    "{name}:{fence_line}: `interrupt` goes before a console block"
                );
                let after = jig_engine::exec::submit::parse_timeout(&after)
                    .unwrap_or_else(|| panic!("{name}:{fence_line}: interrupt after `{after}`?"));
                blocks.push(Block::Console {
                    line: fence_line,
                    steps: steps(name, fence_line, &body),
                    interrupt: Some(after),
                })
            }
            Some((_, path)) => blocks.push(Block::File { path, text }),
            None if language == "console" => blocks.push(Block::Console {
                line: fence_line,
                steps: steps(name, fence_line, &body),
                interrupt: None,
            }),
            None if matches!(language, "sh" | "bash" | "shell") => panic!(
                "{name}:{fence_line}: a shell example must be a `console` block that runs, \
                 or carry `<!-- guide: skip REASON -->`"
            ),
            None => {}
        }
    }
    blocks
}

/// The commands of a console block with the output each shows.
fn steps(name: &str, fence_line: usize, body: &[&str]) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut continued = false;
    for (offset, line) in body.iter().enumerate() {
        let line_no = fence_line + 1 + offset;
        if continued {
            let step = steps.last_mut().unwrap();
            step.command.push('\n');
            step.command.push_str(line);
            continued = line.ends_with('\\');
        } else if let Some(command) = line.strip_prefix("$ ") {
            steps.push(Step {
                line: line_no,
                command: command.to_string(),
                expected: String::new(),
                status: 0,
            });
            continued = command.ends_with('\\');
        } else {
            let step = steps.last_mut().unwrap_or_else(|| {
                panic!("{name}:{line_no}: a console block starts with a `$ ` command")
            });
            if let Some(status) = line
                .strip_prefix("[exit status ")
                .and_then(|s| s.strip_suffix(']'))
            {
                step.status = status.parse().expect("an exit status");
            } else {
                step.expected.push_str(line);
                step.expected.push('\n');
            }
        }
    }
    steps
}

/// One reader's terminal: bash runs each command in the directory and with
/// the exports the previous one left.
struct Session {
    root: tempfile::TempDir,
    state: tempfile::TempDir,
    /// Each command runs in a process group of its own; a daemon an
    /// example started in the background (and did not stop, because the
    /// chapter failed first) is stopped with its group.
    groups: std::cell::RefCell<Vec<u32>>,
    /// The chapter's PostgreSQL, stopped after its daemons.
    postgres: std::cell::RefCell<Option<Postgres>>,
    /// The chapter's Agent endpoint, serving until the test process ends.
    endpoint: std::cell::RefCell<Option<Endpoint>>,
}

impl Drop for Session {
    fn drop(&mut self) {
        for group in self.groups.borrow().iter() {
            let _ = Command::new("kill")
                .args(["-TERM", "--", &format!("-{group}")])
                .stderr(Stdio::null())
                .status();
        }
    }
}

impl Session {
    fn new() -> Session {
        let root = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let bin = state.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_jig"), bin.join("jig")).unwrap();
        std::fs::write(
            state.path().join("cwd"),
            root.path().as_os_str().as_encoded_bytes(),
        )
        .unwrap();
        std::fs::write(state.path().join("env"), "").unwrap();
        Session {
            root,
            state,
            groups: Default::default(),
            postgres: Default::default(),
            endpoint: Default::default(),
        }
    }

    /// Provide fixture `name` (see the header) from here on; the
    /// placeholder for a value it makes up, if any.
    fn fixture(&self, name: &str) -> Option<(&'static str, String)> {
        let export = |variable: &str, value: &str| {
            let mut env = std::fs::OpenOptions::new()
                .append(true)
                .open(self.state.path().join("env"))
                .unwrap();
            let quoted = value.replace('\'', "'\\''");
            std::io::Write::write_all(
                &mut env,
                format!("export {variable}='{quoted}'\n").as_bytes(),
            )
            .unwrap();
        };
        match name {
            "examples" => {
                copy_dir(&workspace().join("examples"), &self.cwd().join("examples"));
                None
            }
            "port" => {
                let port = free_port().to_string();
                export("PORT", &port);
                Some(("[PORT]", port))
            }
            "postgres" => {
                let postgres = Postgres::start();
                export("DATABASE_URL", &postgres.url());
                *self.postgres.borrow_mut() = Some(postgres);
                None
            }
            "agent-endpoint" => {
                let endpoint = Endpoint::start(Reply::Json(200, responses_text(AGENT_ANSWER)));
                export("AGENT_BASE_URL", &endpoint.base_url());
                let url = endpoint.base_url();
                *self.endpoint.borrow_mut() = Some(endpoint);
                Some(("[AGENT_BASE_URL]", url))
            }
            "acp-agent" => {
                // The worker beside the jig under test (built once if missing).
                acp_worker();
                let fixture = workspace().join("host/tests/fixtures/acp");
                assert!(
                    fixture
                        .join("node_modules/@agentclientprotocol/sdk/package.json")
                        .is_file(),
                    "the ACP SDK is missing: run .ci/setup"
                );
                let program = fixture.join("claude-acp");
                export("ACP_AGENT", program.to_str().unwrap());
                Some(("[ACP_AGENT]", program.display().to_string()))
            }
            other => unreachable!("fixture {other} is not in FIXTURES"),
        }
    }

    fn cwd(&self) -> PathBuf {
        PathBuf::from(
            std::fs::read_to_string(self.state.path().join("cwd"))
                .unwrap()
                .trim_end(),
        )
    }

    /// Run `command`; with `interrupt`, SIGINT to its process group that
    /// long after it started, once a process under it handles SIGINT.
    fn run(&self, command: &str, interrupt: Option<Duration>) -> (i32, String) {
        const SCRIPT: &str = r#"exec 2>&1
cd -- "$(cat "$GUIDE_STATE/cwd")" || exit 99
. "$GUIDE_STATE/env"
eval "$1"
status=$?
pwd > "$GUIDE_STATE/cwd"
export -p > "$GUIDE_STATE/env"
exit $status"#;
        let state = self.state.path();
        let path = format!(
            "{}:{}",
            state.join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let runtime = state.join("runtime");
        std::fs::create_dir_all(&runtime).unwrap();
        let mut child = Command::new("bash")
            .args(["--noprofile", "--norc", "-c", SCRIPT, "guide"])
            .arg(command)
            .env_clear()
            .env("PATH", path)
            .env("HOME", std::env::var_os("HOME").unwrap_or_default())
            .env("LANG", "C.UTF-8")
            .env("NO_COLOR", "1")
            .env("XDG_CONFIG_HOME", state.join("config"))
            .env("XDG_RUNTIME_DIR", &runtime)
            .env("GUIDE_STATE", state)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("bash runs");
        self.groups.borrow_mut().push(child.id());
        let mut stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut stdout, &mut bytes).unwrap();
            bytes
        });
        let started = Instant::now();
        let mut interrupt = interrupt;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            // Ctrl-C once the command takes it: a command that has not yet
            // installed its handler would die of it instead.
            let ready = || {
                descendants(child.id())
                    .into_iter()
                    .any(|pid| catches(pid, nix::libc::SIGINT))
            };
            if interrupt.is_some_and(|after| started.elapsed() >= after) && ready() {
                interrupt = None;
                let _ = Command::new("kill")
                    .args(["-INT", "--", &format!("-{}", child.id())])
                    .status();
            }
            if started.elapsed() > COMMAND_TIMEOUT {
                let _ = child.kill();
                panic!("`{command}` took over {COMMAND_TIMEOUT:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let bytes = reader.join().unwrap();
        (
            status.code().unwrap_or(-1),
            String::from_utf8_lossy(&bytes).into_owned(),
        )
    }
}

/// Digests and Run IDs differ from one machine and run to the next.
fn placeholders(output: &str) -> String {
    let mut out = String::with_capacity(output.len());
    let mut rest = output;
    while !rest.is_empty() {
        if let Some(hex) = rest.strip_prefix("sha256:") {
            if hex.len() >= 64 && hex.as_bytes()[..64].iter().all(u8::is_ascii_hexdigit) {
                out.push_str("[DIGEST]");
                rest = &hex[64..];
                continue;
            }
        }
        if let Some(id) = rest.strip_prefix("run-") {
            let digits = id.bytes().take_while(u8::is_ascii_digit).count();
            let tail = &id[digits..];
            if digits > 0 && tail.starts_with('-') {
                let hex = tail[1..].bytes().take_while(u8::is_ascii_hexdigit).count();
                if hex > 0 {
                    out.push_str("[RUN]");
                    rest = &tail[1 + hex..];
                    continue;
                }
            }
            // A Run queued in PostgreSQL: `run-` and 32 hex digits.
            if id.bytes().take_while(u8::is_ascii_hexdigit).count() == 32 {
                out.push_str("[RUN]");
                rest = &id[32..];
                continue;
            }
        }
        let c = rest.chars().next().unwrap();
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Whether `actual` is what `expected` shows, line by line: `[..]` in a
/// line matches any text of that line, a line `...` any number of lines,
/// and a placeholder of `redactions` (`[ROOT]`, `[PORT]`, …) its value.
/// Paths are compared as printed (no `\` to `/` rewriting: JSON escapes).
fn matches(expected: &str, actual: &str, redactions: &[(&str, String)]) -> bool {
    let mut redactions: Vec<_> = redactions.iter().filter(|(_, v)| !v.is_empty()).collect();
    // The longest value first, so a path is not cut by a shorter one in it.
    redactions.sort_by_key(|(_, value)| std::cmp::Reverse(value.len()));
    let redact = |line: &str| {
        redactions
            .iter()
            .fold(line.to_string(), |line, (placeholder, value)| {
                line.replace(value.as_str(), placeholder)
            })
    };
    let actual: Vec<String> = actual.lines().map(redact).collect();
    let expected: Vec<&str> = expected.lines().collect();
    lines_match(&expected, &actual)
}

fn lines_match(expected: &[&str], actual: &[String]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((&"...", rest)) => (0..=actual.len()).any(|skip| lines_match(rest, &actual[skip..])),
        Some((line, rest)) => actual
            .split_first()
            .is_some_and(|(first, others)| line_matches(line, first) && lines_match(rest, others)),
    }
}

/// One line against a line of the guide, where each `[..]` matches any
/// text: the pieces between them in order, the first at the start and the
/// last at the end.
fn line_matches(expected: &str, actual: &str) -> bool {
    let pieces: Vec<&str> = expected.split("[..]").collect();
    let [first, middle @ .., last] = pieces.as_slice() else {
        return expected == actual;
    };
    let Some(mut rest) = actual.strip_prefix(first) else {
        return false;
    };
    for piece in middle {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

struct Outcome {
    ran: usize,
    skipped: Vec<String>,
    failures: Vec<String>,
}

fn run_chapter(chapter: &Path) -> Outcome {
    let name = chapter
        .strip_prefix(workspace())
        .unwrap()
        .display()
        .to_string();
    let text = std::fs::read_to_string(chapter).unwrap_or_else(|e| panic!("{name}: {e}"));
    let session = Session::new();
    let mut redactions = vec![("[ROOT]", session.root.path().to_string_lossy().into_owned())];
    let mut outcome = Outcome {
        ran: 0,
        skipped: Vec::new(),
        failures: Vec::new(),
    };
    for block in parse(&name, &text) {
        match block {
            Block::Skipped { line, reason } => {
                outcome.skipped.push(format!("{name}:{line}: {reason}"));
            }
            Block::File { path, text } => {
                let target = session.cwd().join(path);
                std::fs::create_dir_all(target.parent().unwrap()).unwrap();
                std::fs::write(target, text).unwrap();
            }
            Block::Fixture { name: fixture } => {
                if let Some((placeholder, value)) = session.fixture(&fixture) {
                    redactions.push((placeholder, value));
                }
            }
            Block::Console {
                line,
                steps,
                interrupt,
            } => {
                outcome.ran += 1;
                for (i, step) in steps.into_iter().enumerate() {
                    let interrupt = interrupt.filter(|_| i == 0);
                    let (status, output) = session.run(&step.command, interrupt);
                    let actual = placeholders(&output);
                    let mut problems = Vec::new();
                    if status != step.status {
                        problems.push(format!(
                            "exit status {status}, the guide says {}",
                            step.status
                        ));
                    }
                    if !matches(&step.expected, &actual, &redactions) {
                        problems.push(format!("--- the guide shows\n{}", step.expected));
                    }
                    if !problems.is_empty() {
                        outcome.failures.push(format!(
                            "{name}:{} (block at line {line}): `{}`\n{}\n--- printed\n{actual}",
                            step.line,
                            step.command,
                            problems.join("\n")
                        ));
                        // Later examples build on this one.
                        return outcome;
                    }
                }
            }
        }
    }
    outcome
}

#[test]
fn every_guide_example_runs_as_shown() {
    let started = Instant::now();
    let chapters = chapters();
    // Chapters are independent sessions; they run side by side.
    let handles: Vec<_> = chapters
        .into_iter()
        .map(|chapter| std::thread::spawn(move || run_chapter(&chapter)))
        .collect();
    let (mut ran, mut skipped, mut failures) = (0, Vec::new(), Vec::new());
    for handle in handles {
        let outcome = handle.join().expect("a chapter's examples ran");
        ran += outcome.ran;
        skipped.extend(outcome.skipped);
        failures.extend(outcome.failures);
    }
    eprintln!(
        "guide: {ran} examples ran, {} skipped, in {:.1?}",
        skipped.len(),
        started.elapsed()
    );
    for reason in &skipped {
        eprintln!("  skipped {reason}");
    }
    assert!(ran >= 20, "the guide runs its examples ({ran} ran)");
    assert!(
        failures.is_empty(),
        "{} guide examples differ from what jig prints:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn placeholders_cover_digests_and_run_ids() {
    let digest = format!("sha256:{}", "ab".repeat(32));
    assert_eq!(
        placeholders(&format!("{digest} run-1796314902523-002bd1ff70\tsucceeded")),
        "[DIGEST] [RUN]\tsucceeded"
    );
    assert_eq!(
        placeholders(&format!("\"run-{}\"", "0f".repeat(16))),
        "\"[RUN]\""
    );
    // Too short to be a digest, not a Run ID: left alone.
    assert_eq!(placeholders("sha256:abc run-x"), "sha256:abc run-x");
}

#[test]
fn output_matches_with_wildcards_line_runs_and_placeholders() {
    let root = [("[ROOT]", "/tmp/.tmpX".to_string())];
    assert!(matches("a\nb\n", "a\nb\n", &[]));
    assert!(!matches("a\nb\n", "a\nc\n", &[]));
    assert!(!matches("a\n", "a\nb\n", &[]));
    // `[..]`: any text of one line, at the start, between and at the end.
    assert!(matches("jig [..]\n", "jig 0.1.0\n", &[]));
    assert!(matches("[..]: x [..] y[..]\n", "A: x 1 y\n", &[]));
    assert!(!matches("jig [..]\n", "jig 0.1.0\nmore\n", &[]));
    assert!(!matches("a[..]b[..]b\n", "ab\n", &[]));
    assert!(matches("a[..]b[..]b\n", "abb\n", &[]));
    // `...`: any number of lines, none included.
    assert!(matches("a\n...\nz\n", "a\nb\nc\nz\n", &[]));
    assert!(matches("a\n...\nz\n", "a\nz\n", &[]));
    assert!(!matches("a\n...\nz\n", "a\nb\n", &[]));
    // A placeholder stands for its value wherever it is printed.
    assert!(matches("[ROOT]/demo: ok\n", "/tmp/.tmpX/demo: ok\n", &root));
    assert!(!matches(
        "[ROOT]/demo: ok\n",
        "/tmp/.tmpY/demo: ok\n",
        &root
    ));
}

#[test]
fn markup_is_parsed_as_documented() {
    let text = "<!-- guide: file flows/a.txt -->\n```text\nhi\n```\n\n<!-- guide: skip needs nix -->\n```sh\nnix run\n```\n\n```console\n$ jig run work\nJIG_RUN_TARGET_INVALID: [..]\n[exit status 1]\n$ echo a \\\n  b\na b\n```\n";
    let blocks = parse("t.md", text);
    assert!(
        matches!(&blocks[0], Block::File { path, text } if path == "flows/a.txt" && text == "hi\n")
    );
    assert!(matches!(&blocks[1], Block::Skipped { reason, .. } if reason == "needs nix"));
    let Block::Console { steps, .. } = &blocks[2] else {
        panic!("{blocks:?}")
    };
    assert_eq!(steps[0].status, 1);
    assert_eq!(steps[0].expected, "JIG_RUN_TARGET_INVALID: [..]\n");
    assert_eq!(steps[1].command, "echo a \\\n  b");
    assert_eq!(steps[1].status, 0);
}

#[test]
fn fixtures_and_interrupts_are_parsed_as_documented() {
    let text = "<!-- guide: fixture port -->\n<!-- guide: interrupt 2s -->\n```console\n$ sleep 9\n[exit status 130]\n```\n";
    let blocks = parse("t.md", text);
    assert!(matches!(&blocks[0], Block::Fixture { name } if name == "port"));
    let Block::Console { interrupt, .. } = &blocks[1] else {
        panic!("{blocks:?}")
    };
    assert_eq!(*interrupt, Some(Duration::from_secs(2)));
}

#[test]
#[should_panic(expected = "the fixtures are")]
fn an_unknown_fixture_is_refused() {
    parse("t.md", "<!-- guide: fixture nix -->\n");
}

#[test]
#[should_panic(expected = "must be a `console` block")]
fn an_unmarked_shell_block_is_refused() {
    parse("t.md", "```sh\njig review\n```\n");
}
