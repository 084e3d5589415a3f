//! Project paths (seed 002 §2, Project sources): relative `/`-separated
//! Unicode NFC strings naming files and directories inside the project, and
//! the case fold that decides when two of them collide.

use unicode_normalization::UnicodeNormalization;

use crate::ProjectError;

/// Longest canonical project path, in UTF-8 bytes.
pub const MAX_PATH_BYTES: usize = 1024;
/// Most segments in one project path.
pub const MAX_PATH_SEGMENTS: usize = 64;
/// Longest single segment, in UTF-8 bytes.
pub const MAX_SEGMENT_BYTES: usize = 255;
/// Longest LocalName, in bytes (all ASCII).
pub const MAX_LOCAL_NAME_BYTES: usize = 64;

/// The protected local state directory; it and everything beneath it can never be selected.
pub const PROTECTED_ROOT: &str = ".jig";

/// Normalizes an authored project path to its canonical spelling.
///
/// One leading `./` is removed; the rest must already be canonical: no
/// leading `/`, no backslash or NUL, no empty, `.` or `..` segment, NFC, and
/// within the byte and segment limits. `.jig` (in any case) is protected.
/// Errors carry `PROJECT_DECLARATION_INVALID` and no location; callers add it.
pub fn normalize(path: &str) -> Result<String, ProjectError> {
    let invalid = |why: &str| {
        Err(ProjectError::new(
            crate::ProjectCode::DeclarationInvalid,
            format!("{} is not a valid project path: {why}", escape(path)),
        ))
    };
    let path_body = path.strip_prefix("./").unwrap_or(path);
    if path_body.is_empty() {
        return invalid("it is empty");
    }
    if path_body.starts_with('/') {
        return invalid("it is absolute");
    }
    if path_body.contains('\\') {
        return invalid("it contains a backslash");
    }
    if path_body.contains('\0') {
        return invalid("it contains NUL");
    }
    if path_body.len() > MAX_PATH_BYTES {
        return invalid("it is longer than 1024 bytes");
    }
    if !is_nfc(path_body) {
        return invalid("it is not in Unicode NFC");
    }
    let mut segments = 0usize;
    for segment in path_body.split('/') {
        segments += 1;
        match segment {
            "" => return invalid("it has an empty segment"),
            "." | ".." => return invalid("it has a `.` or `..` segment"),
            _ if segment.len() > MAX_SEGMENT_BYTES => {
                return invalid("a segment is longer than 255 bytes")
            }
            _ => {}
        }
    }
    if segments > MAX_PATH_SEGMENTS {
        return invalid("it has more than 64 segments");
    }
    if is_protected(path_body) {
        return invalid("`.jig` is protected local state");
    }
    Ok(path_body.to_owned())
}

/// The collision key of a path: its Unicode full case fold, recomposed to NFC.
/// Two distinct canonical paths with the same key collide.
pub fn fold(path: &str) -> String {
    // One case-folding table for packages and projects: FLOW Package/1's.
    flow::package::collision_key(path)
}

/// Whether `path` (canonical) is `.jig` or lies beneath it, in any letter case.
pub fn is_protected(path: &str) -> bool {
    let first = path.split('/').next().unwrap_or_default();
    fold(first) == PROTECTED_ROOT
}

/// Whether `name` is a LocalName: `^[a-z0-9]+(?:-[a-z0-9]+)*$`, at most 64 bytes.
pub fn is_local_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_LOCAL_NAME_BYTES
        && name.split('-').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

/// Whether `a` lies strictly beneath directory `b`, or they are equal (by segments).
pub fn is_within(a: &str, b: &str) -> bool {
    a == b || (a.len() > b.len() && a.starts_with(b) && a.as_bytes()[b.len()] == b'/')
}

/// Quotes a path for a diagnostic, escaping everything outside printable ASCII
/// so hostile names cannot forge terminal output.
pub fn escape(path: &str) -> String {
    let mut out = String::with_capacity(path.len() + 2);
    out.push('"');
    for c in path.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            ' '..='~' => out.push(c),
            _ if (c as u32) <= 0xFFFF => out.push_str(&format!("\\u{:04x}", c as u32)),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
    out
}

fn is_nfc(s: &str) -> bool {
    match unicode_normalization::is_nfc_quick(s.chars()) {
        unicode_normalization::IsNormalized::Yes => true,
        unicode_normalization::IsNormalized::No => false,
        unicode_normalization::IsNormalized::Maybe => s.nfc().eq(s.chars()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_strips_one_leading_dot_slash() {
        assert_eq!(normalize("./flows").unwrap(), "flows");
        assert_eq!(normalize("flows/hello").unwrap(), "flows/hello");
        assert!(normalize("././flows").is_err());
        assert!(normalize("./").is_err());
    }

    #[test]
    fn normalize_rejects_non_canonical_forms() {
        for bad in [
            "", "/abs", "a\\b", "a\0b", "a//b", "a/", "a/./b", "a/../b", "..", ".", "e\u{301}",
        ] {
            let err = normalize(bad).unwrap_err();
            assert_eq!(err.code, "PROJECT_DECLARATION_INVALID", "{bad:?}");
        }
        assert_eq!(normalize("\u{e9}").unwrap(), "\u{e9}");
    }

    #[test]
    fn protected_state_cannot_be_selected() {
        for bad in [".jig", ".jig/store", "./.JIG", ".Jig/x"] {
            assert!(normalize(bad).is_err(), "{bad}");
        }
        assert!(normalize("a/.jig").is_ok());
        assert!(normalize(".jigsaw").is_ok());
    }

    #[test]
    fn path_byte_limit_is_inclusive() {
        let seg = "a".repeat(255);
        let at_limit = [
            seg.as_str(),
            seg.as_str(),
            seg.as_str(),
            &"b".repeat(254),
            "c",
        ]
        .join("/");
        assert_eq!(at_limit.len(), MAX_PATH_BYTES);
        assert!(normalize(&at_limit).is_ok());
        assert!(normalize(&format!("{at_limit}c")).is_err());
    }

    #[test]
    fn segment_limits_are_inclusive() {
        assert!(normalize(&"a".repeat(MAX_SEGMENT_BYTES)).is_ok());
        assert!(normalize(&"a".repeat(MAX_SEGMENT_BYTES + 1)).is_err());
        let at_limit = vec!["a"; MAX_PATH_SEGMENTS].join("/");
        assert!(normalize(&at_limit).is_ok());
        let past = vec!["a"; MAX_PATH_SEGMENTS + 1].join("/");
        assert!(normalize(&past).is_err());
    }

    #[test]
    fn fold_uses_full_case_folding() {
        assert_eq!(fold("Flows/Hello"), "flows/hello");
        assert_eq!(fold("Stra\u{df}e"), "strasse");
        assert_eq!(fold("STRASSE"), fold("stra\u{df}e"));
        assert_eq!(fold("\u{3a3}"), fold("\u{3c2}"));
        assert_eq!(fold("\u{212a}"), "k");
    }

    #[test]
    fn local_names() {
        assert!(is_local_name("intake"));
        assert!(is_local_name("a-1-b"));
        assert!(is_local_name(&"a".repeat(MAX_LOCAL_NAME_BYTES)));
        assert!(!is_local_name(&"a".repeat(MAX_LOCAL_NAME_BYTES + 1)));
        for bad in ["", "A", "a--b", "-a", "a-", "a_b", "a.b"] {
            assert!(!is_local_name(bad), "{bad}");
        }
    }

    #[test]
    fn within_is_segment_wise() {
        assert!(is_within("flows/a", "flows"));
        assert!(is_within("flows", "flows"));
        assert!(!is_within("flowsx/a", "flows"));
    }

    #[test]
    fn escape_is_ascii() {
        assert_eq!(escape("a\"b"), "\"a\\\"b\"");
        assert_eq!(escape("\u{e9}\u{1f600}"), "\"\\u00e9\\ud83d\\ude00\"");
    }
}
