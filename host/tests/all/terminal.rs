//! What a person sees on a terminal: the live status line of a pending Run
//! on a real pseudo-terminal stderr, readable results on a terminal stdout,
//! plain output under `NO_COLOR` and `TERM=dumb`, the themes, and that none
//! of it reaches a redirected stream. Completions and the manual page.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::Stdio;

use crate::support::*;

/// A Flow that stays pending long enough for the live line to be drawn.
fn slow_project() -> tempfile::TempDir {
    let dir = project(&[
        ("flows/slow/FLOW.md", "---\nname: slow\ndescription: Sleeps.\n---\n"),
        (
            "flows/slow/flow.py",
            "import asyncio\nfrom jiggy.flow import handle\n\nasync def run(ctx):\n    await asyncio.sleep(float(ctx.input))\n    return {\"outcome\": \"done\", \"output\": {\"slept\": ctx.input}}\n\nhandle(run)\n",
        ),
    ]);
    review(dir.path());
    dir
}

/// What one `jig` command wrote: stdout, and the pseudo-terminal's bytes.
struct Seen {
    status: i32,
    stdout: String,
    tty: String,
}

impl std::fmt::Debug for Seen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "status {}\n--- stdout\n{:?}\n--- tty\n{:?}",
            self.status, self.stdout, self.tty
        )
    }
}

/// Which of the command's streams are the pseudo-terminal.
#[derive(Clone, Copy)]
enum On {
    Stderr,
    Both,
}

/// Run `jig args` with stderr (and with `On::Both` stdout) on a fresh
/// pseudo-terminal, the terminal settings `env`, and with `interrupt` a
/// SIGINT once the Run's Flow runs.
fn on_tty(dir: &Path, args: &[&str], env: &[(&str, &str)], on: On, interrupt: bool) -> Seen {
    let pty = nix::pty::openpty(None, None).expect("a pseudo-terminal");
    let slave: OwnedFd = pty.slave;
    let mut command = jig(dir);
    command.env_remove("NO_COLOR").env_remove("JIG_THEME");
    for (key, value) in env {
        command.env(key, value);
    }
    command.args(args).stdin(Stdio::null());
    command.stderr(Stdio::from(slave.try_clone().unwrap()));
    match on {
        On::Stderr => command.stdout(Stdio::piped()),
        On::Both => command.stdout(Stdio::from(slave.try_clone().unwrap())),
    };
    let mut child = command.spawn().expect("jig starts");
    drop(slave);
    drop(command);
    let mut master = std::fs::File::from(pty.master);
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let mut buf = [0u8; 4096];
        // EIO once every slave descriptor is closed: the command is done.
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            bytes.extend_from_slice(&buf[..n]);
        }
        bytes
    });
    if interrupt {
        // The Flow's envelope names the project: by then the Run is
        // recorded and a SIGINT cancels it.
        let started = std::time::Instant::now();
        while processes_mentioning(&dir.to_string_lossy()).is_empty() {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(30),
                "the Flow never started"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGINT,
        )
        .unwrap();
    }
    let mut stdout = String::new();
    if let Some(mut out) = child.stdout.take() {
        out.read_to_string(&mut stdout).unwrap();
    }
    let status = child.wait().unwrap().code().unwrap_or(-1);
    let tty = String::from_utf8_lossy(&reader.join().unwrap()).into_owned();
    Seen {
        status,
        stdout,
        tty,
    }
}

const COLOR: [(&str, &str); 1] = [("TERM", "xterm-256color")];

#[test]
fn the_live_line_appears_is_replaced_and_is_erased_before_the_final_line() {
    let dir = slow_project();
    let seen = on_tty(
        dir.path(),
        &["run", "flow:flows/slow", "--input", "1.5"],
        &COLOR,
        On::Stderr,
        false,
    );
    assert_eq!(seen.status, 0, "{seen:?}");
    // Redirected stdout is the exact canonical JSON line, without ANSI.
    let terminal: serde_json::Value = serde_json::from_str(seen.stdout.trim_end()).unwrap();
    assert_eq!(seen.stdout, format!("{}\n", terminal), "{seen:?}");
    assert!(!seen.stdout.contains('\u{1b}'));
    assert_eq!(terminal["output"], serde_json::json!({"slept": 1.5}));
    // The line is drawn in place several times: one status, rewritten.
    let draws = seen.tty.matches("\r\x1b[2K").count();
    assert!(draws >= 3, "{seen:?}");
    assert!(
        seen.tty.contains("flow:flows/slow · 1."),
        "the line names the target and the elapsed time: {seen:?}"
    );
    assert!(seen.tty.contains(" · running"), "{seen:?}");
    // Erased, then the final line: execution, outcome and cleanup apart.
    let (_, after) = seen.tty.rsplit_once("\r\x1b[2K").unwrap();
    let final_line = after.replace("\r\n", "\n");
    assert!(
        final_line.contains("✓ execution succeeded")
            && final_line.contains(" · outcome done · cleanup complete · "),
        "{final_line:?}"
    );
    assert!(!final_line.contains("running"), "{final_line:?}");
}

#[test]
fn a_redirected_stderr_never_shows_the_live_line() {
    let dir = slow_project();
    let run = output(
        jig(dir.path())
            .env_remove("NO_COLOR")
            .env("TERM", "xterm-256color")
            .args(["run", "flow:flows/slow", "--input", "1.2"])
            .output()
            .unwrap(),
    );
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(run.stderr, "", "{run:?}");
    assert!(!run.stdout.contains('\u{1b}'), "{run:?}");
}

#[test]
fn no_color_and_dumb_terminals_are_plain_and_unanimated() {
    let dir = slow_project();
    for env in [
        [("NO_COLOR", ""), ("TERM", "xterm")],
        [("TERM", "dumb"), ("LANG", "C.UTF-8")],
    ] {
        let seen = on_tty(
            dir.path(),
            &["run", "flow:flows/slow", "--input", "1.2"],
            &env,
            On::Both,
            false,
        );
        assert_eq!(seen.status, 0, "{seen:?}");
        assert!(!seen.tty.contains('\u{1b}'), "no escape at all: {seen:?}");
        assert!(!seen.tty.contains("\r\x1b"), "{seen:?}");
        // Readable result on the terminal stdout, then the final line.
        let text = seen.tty.replace("\r\n", "\n");
        assert!(
            text.contains("✓ succeeded · outcome done\n{\n  \"slept\": 1.2\n}\n"),
            "{text:?}"
        );
        assert!(text.contains("✓ execution succeeded · outcome done · cleanup complete"));
    }
}

#[test]
fn each_theme_colours_the_final_line() {
    let dir = slow_project();
    for (theme, green) in [
        ("one-dark", "38;2;152;195;121m"),
        ("one-light", "38;2;80;161;79m"),
        ("macchiato", "38;2;166;218;149m"),
    ] {
        let seen = on_tty(
            dir.path(),
            &["run", "flow:flows/slow", "--input", "0"],
            &[("TERM", "xterm-256color"), ("JIG_THEME", theme)],
            On::Stderr,
            false,
        );
        assert_eq!(seen.status, 0, "{seen:?}");
        assert!(
            seen.tty
                .contains(&format!("\x1b[{green}✓ execution succeeded")),
            "{theme}: {seen:?}"
        );
    }
    let seen = on_tty(
        dir.path(),
        &["run", "flow:flows/slow", "--input", "0"],
        &[("TERM", "xterm-256color"), ("JIG_THEME", "solarized")],
        On::Stderr,
        false,
    );
    assert!(
        seen.tty.contains(
            "JIG_THEME solarized is not one of one-dark, one-light, macchiato; using one-dark"
        ),
        "{seen:?}"
    );
}

#[test]
fn ctrl_c_says_cancelling_until_cleanup_is_confirmed() {
    let dir = slow_project();
    let seen = on_tty(
        dir.path(),
        &["run", "flow:flows/slow", "--input", "20"],
        &COLOR,
        On::Stderr,
        true,
    );
    assert_eq!(seen.status, 2, "{seen:?}");
    let cancelling = seen.tty.find("cancelling…").expect("cancelling shown");
    let done = seen
        .tty
        .find("execution failed CANCELLED")
        .expect("final line");
    assert!(cancelling < done, "{seen:?}");
    let final_part = &seen.tty[done..];
    assert!(final_part.contains("cleanup complete"), "{seen:?}");
    assert!(!seen.tty.contains("execution succeeded"), "{seen:?}");
    // A redirected stdout gets nothing (the reference's rule); the record keeps
    // the cancelled terminal.
    assert_eq!(seen.stdout, "", "{seen:?}");
    assert_eq!(newest_terminal(dir.path())["code"], "CANCELLED", "{seen:?}");
}

#[test]
fn failures_on_a_terminal_lead_with_the_explanation_and_next_action() {
    let dir = project(&[]);
    let seen = on_tty(
        dir.path(),
        &["run", "flow:flows/missing"],
        &[("TERM", "dumb")],
        On::Stderr,
        false,
    );
    assert_eq!(seen.status, 2, "{seen:?}");
    let text = seen.tty.replace("\r\n", "\n");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("✗ "), "{text:?}");
    assert!(lines[1].starts_with("  next: run jig review"), "{text:?}");
    assert!(lines[2].starts_with("  code: "), "{text:?}");
    // Redirected, the same failure is the `CODE: message` line.
    let run = run_jig(dir.path(), &["run", "flow:flows/missing"]);
    // The code line names where the guide explains it.
    let (code, hint) = lines[2]
        .trim_start_matches("  code: ")
        .split_once(' ')
        .unwrap();
    assert_eq!(hint, format!("(jig explain {code})"), "{text:?}");
    assert!(run.stderr.starts_with(&format!("{code}: ")), "{run:?}");
}

#[test]
fn runs_is_a_table_on_a_terminal_and_tab_separated_when_redirected() {
    let dir = slow_project();
    let run = run_jig(dir.path(), &["run", "flow:flows/slow", "--input", "0"]);
    assert_eq!(run.status, 0, "{run:?}");
    let id = run.json()["runId"].as_str().unwrap().to_string();
    let seen = on_tty(dir.path(), &["runs"], &[("TERM", "dumb")], On::Both, false);
    let text = seen.tty.replace("\r\n", "\n");
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    assert!(
        header.split_whitespace().collect::<Vec<_>>()
            == ["TIME", "(UTC)", "STATUS", "OUTCOME", "TARGET", "DURATION", "RUN"],
        "{text:?}"
    );
    let row = lines.next().unwrap();
    assert!(
        row.contains("succeeded  done") && row.contains("flow:flows/slow"),
        "{text:?}"
    );
    assert!(row.ends_with(&id), "{text:?}");
    let redirected = run_jig(dir.path(), &["runs"]);
    assert_eq!(
        redirected.stdout,
        format!("{id}\tsucceeded\tflow:flows/slow\t\n"),
        "{redirected:?}"
    );
}

#[test]
fn a_run_on_a_terminal_names_its_run_and_runs_show_reads_for_a_person() {
    let dir = slow_project();
    let seen = on_tty(
        dir.path(),
        &["run", "flow:flows/slow", "--input", "0"],
        &[("TERM", "dumb")],
        On::Stderr,
        false,
    );
    assert_eq!(seen.status, 0, "{seen:?}");
    // The redirected stdout is the terminal line it always was.
    let terminal: serde_json::Value = serde_json::from_str(seen.stdout.trim_end()).unwrap();
    assert_eq!(seen.stdout, format!("{terminal}\n"), "{seen:?}");
    let id = terminal["runId"].as_str().unwrap().to_string();
    let final_line = seen.tty.replace("\r\n", "\n");
    assert!(
        final_line.contains(" · cleanup complete · ")
            && final_line.ends_with(&format!(" · run {id}\n")),
        "the final line names the Run: {final_line:?}"
    );
    // `jig runs show` for a person: a summary with RFC 3339 times, then
    // the record indented.
    let shown = on_tty(
        dir.path(),
        &["runs", "show", &id],
        &[("TERM", "dumb")],
        On::Both,
        false,
    );
    assert_eq!(shown.status, 0, "{shown:?}");
    let text = shown.tty.replace("\r\n", "\n");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], format!("Run {id}"), "{text:?}");
    assert_eq!(lines[1], "target     flow:flows/slow", "{text:?}");
    assert_eq!(lines[2], "status     succeeded · outcome done", "{text:?}");
    let rfc3339 = |line: &str, label: &str| {
        let time = line
            .strip_prefix(label)
            .unwrap_or_else(|| panic!("{label}: {text:?}"));
        let time = time.split(' ').next().unwrap();
        let shape: String = time
            .chars()
            .map(|c| if c.is_ascii_digit() { '9' } else { c })
            .collect();
        assert_eq!(shape, "9999-99-99T99:99:99.999Z", "{text:?}");
    };
    rfc3339(lines[3], "submitted  ");
    rfc3339(lines[4], "settled    ");
    assert_eq!(lines[5], "{", "{text:?}");
    assert!(
        text.contains("\n  \"target\": \"flow:flows/slow\",\n"),
        "{text:?}"
    );
    // Redirected, the record stays one canonical JSON line.
    let redirected = run_jig(dir.path(), &["runs", "show", &id]);
    assert_eq!(redirected.stdout.lines().count(), 1, "{redirected:?}");
    assert_eq!(redirected.json()["id"], id.as_str(), "{redirected:?}");
}

#[test]
fn init_bare_on_a_terminal_says_where_and_what_next() {
    let dir = tempfile::tempdir().unwrap();
    let seen = on_tty(
        dir.path(),
        &["init", "--bare", "demo"],
        &[("TERM", "dumb")],
        On::Stderr,
        false,
    );
    assert_eq!(seen.status, 0, "{seen:?}");
    // stdout keeps the reference's exact line.
    assert_eq!(seen.stdout, "created bare Jig project\n", "{seen:?}");
    let text = seen.tty.replace("\r\n", "\n");
    assert_eq!(
        text,
        "  at ./demo\n  next: add a Flow as ./demo/flows/NAME/ (its FLOW.md and entrypoint), then cd ./demo && jig review\n",
        "{seen:?}"
    );
    assert!(dir.path().join("demo/jig.ts").is_file());
}

#[test]
fn completions_for_each_shell_and_the_manual_page() {
    let dir = tempfile::tempdir().unwrap();
    for (shell, marker) in [
        ("bash", "complete -F _jig"),
        ("zsh", "#compdef jig"),
        ("fish", "complete -c jig"),
    ] {
        let run = run_jig(dir.path(), &["completions", shell]);
        assert_eq!(run.status, 0, "{run:?}");
        assert!(run.stdout.contains(marker), "{shell}: {run:?}");
        assert!(run.stdout.contains("review"), "{shell}: {run:?}");
    }
    let run = run_jig(dir.path(), &["completions", "powershell"]);
    assert_eq!(run.status, 2, "{run:?}");
    let run = run_jig(dir.path(), &["manpage"]);
    assert_eq!(run.status, 0, "{run:?}");
    assert!(run.stdout.starts_with(".ie \\n(.g .ds Aq"), "{run:?}");
    assert!(run.stdout.contains(".TH jig 1"), "{run:?}");
    assert!(run.stdout.contains("review"), "{run:?}");
}

#[test]
fn review_on_a_terminal_is_coloured_by_change() {
    let dir = project(&[
        (
            "flows/slow/FLOW.md",
            "---\nname: slow\ndescription: Sleeps.\n---\n",
        ),
        (
            "flows/slow/flow.py",
            "from jiggy.flow import handle\n\nhandle(None)\n",
        ),
    ]);
    let seen = on_tty(
        dir.path(),
        &["review", "--yes"],
        &[("TERM", "xterm-256color"), ("JIG_THEME", "one-dark")],
        On::Both,
        false,
    );
    assert_eq!(seen.status, 0, "{seen:?}");
    assert!(
        seen.tty
            .contains("\x1b[38;2;152;195;121m  + \"flows/slow\" sha256:"),
        "{seen:?}"
    );
    assert!(
        seen.tty.contains("\x1b[1;38;2;97;175;239mTargets:"),
        "{seen:?}"
    );
    // Redirected, the review is the plain text it always was.
    let again = run_jig(dir.path(), &["review"]);
    assert_eq!(again.stdout, "project is ready\n");
    // An edit: on a terminal the changed file and its diff follow, coloured.
    std::fs::write(
        dir.path().join("flows/slow/flow.py"),
        "from jiggy.flow import handle\n\nhandle(None)  # edited\n",
    )
    .unwrap();
    let seen = on_tty(
        dir.path(),
        &["review", "--yes"],
        &[("TERM", "xterm-256color"), ("JIG_THEME", "one-dark")],
        On::Both,
        false,
    );
    assert_eq!(seen.status, 0, "{seen:?}");
    assert!(seen.tty.contains("Files:"), "{seen:?}");
    assert!(
        seen.tty.contains("      ~ \"flow.py\" 44 -> 54 bytes"),
        "{seen:?}"
    );
    assert!(
        seen.tty
            .contains("\x1b[38;2;152;195;121m+handle(None)  # edited"),
        "{seen:?}"
    );
}

/// Issue 50: on a terminal, a handler's error reads as its type and
/// message with its stack, and a Binding whose child failed names that
/// child, its code, its message and its stderr.
#[test]
fn a_raised_error_and_a_failed_child_read_for_a_person() {
    let dir = project(&[
        ("flows/order/FLOW.md", "---\nname: order\ndescription: Prices an order.\n---\n"),
        (
            "flows/order/flow.py",
            "from jiggy.flow import handle\n\n\nasync def run(ctx):\n    price = await ctx.run_child_flow(operation_id=\"price:1\", slot=\"pricing\", input=ctx.input)\n    return {\"outcome\": \"done\", \"output\": price[\"output\"]}\n\n\nhandle(run)\n",
        ),
        ("flows/price/FLOW.md", "---\nname: price\ndescription: Looks up a price.\n---\n"),
        (
            "flows/price/flow.py",
            "from jiggy.flow import handle\n\nPRICES = {\"tea\": 3}\n\n\nasync def run(ctx):\n    item = ctx.input[\"item\"]\n    print(\"pricing\", item)\n    if item == \"cake\":\n        return {\"outcome\": \"estimate\", \"output\": 5}\n    return {\"outcome\": \"done\", \"output\": PRICES[item]}\n\n\nhandle(run)\n",
        ),
        (
            "bindings/checkout.ts",
            "import { defineBinding } from \"@jigging/jig\";\n\nexport default defineBinding({\n  package: \"./flows/order\",\n  slots: { pricing: \"flow:./flows/price\" },\n});\n",
        ),
    ]);
    review(dir.path());

    let seen = on_tty(
        dir.path(),
        &["run", "flow:flows/price", "--input", "{\"item\": \"pie\"}"],
        &[("TERM", "dumb")],
        On::Both,
        false,
    );
    assert_eq!(seen.status, 1, "{seen:?}");
    let text = seen.tty.replace("\r\n", "\n");
    assert!(
        text.starts_with("component stderr:\npricing pie\nTraceback (most recent call last):\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "✗ KeyError: 'pie'\n  next: read the component's stderr above, fix the Flow, review and run again\n  code: EXECUTION_FAILED (jig explain EXECUTION_FAILED)\n  stack: run (flow.py:11)\n✗ execution failed EXECUTION_FAILED"
        ),
        "{text}"
    );

    let seen = on_tty(
        dir.path(),
        &["run", "binding:checkout", "--input", "{\"item\": \"cake\"}"],
        &[("TERM", "dumb")],
        On::Both,
        false,
    );
    assert_eq!(seen.status, 1, "{seen:?}");
    let text = seen.tty.replace("\r\n", "\n");
    assert!(
        text.starts_with(
            "✗ child slot \"pricing\" (flow:flows/price) failed with INVALID_RESULT: outcome \"estimate\" is neither done nor declared in FLOW.md\n  next: the child Flow flow:flows/price (slot \"pricing\") failed, not this one: read its failure below, fix it, review and run again\n  code: INVALID_RESULT (jig explain INVALID_RESULT)\n  child: slot \"pricing\" · flow:flows/price · INVALID_RESULT\n    outcome \"estimate\" is neither done nor declared in FLOW.md\n    stderr:\n      pricing cake\n✗ execution failed INVALID_RESULT"
        ),
        "{text}"
    );
}
