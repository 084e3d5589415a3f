//! npm's `files` list (as npm-packlist reads it): which of a workspace
//! library's files a preparation captures. The patterns come from the project
//! under review, so matching is linear in the pattern and the path (a set of
//! positions advanced once per segment and once per character, never
//! backtracking) and the list itself is bounded.
//!
//! The semantics, in npm's words:
//! - each entry names a file, or a directory and everything below it; leading
//!   `./` or `/` and trailing `/` are dropped; entries are anchored at the
//!   library's root;
//! - `*` and `?` match within one segment, `[...]` a class (`!` or `^`
//!   negates), `{a,b}` alternatives, `**` as a whole segment any number of
//!   segments, `\` escapes; `*` matches a leading dot, as npm's `dot` option;
//! - an entry starting with `!` excludes what it names; later entries win;
//! - `package.json`, README, LICENSE/LICENCE, COPYING at the root and the
//!   `main` and `bin` files are always included; the cruft npm always leaves
//!   out (`.npmrc`, `.gitignore`, `.DS_Store`, ...) is left out unless an
//!   entry names it exactly.

use flow::json::Value;

/// At most this many entries in one `files` list.
pub(crate) const MAX_ENTRIES: usize = 1024;
/// At most this many bytes in one entry.
pub const MAX_ENTRY_BYTES: usize = 1024;
/// At most this many alternatives one entry's `{...}` expand to.
pub(crate) const MAX_ALTERNATIVES: usize = 64;

/// Why a `files` list is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilesListError {
    /// More than [`MAX_ENTRIES`] entries.
    TooManyEntries,
    /// An entry longer than [`MAX_ENTRY_BYTES`].
    EntryTooLong,
    /// An entry whose braces expand to more than [`MAX_ALTERNATIVES`].
    TooManyAlternatives,
    /// An entry that is not a string.
    NotAString,
}

impl FilesListError {
    /// Is this a bound (rather than a malformed list)?
    pub(crate) fn is_limit(self) -> bool {
        !matches!(self, FilesListError::NotAString)
    }

    pub fn message(self) -> &'static str {
        match self {
            FilesListError::TooManyEntries => "has a files list of more than 1024 entries",
            FilesListError::EntryTooLong => "has a files entry longer than 1024 bytes",
            FilesListError::TooManyAlternatives => {
                "has a files entry whose braces expand to more than 64 patterns"
            }
            FilesListError::NotAString => "has a files entry that is not a string",
        }
    }
}

/// A compiled `files` list.
#[derive(Debug)]
pub struct FilesList {
    rules: Vec<Rule>,
    /// The `main` and `bin` files, always included.
    required: Vec<String>,
}

#[derive(Debug)]
struct Rule {
    include: bool,
    /// The entry as written (without `!`, `./`, trailing `/`): an exact name
    /// re-includes npm's cruft.
    literal: String,
    alternatives: Vec<Vec<Segment>>,
}

#[derive(Debug)]
enum Segment {
    /// `**`: any number of segments.
    AnyDepth,
    Name(Vec<Token>),
}

#[derive(Debug)]
enum Token {
    Char(char),
    /// `?`
    AnyChar,
    /// `*`
    AnyRun,
    /// `[...]`
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

/// Root names npm includes whatever the list says (compared case-blind by
/// prefix, as npm-packlist's `readme*`, `license*`, `licence*`, `copying*`).
const ALWAYS_INCLUDED_PREFIXES: [&str; 4] = ["README", "LICENSE", "LICENCE", "COPYING"];

impl FilesList {
    /// Compile a manifest's `files` array; `main` and `bin` are the
    /// manifest's own fields, always included.
    pub fn compile(
        entries: &[Value],
        main: Option<&Value>,
        bin: Option<&Value>,
    ) -> Result<FilesList, FilesListError> {
        if entries.len() > MAX_ENTRIES {
            return Err(FilesListError::TooManyEntries);
        }
        let mut rules = Vec::with_capacity(entries.len());
        for entry in entries {
            let entry = entry.as_str().ok_or(FilesListError::NotAString)?;
            if entry.len() > MAX_ENTRY_BYTES {
                return Err(FilesListError::EntryTooLong);
            }
            rules.push(Rule::compile(entry)?);
        }
        let mut required = Vec::new();
        let mut push = |v: &Value| {
            if let Some(p) = v.as_str() {
                required.push(clean(p).to_string());
            }
        };
        main.into_iter().for_each(&mut push);
        match bin {
            Some(Value::Object(map)) => map.values().for_each(&mut push),
            Some(other) => push(other),
            None => {}
        }
        Ok(FilesList { rules, required })
    }

    /// Does the list select the file at `path` (`/`-separated, relative to
    /// the library's root)?
    pub fn selects(&self, path: &str) -> bool {
        self.selects_metered(path, &mut 0)
    }

    /// [`FilesList::selects`], adding the steps it took to `work`.
    pub(crate) fn selects_metered(&self, path: &str, work: &mut u64) -> bool {
        if always_included(path) || self.required.iter().any(|r| r == path) {
            return true;
        }
        let segments: Vec<&str> = path.split('/').collect();
        let mut selected = false;
        let mut named_exactly = false;
        for rule in &self.rules {
            if rule.selects(&segments, work) {
                selected = rule.include;
                named_exactly = rule.include && rule.literal == path;
            }
        }
        selected && (named_exactly || !is_cruft(&segments))
    }
}

/// Drop a leading `./` or `/` and trailing `/`.
fn clean(entry: &str) -> &str {
    let entry = entry.strip_prefix("./").unwrap_or(entry);
    entry.trim_start_matches('/').trim_end_matches('/')
}

/// `package.json` and the README/LICENSE family at the root.
fn always_included(path: &str) -> bool {
    if path.contains('/') {
        return false;
    }
    let upper = path.to_ascii_uppercase();
    path == super::MANIFEST
        || ALWAYS_INCLUDED_PREFIXES
            .iter()
            .any(|p| upper.starts_with(p))
}

/// What npm leaves out unless named exactly.
fn is_cruft(segments: &[&str]) -> bool {
    let name = segments.last().copied().unwrap_or("");
    let root = segments.len() == 1;
    matches!(
        name,
        ".npmrc" | ".npmignore" | ".gitignore" | ".DS_Store" | ".lock-wscript"
    ) || name.starts_with("._")
        || (name.starts_with('.') && (name.ends_with(".swp") || name.ends_with(".orig")))
        || name.starts_with(".wafpickle-")
        || (root && name == "npm-debug.log")
        || segments == ["build", "config.gypi"]
        || segments.windows(2).any(|w| w == ["node_modules", ".bin"])
}

impl Rule {
    fn compile(entry: &str) -> Result<Rule, FilesListError> {
        let (include, body) = match entry.strip_prefix('!') {
            Some(rest) => (false, rest),
            None => (true, entry),
        };
        let body = clean(body);
        let mut expanded = Vec::new();
        expand_braces(body, &mut expanded)?;
        let alternatives = expanded
            .iter()
            .map(|alt| {
                alt.split('/')
                    .filter(|s| !s.is_empty())
                    .map(|s| match s {
                        "**" => Segment::AnyDepth,
                        name => Segment::Name(tokens(name)),
                    })
                    .collect()
            })
            .collect();
        Ok(Rule {
            include,
            literal: body.to_string(),
            alternatives,
        })
    }

    /// Does one of the alternatives name `segments` or one of its ancestors?
    fn selects(&self, segments: &[&str], work: &mut u64) -> bool {
        self.alternatives
            .iter()
            .any(|alt| !alt.is_empty() && names_or_contains(alt, segments, work))
    }
}

/// Expand `{a,b}` (nested, first brace group first) into `out`, bounded.
/// A brace without a matching close or without a top-level comma is literal,
/// as in minimatch.
fn expand_braces(pattern: &str, out: &mut Vec<String>) -> Result<(), FilesListError> {
    let Some((open, close, options)) = first_brace_group(pattern) else {
        if out.len() >= MAX_ALTERNATIVES {
            return Err(FilesListError::TooManyAlternatives);
        }
        out.push(pattern.to_string());
        return Ok(());
    };
    for option in options {
        let next = format!("{}{}{}", &pattern[..open], option, &pattern[close + 1..]);
        expand_braces(&next, out)?;
    }
    Ok(())
}

/// The first `{...}` with a top-level comma: its byte span and options.
fn first_brace_group(pattern: &str) -> Option<(usize, usize, Vec<&str>)> {
    let bytes = pattern.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'{' => {
                let mut depth = 0;
                let mut commas = Vec::new();
                let mut j = i;
                while j < bytes.len() {
                    match bytes[j] {
                        b'\\' => j += 1,
                        b'{' => depth += 1,
                        b'}' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        b',' if depth == 1 => commas.push(j),
                        _ => {}
                    }
                    j += 1;
                }
                if j < bytes.len() && !commas.is_empty() {
                    let mut options = Vec::new();
                    let mut start = i + 1;
                    for &c in commas.iter().chain(std::iter::once(&j)) {
                        options.push(&pattern[start..c]);
                        start = c + 1;
                    }
                    return Some((i, j, options));
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    None
}

/// One segment's tokens; a `[` without a closing `]` is literal.
fn tokens(segment: &str) -> Vec<Token> {
    let chars: Vec<char> = segment.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' if i + 1 < chars.len() => {
                out.push(Token::Char(chars[i + 1]));
                i += 2;
                continue;
            }
            '*' => {
                // `**` inside a segment is `*`.
                if !matches!(out.last(), Some(Token::AnyRun)) {
                    out.push(Token::AnyRun);
                }
            }
            '?' => out.push(Token::AnyChar),
            '[' => {
                if let Some((class, next)) = class(&chars, i) {
                    out.push(class);
                    i = next;
                    continue;
                }
                out.push(Token::Char('['));
            }
            c => out.push(Token::Char(c)),
        }
        i += 1;
    }
    out
}

/// The class opening at `chars[open]` and the index after its `]`.
fn class(chars: &[char], open: usize) -> Option<(Token, usize)> {
    let mut i = open + 1;
    let negated = matches!(chars.get(i), Some('!' | '^'));
    if negated {
        i += 1;
    }
    let mut ranges = Vec::new();
    let first = i;
    while i < chars.len() {
        let c = chars[i];
        if c == ']' && i > first {
            return Some((Token::Class { negated, ranges }, i + 1));
        }
        if chars.get(i + 1) == Some(&'-') && chars.get(i + 2).is_some_and(|&e| e != ']') {
            ranges.push((c, chars[i + 2]));
            i += 3;
        } else {
            ranges.push((c, c));
            i += 1;
        }
    }
    None
}

/// Does `pattern` match `segments` or a leading part of them (a directory
/// that holds the path)? The positions reachable after each segment are one
/// set, so the work is at most (pattern segments × path characters ×
/// tokens), never a search over ways to split the path.
fn names_or_contains(pattern: &[Segment], segments: &[&str], work: &mut u64) -> bool {
    let mut current = vec![false; pattern.len() + 1];
    current[0] = true;
    close_any_depth(pattern, &mut current);
    for name in segments {
        let mut next = vec![false; pattern.len() + 1];
        for (at, segment) in pattern.iter().enumerate() {
            if !current[at] {
                continue;
            }
            *work += 1;
            match segment {
                Segment::AnyDepth => next[at] = true,
                Segment::Name(tokens) => {
                    if name_matches(tokens, name, work) {
                        next[at + 1] = true;
                    }
                }
            }
        }
        close_any_depth(pattern, &mut next);
        if next[pattern.len()] {
            return true;
        }
        if !next.contains(&true) {
            return false;
        }
        current = next;
    }
    false
}

/// A `**` may match no segment at all.
fn close_any_depth(pattern: &[Segment], set: &mut [bool]) {
    for (at, segment) in pattern.iter().enumerate() {
        if set[at] && matches!(segment, Segment::AnyDepth) {
            set[at + 1] = true;
        }
    }
}

/// Does one segment's pattern match `name` whole?
fn name_matches(tokens: &[Token], name: &str, work: &mut u64) -> bool {
    let mut current = vec![false; tokens.len() + 1];
    current[0] = true;
    close_any_run(tokens, &mut current);
    for c in name.chars() {
        let mut next = vec![false; tokens.len() + 1];
        for (at, token) in tokens.iter().enumerate() {
            if !current[at] {
                continue;
            }
            *work += 1;
            match token {
                Token::AnyRun => next[at] = true,
                Token::AnyChar => next[at + 1] = true,
                Token::Char(want) => next[at + 1] |= *want == c,
                Token::Class { negated, ranges } => {
                    let inside = ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi);
                    next[at + 1] |= inside != *negated;
                }
            }
        }
        close_any_run(tokens, &mut next);
        if !next.contains(&true) {
            return false;
        }
        current = next;
    }
    current[tokens.len()]
}

/// A `*` may match no character.
fn close_any_run(tokens: &[Token], set: &mut [bool]) {
    for (at, token) in tokens.iter().enumerate() {
        if set[at] && matches!(token, Token::AnyRun) {
            set[at + 1] = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[&str]) -> FilesList {
        let entries: Vec<Value> = entries
            .iter()
            .map(|e| Value::String(e.to_string()))
            .collect();
        FilesList::compile(&entries, None, None).unwrap()
    }

    #[test]
    fn files_lists_select_like_npm() {
        // (entries, path, selected)
        let cases: &[(&[&str], &str, bool)] = &[
            (&["lib"], "lib/a.js", true),
            (&["lib/"], "lib/x/a.js", true),
            (&["./lib"], "lib/a.js", true),
            (&["/lib"], "lib/a.js", true),
            (&["lib"], "libx/a.js", false),
            (&["index.js"], "index.js", true),
            (&["*.js"], "a.js", true),
            (&["*.js"], "src/a.js", false),
            (&["*.js"], ".hidden.js", true),
            (&["src/**/*.js"], "src/x/y/a.js", true),
            (&["src/**/*.js"], "src/a.js", true),
            (&["src/**/*.js"], "src/a.ts", false),
            (&["**/*.js"], "a.js", true),
            (&["dist/*"], "dist/a/b.js", true),
            (&["dist/**"], "dist/a/b.js", true),
            (&["a?.js"], "ab.js", true),
            (&["a?.js"], "a.js", false),
            (&["a?.js"], "abc.js", false),
            (&["[ab].js"], "b.js", true),
            (&["[ab].js"], "c.js", false),
            (&["[!ab].js"], "c.js", true),
            (&["[a-c]x.js"], "bx.js", true),
            (&["[a-c]x.js"], "dx.js", false),
            (&["[.js"], "[.js", true),
            (&["*.{js,mjs}"], "a.mjs", true),
            (&["*.{js,mjs}"], "a.ts", false),
            (&["{lib,dist}/a.js"], "dist/a.js", true),
            (&["{lib}"], "{lib}/a.js", true),
            (&["\\*.js"], "*.js", true),
            (&["\\*.js"], "a.js", false),
            (&["lib", "!lib/test"], "lib/test/a.js", false),
            (&["lib", "!lib/test"], "lib/a.js", true),
            (&["lib", "!lib/*.test.js"], "lib/a.test.js", false),
            (
                &["lib", "!lib/test", "lib/test/keep.js"],
                "lib/test/keep.js",
                true,
            ),
            (&["!lib", "lib"], "lib/a.js", true),
            (&["src"], "README.md", true),
            (&["src"], "package.json", true),
            (&["src"], "LICENSE", true),
            (&["src"], "licence.txt", true),
            (&["src"], "COPYING", true),
            (&["src"], "docs/README.md", false),
            (&["lib"], "lib/.npmrc", false),
            (&["lib"], "lib/.DS_Store", false),
            (&["lib"], "lib/.a.js.swp", false),
            (&["lib"], "lib/._a.js", false),
            (&["lib", "lib/.npmrc"], "lib/.npmrc", true),
            (&["*"], "npm-debug.log", false),
            (&["build"], "build/config.gypi", false),
            (&["**"], "x/y.js", true),
        ];
        for (entries, path, want) in cases {
            assert_eq!(list(entries).selects(path), *want, "{entries:?} on {path}");
        }
    }

    #[test]
    fn main_and_bin_are_always_included() {
        let main = Value::String("./index.js".into());
        let bin = Value::String("bin/cli.js".into());
        let files = FilesList::compile(&[], Some(&main), Some(&bin)).unwrap();
        assert!(files.selects("index.js") && files.selects("bin/cli.js"));
        assert!(!files.selects("other.js"));
    }

    #[test]
    fn a_hostile_entry_does_linear_work() {
        // The old backtracking matcher made 7.9 million calls here.
        let entry = format!("{}x", "**/".repeat(12));
        let path = ["a"; 12].join("/");
        let mut work = 0;
        assert!(!list(&[&entry]).selects_metered(&path, &mut work));
        // At most (pattern segments + 1) × path segments × characters.
        assert!(work <= 13 * 12 * 2, "{work} steps");

        // And at the bounds: the longest entry against a long path.
        let entry = "*a".repeat(MAX_ENTRY_BYTES / 2);
        let path = "a".repeat(4096);
        let mut work = 0;
        assert!(list(&[&entry]).selects_metered(&path, &mut work));
        let tokens = (MAX_ENTRY_BYTES + 1) as u64;
        assert!(work <= tokens * 4097, "{work} steps");
    }

    #[test]
    fn lists_are_bounded() {
        let entry = |s: &str| Value::String(s.to_string());
        let at_bound: Vec<Value> = (0..MAX_ENTRIES).map(|i| entry(&format!("f{i}"))).collect();
        assert!(FilesList::compile(&at_bound, None, None).is_ok());
        let over: Vec<Value> = (0..=MAX_ENTRIES).map(|i| entry(&format!("f{i}"))).collect();
        assert_eq!(
            FilesList::compile(&over, None, None).unwrap_err(),
            FilesListError::TooManyEntries
        );

        let long = "a".repeat(MAX_ENTRY_BYTES);
        assert!(FilesList::compile(&[entry(&long)], None, None).is_ok());
        let longer = "a".repeat(MAX_ENTRY_BYTES + 1);
        assert_eq!(
            FilesList::compile(&[entry(&longer)], None, None).unwrap_err(),
            FilesListError::EntryTooLong
        );

        // 2^6 = 64 alternatives is the bound; 2^7 is over it.
        let braces = |n: usize| entry(&"{a,b}".repeat(n));
        assert!(FilesList::compile(&[braces(6)], None, None).is_ok());
        assert_eq!(
            FilesList::compile(&[braces(7)], None, None).unwrap_err(),
            FilesListError::TooManyAlternatives
        );

        assert_eq!(
            FilesList::compile(&[Value::Bool(true)], None, None).unwrap_err(),
            FilesListError::NotAString
        );
        assert_eq!(
            (MAX_ENTRIES, MAX_ENTRY_BYTES, MAX_ALTERNATIVES),
            (1024, 1024, 64)
        );
    }
}
