//! What a person reads on a terminal (docs/src/getting-started.md, On a terminal; seed 002 §8): colour
//! and layout for results, review text, failures and `jig runs`, and the
//! live status line of a pending Run on stderr.
//!
//! Everything here is presentation. It is used only when the stream it
//! writes to is a terminal; redirected stdout keeps the exact JSON (or
//! NDJSON) of the machine records and redirected stderr keeps
//! `CODE: message`. `NO_COLOR` (set, even empty) and `TERM=dumb` give plain,
//! unanimated output. Project-controlled text is always escaped, so it
//! cannot move the cursor or recolour what follows.

use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use flow::json::Value;

pub mod review;

/// The themes `JIG_THEME` selects (docs/src/reference.md, Environment); the first is the default.
pub const THEMES: [&str; 3] = ["one-dark", "one-light", "macchiato"];
/// The live line appears only once a Run has been pending this long, so a
/// quick Run never flickers.
pub const LIVE_AFTER: Duration = Duration::from_millis(500);
/// How often the live line is redrawn in place.
pub const LIVE_PERIOD: Duration = Duration::from_millis(100);
/// Without animation (`NO_COLOR`, `TERM=dumb`), the first status line
/// after this long, then one each [`PLAIN_PERIOD`].
pub const PLAIN_FIRST: Duration = Duration::from_secs(1);
pub const PLAIN_PERIOD: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Theme {
    OneDark,
    OneLight,
    Macchiato,
}

impl Theme {
    /// The theme a `JIG_THEME` value names.
    pub fn parse(name: &str) -> Option<Theme> {
        match name {
            "one-dark" => Some(Theme::OneDark),
            "one-light" => Some(Theme::OneLight),
            "macchiato" => Some(Theme::Macchiato),
            _ => None,
        }
    }

    /// 24-bit colour of each role.
    fn rgb(self, role: Role) -> (u8, u8, u8) {
        use Role::*;
        match self {
            Theme::OneDark => match role {
                Success | Added | Str => (0x98, 0xc3, 0x79),
                Failure | Removed => (0xe0, 0x6c, 0x75),
                Warning | Changed => (0xe5, 0xc0, 0x7b),
                Key | Heading => (0x61, 0xaf, 0xef),
                Number => (0xd1, 0x9a, 0x66),
                Literal => (0xc6, 0x78, 0xdd),
                Muted => (0x7f, 0x84, 0x8e),
            },
            Theme::OneLight => match role {
                Success | Added | Str => (0x50, 0xa1, 0x4f),
                Failure | Removed => (0xe4, 0x56, 0x49),
                Warning | Changed => (0xc1, 0x84, 0x01),
                Key | Heading => (0x40, 0x78, 0xf2),
                Number => (0x98, 0x68, 0x01),
                Literal => (0xa6, 0x26, 0xa4),
                Muted => (0x69, 0x6c, 0x77),
            },
            Theme::Macchiato => match role {
                Success | Added | Str => (0xa6, 0xda, 0x95),
                Failure | Removed => (0xed, 0x87, 0x96),
                Warning | Changed => (0xee, 0xd4, 0x9f),
                Key | Heading => (0x8a, 0xad, 0xf4),
                Number => (0xf5, 0xa9, 0x7f),
                Literal => (0xc6, 0xa0, 0xf6),
                Muted => (0x93, 0x9a, 0xb7),
            },
        }
    }
}

/// What a piece of text is, for colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Success,
    Failure,
    Warning,
    Added,
    Changed,
    Removed,
    Key,
    Str,
    Number,
    Literal,
    Muted,
    Heading,
}

/// How output to one stream looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    pub color: bool,
    pub animate: bool,
    pub theme: Theme,
}

impl Style {
    /// No colour, no animation.
    pub const PLAIN: Style = Style {
        color: false,
        animate: false,
        theme: Theme::OneDark,
    };

    /// The style for a terminal stream under this environment.
    pub fn from_env(
        no_color: Option<&std::ffi::OsStr>,
        term: Option<&str>,
        theme: Option<&str>,
    ) -> Style {
        let theme = theme.and_then(Theme::parse).unwrap_or(Theme::OneDark);
        if no_color.is_some() || term == Some("dumb") {
            return Style {
                theme,
                ..Style::PLAIN
            };
        }
        Style {
            color: true,
            animate: true,
            theme,
        }
    }

    /// The style for a terminal stream under the process environment.
    pub fn terminal() -> Style {
        let no_color = std::env::var_os("NO_COLOR");
        let term = std::env::var("TERM").ok();
        let theme = std::env::var("JIG_THEME").ok();
        Style::from_env(no_color.as_deref(), term.as_deref(), theme.as_deref())
    }

    /// Paint `text` in `role`'s colour (bold for headings), or leave it.
    pub fn paint(&self, role: Role, text: &str) -> String {
        if !self.color {
            return text.to_string();
        }
        let (r, g, b) = self.theme.rgb(role);
        let bold = if role == Role::Heading { "1;" } else { "" };
        format!("\x1b[{bold}38;2;{r};{g};{b}m{text}\x1b[0m")
    }
}

/// The warning for a `JIG_THEME` that names no theme, if it does not.
pub fn theme_warning() -> Option<String> {
    let theme = std::env::var("JIG_THEME").ok()?;
    if Theme::parse(&theme).is_some() {
        return None;
    }
    Some(format!(
        "JIG_THEME {} is not one of {}; using one-dark",
        escape(&theme),
        THEMES.join(", ")
    ))
}

/// Escape project-controlled text for a terminal: C0 and C1 controls, DEL
/// and the Unicode bidirectional and invisible format characters become
/// `\u{…}`; everything else is kept.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if needs_escape(c) {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        } else {
            out.push(c);
        }
    }
    out
}

/// [`escape`] for multi-line text: each line escaped, the line breaks kept.
pub fn escape_lines(text: &str) -> String {
    text.split('\n').map(escape).collect::<Vec<_>>().join("\n")
}

fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c as u32, 0x200b..=0x200f | 0x2028..=0x202e | 0x2060..=0x2069 | 0xfeff)
}

/// A JSON string literal whose every character a terminal would act on is
/// a `\u` escape, so the literal is still valid JSON.
fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if needs_escape(c) => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A JSON/1 value pretty-printed (two-space indent, keys in canonical order)
/// and coloured by kind.
pub fn render_json(value: &Value, style: &Style) -> String {
    let mut out = String::new();
    write_json(&mut out, value, style, 0);
    out
}

fn write_json(out: &mut String, value: &Value, style: &Style, depth: usize) {
    let indent = |n: usize| "  ".repeat(n);
    match value {
        Value::Null | Value::Bool(_) => {
            out.push_str(&style.paint(Role::Literal, &value.to_string()))
        }
        Value::Number(n) => out.push_str(&style.paint(Role::Number, &n.to_string())),
        Value::String(s) => out.push_str(&style.paint(Role::Str, &json_string(s))),
        Value::Array(items) if items.is_empty() => out.push_str("[]"),
        Value::Array(items) => {
            out.push_str("[\n");
            for (i, item) in items.iter().enumerate() {
                out.push_str(&indent(depth + 1));
                write_json(out, item, style, depth + 1);
                out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
            }
            out.push_str(&indent(depth));
            out.push(']');
        }
        Value::Object(map) if map.is_empty() => out.push_str("{}"),
        Value::Object(map) => {
            out.push_str("{\n");
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_by(|a, b| flow::json::compare_utf16(a, b));
            for (i, key) in keys.iter().enumerate() {
                out.push_str(&indent(depth + 1));
                out.push_str(&style.paint(Role::Key, &json_string(key)));
                out.push_str(": ");
                write_json(out, &map[*key], style, depth + 1);
                out.push_str(if i + 1 < keys.len() { ",\n" } else { "\n" });
            }
            out.push_str(&indent(depth));
            out.push('}');
        }
    }
}

/// What to do next after a failure with this code, when there is something.
pub fn next_action(code: &str) -> Option<&'static str> {
    Some(match code {
        "REVIEW_REQUIRED" | "ADMISSION_MISSING" | "STALE_PLAN" => {
            "run jig review, check what changed, and approve it"
        }
        "JIG_APPROVAL_REQUIRED" => "run jig review in a terminal, or rerun with --yes",
        "JIG_CHANGES_DECLINED" => "edit the project and run jig review again",
        "INVALID_CANDIDATE" | "LOCK_MISMATCH" => {
            "fix the file named above and run jig review again"
        }
        "INVALID_INPUT" | "JIG_RUN_INPUT_INVALID" => {
            "check the input against the target's input.schema.json (jig package inspect)"
        }
        "INVALID_RESULT" => "the Flow returned a result its package does not declare; fix the Flow",
        "DEADLINE_EXCEEDED" => "give the Run more time with --timeout (at most 24h)",
        "JIG_RUN_TIMEOUT_INVALID" => "use a positive whole number with ms, s, m or h, like 90s",
        "UNAVAILABLE" => "run jig doctor to see what this host can run, then jig review",
        "PROJECT_NOT_FOUND" => "run jig in a project directory (one with jig.ts), or pass -C DIR",
        "PROJECT_BUSY" => "another jig holds this project; wait for it to finish",
        "JIG_RUN_TARGET_INVALID" => "name an admitted target: flow:<path> or binding:<id>",
        "JIG_RUN_FILES_INVALID" => "check the --attach, --select and --out options",
        "JIG_OUTPUT_EXISTS" => "choose an --out directory that does not exist yet",
        "EXECUTION_FAILED" | "PROTOCOL_ERROR" | "CHANNEL_LOST" => {
            "read the component's stderr above, fix the Flow, review and run again"
        }
        "COORDINATOR_LOST" => {
            "the earlier jig stopped during this Run; its work is not repeated. See jig runs"
        }
        "JIG_CLEANUP_FAILED" => "check the host's cgroups and temporary files (jig doctor)",
        "JIG_DELIVERY_FAILED" => "the Run ended but its packet was not written; see the code",
        "RESOURCE_EXHAUSTED" => "the Run asked for more than one Run tree may hold at once",
        "SUBMISSION_CONFLICT" => "use a new --key, or repeat the exact same submission",
        _ => return None,
    })
}

/// What to do next after a Run's failure: [`next_action`] of its code,
/// except that a Run whose deadline passed while no worker ever claimed
/// it (`details.queue` `"unclaimed"`) needs a worker, not more time; a
/// failure a child Flow caused (`details.child`) points at that child; and
/// a component that failed without a word on stderr is not sent to read it.
fn terminal_next_action(code: &str, terminal: &Value) -> Option<String> {
    let details = terminal.get("details").filter(|d| !d.is_null());
    let unclaimed = details.and_then(|d| d.get("queue")).and_then(Value::as_str);
    if let ("DEADLINE_EXCEEDED", Some("unclaimed")) = (code, unclaimed) {
        return Some(
            "start a jig worker on the daemon's database (jig worker --database URL), then submit again".into(),
        );
    }
    if let Some(child) = details
        .and_then(|d| d.get("child"))
        .filter(|c| c.is_object())
    {
        let text = |key: &str| escape(child.get(key).and_then(Value::as_str).unwrap_or(""));
        return Some(format!(
            "the child Flow {} (slot {}) failed, not this one: read its failure below, fix it, review and run again",
            text("target"),
            json_string(child.get("slot").and_then(Value::as_str).unwrap_or(""))
        ));
    }
    let stderr = terminal
        .pointer("/diagnostics/stderr")
        .and_then(Value::as_str)
        .unwrap_or("");
    let stack = details
        .and_then(|d| d.pointer("/exception/stack"))
        .and_then(Value::as_array)
        .is_some_and(|frames| !frames.is_empty());
    match code {
        "EXECUTION_FAILED" | "PROTOCOL_ERROR" | "CHANNEL_LOST" if stderr.is_empty() && stack => {
            Some("fix the Flow where the stack below points, review and run again".into())
        }
        "EXECUTION_FAILED" | "PROTOCOL_ERROR" | "CHANNEL_LOST" if stderr.is_empty() => {
            Some("the component wrote nothing to stderr; fix the Flow, review and run again".into())
        }
        _ => next_action(code).map(str::to_string),
    }
}

/// The frames of a failure's stack (innermost first) for a person.
const MAX_SHOWN_FRAMES: usize = 16;
/// How deep a chain of failed children is drawn.
const MAX_SHOWN_CHILDREN: usize = 8;

/// A failure's details for a person, each line after `indent`: a handler
/// error's stack, a failed child (its slot, target, code, message, own
/// details and stderr, and so on down), then whatever else as JSON.
fn write_details(out: &mut String, details: &Value, indent: &str, depth: usize, style: &Style) {
    let mut rest = details.clone();
    if let Some(map) = rest.as_object_mut() {
        let exception = map.remove("exception");
        if let Some(stack) = exception
            .as_ref()
            .and_then(|e| e.get("stack"))
            .and_then(Value::as_array)
        {
            for (i, frame) in stack.iter().take(MAX_SHOWN_FRAMES).enumerate() {
                let label = if i == 0 { "stack:" } else { "      " };
                let _ = writeln!(
                    out,
                    "{indent}{} {}",
                    style.paint(Role::Muted, label),
                    escape(frame.as_str().unwrap_or(""))
                );
            }
            let omitted = exception
                .as_ref()
                .and_then(|e| e.get("framesOmitted"))
                .and_then(Value::as_u64)
                .unwrap_or(0)
                + stack.len().saturating_sub(MAX_SHOWN_FRAMES) as u64;
            if omitted > 0 {
                let _ = writeln!(
                    out,
                    "{indent}       {}",
                    style.paint(Role::Muted, &format!("… {omitted} more frames"))
                );
            }
        } else if let Some(exception) = exception {
            map.insert("exception".into(), exception);
        }
        let child = map.remove("child").filter(|c| c.is_object());
        if let Some(child) = child {
            write_child(out, &child, indent, depth, style);
        }
    }
    if rest.as_object().is_some_and(|m| m.is_empty()) {
        return;
    }
    let _ = writeln!(
        out,
        "{indent}{} {}",
        style.paint(Role::Muted, "details:"),
        render_json(&rest, style).replace('\n', &format!("\n{indent}"))
    );
}

/// A failed child Flow, as its parent's terminal carries it.
fn write_child(out: &mut String, child: &Value, indent: &str, depth: usize, style: &Style) {
    let text = |key: &str| child.get(key).and_then(Value::as_str).unwrap_or("");
    let _ = writeln!(
        out,
        "{indent}{} slot {} · {} · {}",
        style.paint(Role::Muted, "child:"),
        json_string(text("slot")),
        escape(text("target")),
        style.paint(Role::Failure, &escape(text("code")))
    );
    let inner = format!("{indent}  ");
    let _ = writeln!(out, "{inner}{}", escape(text("message")));
    if depth + 1 >= MAX_SHOWN_CHILDREN {
        return;
    }
    if let Some(details) = child.get("details").filter(|d| !d.is_null()) {
        write_details(out, details, &inner, depth + 1, style);
    }
    let stderr = text("stderr");
    if !stderr.is_empty() {
        let truncated = child
            .get("stderrTruncated")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let label = if truncated {
            "stderr (its end):"
        } else {
            "stderr:"
        };
        let _ = writeln!(out, "{inner}{}", style.paint(Role::Muted, label));
        for line in stderr.strip_suffix('\n').unwrap_or(stderr).split('\n') {
            let _ = writeln!(out, "{inner}  {}", escape(line));
        }
    }
}

/// A failure for a person: the explanation, the next action, then the code.
pub fn render_failure(code: &str, message: &str, style: &Style) -> String {
    render_failure_next(code, message, next_action(code), style)
}

fn render_failure_next(code: &str, message: &str, next: Option<&str>, style: &Style) -> String {
    let mut out = format!("{} {}\n", style.paint(Role::Failure, "✗"), escape(message));
    if let Some(next) = next {
        let _ = writeln!(out, "  {} {next}", style.paint(Role::Muted, "next:"));
    }
    let _ = write!(
        out,
        "  {} {}",
        style.paint(Role::Muted, "code:"),
        escape(code)
    );
    if super::explain::has_entry(code) {
        let _ = write!(
            out,
            " {}",
            style.paint(Role::Muted, &format!("(jig explain {code})"))
        );
    }
    out.push('\n');
    out
}

/// A Run's terminal for a person on stdout: the outcome and output, or the
/// failure; then the delivery.
pub fn render_terminal(terminal: &Value, style: &Style) -> String {
    let text = |key: &str| terminal.get(key).and_then(Value::as_str).unwrap_or("");
    let mut out = String::new();
    match text("status") {
        "succeeded" => {
            let _ = writeln!(
                out,
                "{} {}",
                style.paint(Role::Success, "✓ succeeded · outcome"),
                style.paint(Role::Heading, &escape(text("outcome")))
            );
            let _ = writeln!(
                out,
                "{}",
                render_json(terminal.get("output").unwrap_or(&Value::Null), style)
            );
        }
        status => {
            let code = text("code");
            let mut message = text("message").to_string();
            if status == "lost" {
                message = format!("the Run was lost: {message}");
            }
            let next = terminal_next_action(code, terminal);
            out.push_str(&render_failure_next(code, &message, next.as_deref(), style));
            if let Some(details) = terminal.get("details").filter(|d| !d.is_null()) {
                write_details(&mut out, details, "  ", 0, style);
            }
        }
    }
    if let Some(delivery) = terminal.get("delivery") {
        let destination = escape(delivery["destination"].as_str().unwrap_or(""));
        match delivery["status"].as_str() {
            Some("written") => {
                let _ = writeln!(
                    out,
                    "{} {destination} (files: {})",
                    style.paint(Role::Muted, "packet:"),
                    escape(delivery["source"].as_str().unwrap_or("none"))
                );
            }
            status => {
                let _ = writeln!(
                    out,
                    "{} no packet at {destination}: {} ({})",
                    style.paint(Role::Warning, "delivery"),
                    escape(status.unwrap_or("unknown")),
                    escape(delivery["code"].as_str().unwrap_or(""))
                );
            }
        }
    }
    out
}

/// The review text coloured: additions, changes and removals by their mark,
/// section headings bold. The text itself is already escaped by the plan.
pub fn paint_review(text: &str, style: &Style) -> String {
    if !style.color {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() * 2);
    for line in text.split_inclusive('\n') {
        let (body, newline) = match line.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (line, ""),
        };
        let role = if body.starts_with("  + ") {
            Some(Role::Added)
        } else if body.starts_with("  ~ ") {
            Some(Role::Changed)
        } else if body.starts_with("  - ") {
            Some(Role::Removed)
        } else if body.starts_with("      was ") {
            Some(Role::Muted)
        } else if !body.starts_with(' ') && body.ends_with(':') {
            Some(Role::Heading)
        } else {
            None
        };
        match role {
            Some(role) => out.push_str(&style.paint(role, body)),
            None => out.push_str(body),
        }
        out.push_str(newline);
    }
    out
}

/// One row of `jig runs` on a terminal.
pub struct RunRow {
    pub id: String,
    pub created_unix_ms: Option<u64>,
    pub status: String,
    /// The outcome a succeeded Run declared; empty for any other.
    pub outcome: String,
    pub target: String,
    pub duration_ms: Option<u64>,
    pub code: String,
}

/// `jig runs` as a table: time (UTC), status, outcome, target, duration,
/// Run ID.
pub fn runs_table(rows: &[RunRow], style: &Style) -> String {
    let header = [
        "TIME (UTC)",
        "STATUS",
        "OUTCOME",
        "TARGET",
        "DURATION",
        "RUN",
    ];
    let cells: Vec<[String; 6]> = rows
        .iter()
        .map(|r| {
            let status = if r.code.is_empty() {
                r.status.clone()
            } else {
                format!("{} {}", r.status, r.code)
            };
            [
                r.created_unix_ms.map(utc_time).unwrap_or_default(),
                escape(&status),
                match r.outcome.is_empty() {
                    true => "-".into(),
                    false => escape(&r.outcome),
                },
                escape(&r.target),
                r.duration_ms
                    .map(duration_text)
                    .unwrap_or_else(|| "-".into()),
                escape(&r.id),
            ]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &cells {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let pad = |text: &str, width: usize| {
        let n = text.chars().count();
        format!("{text}{}", " ".repeat(width.saturating_sub(n)))
    };
    let mut out = String::new();
    let head: Vec<String> = header.iter().zip(widths).map(|(h, w)| pad(h, w)).collect();
    let _ = writeln!(
        out,
        "{}",
        style.paint(Role::Heading, head.join("  ").trim_end())
    );
    for (row, record) in cells.iter().zip(rows) {
        let role = match record.status.as_str() {
            "succeeded" => Role::Success,
            "failed" => Role::Failure,
            "lost" => Role::Warning,
            _ => Role::Muted,
        };
        let mut line = Vec::new();
        for (i, (cell, width)) in row.iter().zip(widths).enumerate() {
            let padded = pad(cell, width);
            line.push(if i == 1 {
                style.paint(role, &padded)
            } else if i == 5 {
                style.paint(Role::Muted, &padded)
            } else {
                padded
            });
        }
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
    }
    out
}

/// `2026-12-01 16:18:16` for Unix milliseconds.
pub fn utc_time(unix_ms: u64) -> String {
    jig_engine::state::utc_text(unix_ms)
}

/// `2026-12-01T16:18:16.250Z` (RFC 3339, UTC) for Unix milliseconds.
pub fn rfc3339_time(unix_ms: u64) -> String {
    format!(
        "{}.{:03}Z",
        utc_time(unix_ms).replacen(' ', "T", 1),
        unix_ms % 1000
    )
}

/// One Run's record for a person (`jig runs show` on a terminal): the Run,
/// its target, status and outcome or code, its times in RFC 3339 and how
/// long it took, then the whole record indented.
pub fn render_record(record: &Value, style: &Style) -> String {
    let text = |p: &str| escape(record.pointer(p).and_then(Value::as_str).unwrap_or(""));
    let at = |key: &str| record.get(key).and_then(Value::as_u64);
    let label = |name: &str| style.paint(Role::Muted, &format!("{name:<10}"));
    let mut out = String::new();
    let _ = writeln!(out, "{} {}", style.paint(Role::Heading, "Run"), text("/id"));
    let _ = writeln!(out, "{} {}", label("target"), text("/target"));
    let status = match record.pointer("/terminal/status").and_then(Value::as_str) {
        None => style.paint(Role::Muted, "pending"),
        Some("succeeded") => format!(
            "{} · outcome {}",
            style.paint(Role::Success, "succeeded"),
            text("/terminal/outcome")
        ),
        Some(status) => {
            let role = match status {
                "failed" => Role::Failure,
                _ => Role::Warning,
            };
            format!(
                "{} {}",
                style.paint(role, &escape(status)),
                text("/terminal/code")
            )
        }
    };
    let _ = writeln!(out, "{} {status}", label("status"));
    if let Some(submitted) = at("submittedAtUnixMs") {
        let _ = writeln!(out, "{} {}", label("submitted"), rfc3339_time(submitted));
    }
    if let Some(settled) = at("settledAtUnixMs") {
        let took = at("submittedAtUnixMs")
            .map(|from| format!(" ({})", duration_text(settled.saturating_sub(from))))
            .unwrap_or_default();
        let _ = writeln!(out, "{} {}{took}", label("settled"), rfc3339_time(settled));
    }
    let _ = writeln!(out, "{}", render_json(record, style));
    out
}

/// `850ms`, `4.2s`, `3m05s`, `1h02m`.
pub fn duration_text(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{}.{}s", ms / 1000, ms % 1000 / 100)
    } else if ms < 3_600_000 {
        format!("{}m{:02}s", ms / 60_000, ms % 60_000 / 1000)
    } else {
        format!("{}h{:02}m", ms / 3_600_000, ms % 3_600_000 / 60_000)
    }
}

/// The final status line on stderr: execution status, outcome, delivery
/// and cleanup, each reported on its own, then the time and the Run ID.
pub fn final_line(
    terminal: &Value,
    cleanup_failed: bool,
    elapsed: Duration,
    style: &Style,
) -> String {
    let text = |p: &str| terminal.pointer(p).and_then(Value::as_str).unwrap_or("");
    let mut parts = Vec::new();
    let status = text("/status");
    let (mark, role) = match status {
        "succeeded" => ("✓", Role::Success),
        "failed" => ("✗", Role::Failure),
        _ => ("!", Role::Warning),
    };
    let mut execution = format!("execution {}", escape(status));
    if !text("/code").is_empty() {
        execution.push_str(&format!(" {}", escape(text("/code"))));
    }
    parts.push(style.paint(role, &format!("{mark} {execution}")));
    if status == "succeeded" {
        parts.push(format!("outcome {}", escape(text("/outcome"))));
    }
    if terminal.get("delivery").is_some() {
        let delivery = match text("/delivery/status") {
            "written" => format!("delivery written ({})", escape(text("/delivery/source"))),
            other => format!("delivery {}", escape(other)),
        };
        parts.push(delivery);
    }
    parts.push(if cleanup_failed {
        style.paint(Role::Failure, "cleanup failed")
    } else {
        "cleanup complete".into()
    });
    parts.push(style.paint(Role::Muted, &duration_text(elapsed.as_millis() as u64)));
    // The Run ID, for `jig runs show`: stdout's JSON carries it, but a
    // person reading a terminal would otherwise never see it.
    if !text("/runId").is_empty() {
        parts.push(style.paint(Role::Muted, &format!("run {}", escape(text("/runId")))));
    }
    format!("{}\n", parts.join(" · "))
}

/// The live status line of a pending Run, on a terminal stderr only.
pub struct LiveStatus {
    task: tokio::task::JoinHandle<()>,
    style: Style,
    shown: Arc<AtomicBool>,
    cancelling: Arc<AtomicBool>,
    started: tokio::time::Instant,
}

/// The status text: target, elapsed time, and what the Run waits on.
pub fn live_text(target: &str, elapsed: Duration, waiting: &[String], cancelling: bool) -> String {
    let secs = elapsed.as_secs_f64();
    let time = if secs < 60.0 {
        format!("{secs:.1}s")
    } else {
        duration_text(elapsed.as_millis() as u64)
    };
    let what = if cancelling {
        "cancelling… waiting for cleanup".to_string()
    } else if waiting.is_empty() {
        "running".to_string()
    } else {
        format!("waiting on {}", waiting.join(", "))
    };
    format!("{} · {time} · {what}", escape(target))
}

const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

impl LiveStatus {
    /// Start it when stderr is a terminal; `None` otherwise. Animated in
    /// place, or (`NO_COLOR`, `TERM=dumb`) one plain line after
    /// [`PLAIN_FIRST`] and then each [`PLAIN_PERIOD`].
    /// `waiting` says, at each redraw, what the Run waits on (nothing:
    /// it is running).
    pub fn start(
        waiting: impl Fn() -> Vec<String> + Send + 'static,
        target: String,
    ) -> Option<LiveStatus> {
        if !std::io::stderr().is_terminal() {
            return None;
        }
        let style = Style::terminal();
        let shown = Arc::new(AtomicBool::new(false));
        let cancelling = Arc::new(AtomicBool::new(false));
        let started = tokio::time::Instant::now();
        let (flag, stop) = (shown.clone(), cancelling.clone());
        let task = tokio::spawn(async move {
            let period = if style.animate {
                LIVE_PERIOD
            } else {
                PLAIN_PERIOD
            };
            let first = if style.animate {
                LIVE_AFTER
            } else {
                PLAIN_FIRST
            };
            let mut tick = tokio::time::interval_at(started + first, period);
            let mut frame = 0usize;
            loop {
                tick.tick().await;
                let waiting = waiting();
                let cancelling = stop.load(Ordering::SeqCst);
                let text = live_text(&target, started.elapsed(), &waiting, cancelling);
                let mut err = std::io::stderr().lock();
                if style.animate {
                    let spin = style.paint(Role::Key, SPINNER[frame % SPINNER.len()]);
                    frame += 1;
                    let _ = write!(err, "\r\x1b[2K{spin} {text}");
                } else {
                    let _ = writeln!(err, "{text}");
                }
                let _ = err.flush();
                flag.store(true, Ordering::SeqCst);
            }
        });
        Some(LiveStatus {
            task,
            style,
            shown,
            cancelling,
            started,
        })
    }

    /// The command was asked to stop: the line says so until cleanup is
    /// confirmed (a cancellation request is not a cleanup acknowledgement).
    pub fn cancelling(&self) {
        self.cancelling.store(true, Ordering::SeqCst);
        if self.style.animate {
            let mut err = std::io::stderr().lock();
            let _ = write!(
                err,
                "\r\x1b[2K{}",
                self.style.paint(Role::Warning, "cancelling…")
            );
            let _ = err.flush();
            self.shown.store(true, Ordering::SeqCst);
        } else {
            eprintln!("cancelling…");
        }
    }

    /// Stop and erase the line; returns how long the Run was pending.
    pub fn stop(self) -> Duration {
        self.task.abort();
        if self.style.animate && self.shown.load(Ordering::SeqCst) {
            eprint!("\r\x1b[2K");
        }
        self.started.elapsed()
    }
}

#[cfg(test)]
mod tests;
