//! What review shows of the bytes a person approves, after the review
//! text: each changed package's files and the unified diff of its text
//! files, and on a fresh clone which packages match the committed
//! `jig.lock`. Every name and diff line is project-controlled and is
//! escaped here.

use std::fmt::Write as _;

use flow::json::ascii_quote;
use jig_engine::review::files::{Blob, LockMatch, PackageFiles};

use super::{escape, Role, Style};

/// The files section: a list per package, then the diffs. `added_diffs`:
/// also show the whole text of the files of packages nothing admitted
/// before (`--diff`); otherwise those are listed by size.
pub fn review_files(
    packages: &[PackageFiles],
    lock: Option<&[(String, LockMatch)]>,
    added_diffs: bool,
    style: &Style,
) -> String {
    let mut out = String::new();
    if let Some(lock) = lock.filter(|l| !l.is_empty()) {
        let _ = writeln!(out, "{}", style.paint(Role::Heading, "jig.lock:"));
        for (path, matched) in lock {
            let line = match matched {
                LockMatch::Matches => format!("    {} matches jig.lock", ascii_quote(path)),
                LockMatch::Differs { locked } => format!(
                    "  ~ {} differs from jig.lock ({})",
                    ascii_quote(path),
                    escape(locked)
                ),
                LockMatch::Unlocked => {
                    format!("  + {} is not in jig.lock", ascii_quote(path))
                }
            };
            let _ = writeln!(out, "{}", paint_mark(&line, style));
        }
    }
    if packages.is_empty() {
        return out;
    }
    let _ = writeln!(out, "{}", style.paint(Role::Heading, "Files:"));
    let mut diffs = String::new();
    for package in packages {
        let (mark, from) = match (&package.was, &package.now) {
            (None, _) => ('+', String::new()),
            (Some(_), None) => ('-', String::new()),
            (Some(was), Some(_)) => ('~', format!(" was {}", escape(was))),
        };
        let _ = writeln!(
            out,
            "{}",
            paint_mark(
                &format!("  {mark} {}{from}", ascii_quote(&package.path)),
                style
            )
        );
        if package.admitted_unreadable {
            let _ = writeln!(
                out,
                "      {}",
                style.paint(
                    Role::Warning,
                    "the admitted files cannot be read from the store; every file is shown as added"
                )
            );
        }
        if package.now.is_none() {
            continue;
        }
        for file in &package.files {
            let _ = writeln!(out, "{}", paint_mark(&file_line(file), style));
            let shows_diff = package.was.is_some() || added_diffs;
            if let (Some(diff), true) = (&file.diff, shows_diff) {
                diffs.push_str(&paint_diff(&diff.text, style));
                if diff.cut > 0 {
                    let _ = writeln!(
                        diffs,
                        "{}",
                        style.paint(
                            Role::Muted,
                            &format!("... {} more lines of this diff not shown", diff.cut)
                        )
                    );
                }
            }
        }
    }
    out.push_str(&diffs);
    out
}

/// `~ flow.ts 412 -> 431 bytes`, `+ data.bin 20 bytes, binary sha256:…`.
fn file_line(file: &jig_engine::review::files::FileChange) -> String {
    let size = |b: &Blob| format!("{} bytes", b.bytes);
    let name = ascii_quote(&file.path);
    let (mark, sizes) = match (&file.was, &file.now) {
        (None, Some(now)) => ('+', size(now)),
        (Some(was), None) => ('-', size(was)),
        (Some(was), Some(now)) => ('~', format!("{} -> {}", was.bytes, size(now))),
        (None, None) => (' ', String::new()),
    };
    let mut line = format!("      {mark} {name} {sizes}");
    if let (None, Some(now)) = (&file.diff, &file.now) {
        // Not shown as text (binary, or past the bound): its digest says
        // which bytes are approved.
        let _ = write!(line, ", not shown as text, {}", escape(&now.digest));
    }
    line
}

fn paint_mark(line: &str, style: &Style) -> String {
    let trimmed = line.trim_start();
    let role = match trimmed.chars().next() {
        Some('+') => Role::Added,
        Some('~') => Role::Changed,
        Some('-') => Role::Removed,
        _ => return line.to_string(),
    };
    style.paint(role, line)
}

/// A unified diff, each line escaped (tabs kept) and coloured by its mark.
fn paint_diff(diff: &str, style: &Style) -> String {
    let mut out = String::with_capacity(diff.len());
    for line in diff.split_inclusive('\n') {
        let body = line.strip_suffix('\n').unwrap_or(line);
        let shown: String = body.split('\t').map(escape).collect::<Vec<_>>().join("\t");
        let role = if body.starts_with("+++") || body.starts_with("---") {
            Some(Role::Heading)
        } else if body.starts_with("@@") {
            Some(Role::Muted)
        } else if body.starts_with('+') {
            Some(Role::Added)
        } else if body.starts_with('-') {
            Some(Role::Removed)
        } else {
            None
        };
        match role {
            Some(role) => out.push_str(&style.paint(role, &shown)),
            None => out.push_str(&shown),
        }
        out.push('\n');
    }
    out
}
