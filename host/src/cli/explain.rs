//! `jig explain CODE`: the guide's Troubleshooting entry for a code,
//! offline. The page is built into the binary, so the words are the ones
//! the guide shows and a test holds them to it; a failure shown on a
//! terminal names this command when there is an entry.

use std::collections::BTreeSet;

use super::{CliError, Code};

/// The guide's Troubleshooting page, as this `jig` was built with it.
const TROUBLESHOOTING: &str = include_str!("../../../docs/src/troubleshooting.md");

/// One row of a Troubleshooting table.
struct Entry {
    /// The section the row is in (`jig run` and `jig exec`, ...).
    section: String,
    /// The codes it names (a row may name several, or a pattern `AGENT_RUN_*`).
    codes: Vec<String>,
    /// The first cell as written, when it says more than its codes.
    when: String,
    means: String,
    todo: String,
}

fn entries() -> Vec<Entry> {
    let mut section = String::new();
    let mut out = Vec::new();
    for line in TROUBLESHOOTING.lines() {
        if let Some(title) = line
            .strip_prefix("## ")
            .or_else(|| line.strip_prefix("### "))
        {
            section = plain(title);
            continue;
        }
        if !line.starts_with("| `") {
            continue;
        }
        let cells: Vec<&str> = line
            .trim()
            .trim_start_matches('|')
            .trim_end_matches('|')
            .split(" | ")
            .map(str::trim)
            .collect();
        let [first, means, todo] = cells[..] else {
            continue;
        };
        let codes: Vec<String> = first
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|token| is_code(token))
            .map(str::to_string)
            .collect();
        if codes.is_empty() {
            continue;
        }
        out.push(Entry {
            section: section.clone(),
            codes,
            when: plain(first),
            means: plain(means),
            todo: plain(todo),
        });
    }
    out
}

/// `AGENT_RUN_*` or `JIG_RUN_TARGET_INVALID`: capitals, digits, `_`, and
/// a trailing `*` for a family.
fn is_code(token: &str) -> bool {
    let name = token.strip_suffix('*').unwrap_or(token);
    !name.is_empty()
        && name.starts_with(|c: char| c.is_ascii_uppercase())
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// Whether `entry` names `code` (itself, or a family it belongs to).
fn names(entry: &Entry, code: &str) -> bool {
    entry
        .codes
        .iter()
        .any(|named| match named.strip_suffix('*') {
            Some(family) => code.starts_with(family),
            None => named == code,
        })
}

/// Whether the guide has an entry for `code`.
pub fn has_entry(code: &str) -> bool {
    entries().iter().any(|entry| names(entry, code))
}

/// Markdown cell text as words: code spans and links unwrapped.
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after
            .find("](")
            .and_then(|close| Some((close, after[close..].find(')')? + close)))
        {
            Some((close, end)) => {
                out.push_str(&after[..close]);
                rest = &after[end + 1..];
            }
            None => {
                out.push('[');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out.replace('`', "")
}

pub fn explain(code: Option<&str>, list: bool) -> Result<u8, CliError> {
    let entries = entries();
    if list {
        let codes: BTreeSet<&str> = entries
            .iter()
            .flat_map(|e| e.codes.iter().map(String::as_str))
            .collect();
        for code in codes {
            outln!("{code}");
        }
        return Ok(0);
    }
    let Some(code) = code else {
        return Err(CliError::new(
            Code::Usage,
            "name a code (jig explain JIG_RUN_TARGET_INVALID), or --list for every code",
        ));
    };
    // Only a code's spelling can name an entry (a family's prefix with
    // anything after it cannot), so what is printed back is never escaped.
    let found: Vec<&Entry> = match is_code(code) && !code.ends_with('*') {
        true => entries.iter().filter(|e| names(e, code)).collect(),
        false => Vec::new(),
    };
    if found.is_empty() {
        return Err(CliError::new(
            Code::InvalidRequest,
            format!(
                "the guide has no Troubleshooting entry for {}; jig explain --list names every code it has",
                flow::json::ascii_quote(code)
            ),
        ));
    }
    for (i, entry) in found.iter().enumerate() {
        if i > 0 {
            outln!();
        }
        // A code an entry names is capitals, digits and `_`: nothing to escape.
        outln!("{code} ({})", entry.section);
        if entry.when != entry.codes.join(", ") {
            outln!("  when:  {}", entry.when);
        }
        outln!("  means: {}", entry.means);
        outln!("  do:    {}", entry.todo);
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_name_their_codes_families_and_words_without_markdown() {
        let entries = entries();
        let row = |code: &str| entries.iter().find(|e| names(e, code)).unwrap();
        let timeout = row("JIG_RUN_TIMEOUT_INVALID");
        assert_eq!(timeout.section, "jig run and jig exec");
        assert_eq!(timeout.todo, "write e.g. --timeout 90s");
        assert!(names(
            row("AGENT_RUN_OUTPUT_INVALID"),
            "AGENT_RUN_OUTPUT_INVALID"
        ));
        let deadline = row("DEADLINE_EXCEEDED");
        assert!(deadline
            .todo
            .contains("start a jig worker --database URL (Serving)"));
        assert!(!has_entry("NOT_A_CODE_AT_ALL"));
        assert_eq!(plain("see [A](a.md#x) and `b` [c"), "see A and b [c");
    }

    #[test]
    fn every_code_a_terminal_or_the_command_line_gives_is_explained() {
        let missing: Vec<&str> = flow::wire::ErrorCode::ALL
            .iter()
            .map(|c| c.as_str())
            .chain(jig_engine::code::HostCode::ALL.iter().map(|c| c.as_str()))
            .chain(Code::ALL.iter().map(|c| c.as_str()))
            .filter(|code| !has_entry(code))
            .collect();
        assert!(missing.is_empty(), "no Troubleshooting entry: {missing:?}");
    }
}
