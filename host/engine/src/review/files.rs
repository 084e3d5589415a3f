//! What a review shows of the bytes it admits: for each package whose
//! digest a review changes, the files added, removed and changed against
//! the admitted generation, with a unified diff of each text file, and,
//! where nothing is admitted yet, whether each package matches the
//! project's committed `jig.lock`.
//!
//! Everything here is project-controlled text: names and diff lines are
//! kept as bytes read, and the door escapes them before a person sees
//! them. Diffs are bounded ([`MAX_DIFFED_BYTES`], [`MAX_DIFF_LINES`]), so
//! a large or hostile package cannot make review slow or its text
//! unbounded; past a bound a file is shown by size and digest.

use std::collections::BTreeMap;

use flow::json::Value;
use flow::package::Package;
use similar::TextDiff;

use crate::state::Store;

/// The largest file (either side) a review diffs; a larger one is shown
/// by its sizes and digests.
pub const MAX_DIFFED_BYTES: usize = 256 * 1024;
/// The most lines of one file's diff a review shows; the rest is counted.
pub const MAX_DIFF_LINES: usize = 400;
/// Lines of context around each change, as `diff -u`.
const CONTEXT_LINES: usize = 3;

/// One package whose digest the review changes.
pub struct PackageFiles {
    pub path: String,
    /// The admitted digest, if the package was admitted.
    pub was: Option<String>,
    /// The proposed digest, if the package stays.
    pub now: Option<String>,
    /// Each file added, removed or changed, by path.
    pub files: Vec<FileChange>,
    /// The admitted files could not be read from the store (named, never
    /// guessed): the files are listed as if added.
    pub admitted_unreadable: bool,
}

/// One file of a package, as it changes.
pub struct FileChange {
    pub path: String,
    pub was: Option<Blob>,
    pub now: Option<Blob>,
    /// The unified diff of a text file (at most [`MAX_DIFF_LINES`] lines),
    /// `None` for a binary or too large file, or a removed one.
    pub diff: Option<Diff>,
}

/// A file's size and Package/1 digest.
pub struct Blob {
    pub bytes: usize,
    pub digest: String,
}

/// A unified diff, cut after [`MAX_DIFF_LINES`] lines.
pub struct Diff {
    pub text: String,
    /// Lines of the diff left out.
    pub cut: usize,
}

/// How a package a review proposes compares with the committed
/// `jig.lock` of a project with nothing admitted yet (a fresh clone).
#[derive(Debug, PartialEq, Eq)]
pub enum LockMatch {
    Matches,
    /// The lock names another digest for it.
    Differs {
        locked: String,
    },
    /// The lock does not name it.
    Unlocked,
}

/// The packages whose digest changes from the admitted `current` lock to
/// the `proposed` one, with their files. The proposed bytes come from the
/// `candidate`, the admitted ones from the `store`.
pub fn compare(
    current: Option<&Value>,
    proposed: &Value,
    candidate: &BTreeMap<String, Package>,
    store: &Store,
) -> Vec<PackageFiles> {
    let digests = |lock: Option<&Value>| -> BTreeMap<String, String> {
        lock.and_then(|l| l["packages"].as_object())
            .into_iter()
            .flatten()
            .filter_map(|(path, p)| Some((path.clone(), p["digest"].as_str()?.to_string())))
            .collect()
    };
    let (before, after) = (digests(current), digests(Some(proposed)));
    let mut paths: Vec<&String> = before.keys().chain(after.keys()).collect();
    paths.sort();
    paths.dedup();
    let empty = BTreeMap::new();
    let mut out = Vec::new();
    for path in paths {
        let (was, now) = (before.get(path), after.get(path));
        if was == now {
            continue;
        }
        let admitted = was.map(|digest| store.get_package(digest));
        let admitted_unreadable = matches!(admitted, Some(Err(_)));
        let old = match &admitted {
            Some(Ok(files)) => files,
            _ => &empty,
        };
        // The proposed bytes as captured, else as the store keeps them.
        let stored;
        let new = match (now, candidate.get(path)) {
            (None, _) => &empty,
            (Some(_), Some(package)) => package.files(),
            (Some(digest), None) => {
                stored = store.get_package(digest).unwrap_or_default();
                &stored
            }
        };
        out.push(PackageFiles {
            path: path.clone(),
            was: was.cloned(),
            now: now.cloned(),
            files: files(path, old, new),
            admitted_unreadable,
        });
    }
    out
}

/// Whether each proposed package matches the committed lock `committed`
/// (its bytes, as read from `jig.lock`), by path; `None` when there is no
/// lock or it is not a lock.
pub fn against_lock(committed: &[u8], proposed: &Value) -> Option<Vec<(String, LockMatch)>> {
    let lock = flow::json::parse(committed).ok()?;
    let locked = lock.get("packages")?.as_object()?;
    let matches = proposed["packages"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(path, package)| {
            let digest = package["digest"].as_str().unwrap_or_default();
            let matched = match locked.get(path).and_then(|p| p["digest"].as_str()) {
                None => LockMatch::Unlocked,
                Some(d) if d == digest => LockMatch::Matches,
                Some(d) => LockMatch::Differs {
                    locked: d.to_string(),
                },
            };
            (path.clone(), matched)
        })
        .collect();
    Some(matches)
}

fn files(
    package: &str,
    old: &BTreeMap<String, Vec<u8>>,
    new: &BTreeMap<String, Vec<u8>>,
) -> Vec<FileChange> {
    let blob = |bytes: &Vec<u8>| Blob {
        bytes: bytes.len(),
        digest: flow::digest::sha256_digest(bytes),
    };
    let mut paths: Vec<&String> = old.keys().chain(new.keys()).collect();
    paths.sort();
    paths.dedup();
    paths
        .into_iter()
        .filter(|path| old.get(*path) != new.get(*path))
        .map(|path| {
            let (was, now) = (old.get(path), new.get(path));
            let diff = now.and_then(|now| {
                let before = match was {
                    Some(was) => text(was)?,
                    None => "",
                };
                Some(unified(package, path, before, text(now)?, was.is_none()))
            });
            FileChange {
                path: path.clone(),
                was: was.map(blob),
                now: now.map(blob),
                diff,
            }
        })
        .collect()
}

/// The file as text a diff can show: UTF-8, without NUL, at most
/// [`MAX_DIFFED_BYTES`].
fn text(bytes: &[u8]) -> Option<&str> {
    if bytes.len() > MAX_DIFFED_BYTES || bytes.contains(&0) {
        return None;
    }
    std::str::from_utf8(bytes).ok()
}

fn unified(package: &str, path: &str, before: &str, after: &str, added: bool) -> Diff {
    let from = match added {
        true => "/dev/null".to_string(),
        false => format!("a/{package}/{path}"),
    };
    let diff = TextDiff::from_lines(before, after);
    let whole = diff
        .unified_diff()
        .context_radius(CONTEXT_LINES)
        .header(&from, &format!("b/{package}/{path}"))
        .missing_newline_hint(true)
        .to_string();
    let lines = whole.split_inclusive('\n').count();
    let text: String = whole.split_inclusive('\n').take(MAX_DIFF_LINES).collect();
    Diff {
        text,
        cut: lines.saturating_sub(MAX_DIFF_LINES),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tree(files: &[(&str, &[u8])]) -> BTreeMap<String, Vec<u8>> {
        files
            .iter()
            .map(|(p, b)| (p.to_string(), b.to_vec()))
            .collect()
    }

    #[test]
    fn a_changed_text_file_has_a_unified_diff_and_a_binary_its_sizes() {
        let old = tree(&[
            ("flow.ts", b"a\nb\nc\n"),
            ("logo.png", b"\x89PNG\0\x01"),
            ("gone.txt", b"x\n"),
            ("same.md", b"same\n"),
        ]);
        let new = tree(&[
            ("flow.ts", b"a\nB\nc\n"),
            ("logo.png", b"\x89PNG\0\x02\x03"),
            ("new.json", b"{}\n"),
            ("same.md", b"same\n"),
        ]);
        let changes = files("flows/greet", &old, &new);
        let names: Vec<&str> = changes.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(names, ["flow.ts", "gone.txt", "logo.png", "new.json"]);
        let diff = changes[0].diff.as_ref().unwrap();
        assert_eq!(
            diff.text,
            "--- a/flows/greet/flow.ts\n+++ b/flows/greet/flow.ts\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
        );
        assert_eq!(diff.cut, 0);
        assert!(changes[1].now.is_none() && changes[1].diff.is_none());
        let binary = &changes[2];
        assert!(binary.diff.is_none());
        assert_eq!(
            (
                binary.was.as_ref().unwrap().bytes,
                binary.now.as_ref().unwrap().bytes
            ),
            (6, 7)
        );
        assert!(binary.now.as_ref().unwrap().digest.starts_with("sha256:"));
        let added = changes[3].diff.as_ref().unwrap();
        assert!(added
            .text
            .starts_with("--- /dev/null\n+++ b/flows/greet/new.json\n"));
        assert!(added.text.ends_with("+{}\n"));
    }

    #[test]
    fn a_diff_is_cut_at_its_line_bound_and_a_file_past_its_byte_bound_is_not_diffed() {
        // Every line but the last changes: 3 header lines, one - and one +
        // per changed line, and the last as context.
        let lines = |mark: &str, n: usize| -> Vec<u8> {
            let mut text: String = (0..n).map(|i| format!("{mark}{i}\n")).collect();
            text.push_str("same\n");
            text.into_bytes()
        };
        let at = (MAX_DIFF_LINES - 4) / 2;
        for (n, cut) in [(at, 0), (at + 1, 2)] {
            let old = tree(&[("f", &lines("a", n))]);
            let new = tree(&[("f", &lines("b", n))]);
            let diff = files("p", &old, &new).remove(0).diff.unwrap();
            assert_eq!(diff.text.lines().count(), MAX_DIFF_LINES, "{n}");
            assert_eq!(diff.cut, cut, "{n}");
        }
        let big = vec![b'a'; MAX_DIFFED_BYTES];
        let past = vec![b'b'; MAX_DIFFED_BYTES + 1];
        let at_bound = files("p", &tree(&[]), &tree(&[("f", &big)]));
        assert!(at_bound[0].diff.is_some());
        let past_bound = files("p", &tree(&[]), &tree(&[("f", &past)]));
        assert!(past_bound[0].diff.is_none());
        assert_eq!(
            past_bound[0].now.as_ref().unwrap().bytes,
            MAX_DIFFED_BYTES + 1
        );
    }

    #[test]
    fn admitted_bytes_the_store_cannot_give_are_named_and_the_files_shown_as_added() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::throwaway(dir.path().join("store"));
        let missing = format!("sha256:{}", "0".repeat(64));
        let current = json!({"packages": {"flows/a": {"digest": missing}}});
        let package = Package::from_files(tree(&[
            ("FLOW.md", b"---\nname: a\ndescription: A.\n---\n"),
            ("flow.py", b"x = 1\n"),
        ]))
        .unwrap();
        let proposed = json!({"packages": {"flows/a": {"digest": package.digest()}}});
        let candidate = BTreeMap::from([("flows/a".to_string(), package)]);
        let compared = compare(Some(&current), &proposed, &candidate, &store);
        assert_eq!(compared.len(), 1);
        assert!(compared[0].admitted_unreadable);
        assert_eq!(compared[0].was.as_deref(), Some(missing.as_str()));
        assert!(compared[0]
            .files
            .iter()
            .all(|f| f.was.is_none() && f.now.is_some()));
        assert_eq!(compared[0].files.len(), 2);
        // The same digest on both sides is no change at all.
        assert!(compare(Some(&proposed), &proposed, &candidate, &store).is_empty());
    }

    #[test]
    fn a_fresh_clone_says_which_packages_match_its_lock() {
        let committed =
            br#"{"packages":{"flows/a":{"digest":"sha256:aa"},"flows/b":{"digest":"sha256:bb"}}}"#;
        let proposed = json!({"packages": {
            "flows/a": {"digest": "sha256:aa"},
            "flows/b": {"digest": "sha256:b2"},
            "flows/c": {"digest": "sha256:cc"},
        }});
        assert_eq!(
            against_lock(committed, &proposed).unwrap(),
            [
                ("flows/a".to_string(), LockMatch::Matches),
                (
                    "flows/b".to_string(),
                    LockMatch::Differs {
                        locked: "sha256:bb".into()
                    }
                ),
                ("flows/c".to_string(), LockMatch::Unlocked),
            ]
        );
        assert!(against_lock(b"not a lock", &proposed).is_none());
    }
}
