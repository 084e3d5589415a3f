//! Package/1 §5 canonical logical paths, author references, and the
//! collision key (NFC, then Unicode full default case folding).

use unicode_normalization::{is_nfc, UnicodeNormalization};

use super::casefold::CASE_FOLDING;
use super::error::{codes, PackageError};

/// Maximum segments in one logical path.
pub const MAX_PATH_SEGMENTS: usize = 64;
/// Maximum UTF-8 bytes of one logical path.
pub const MAX_PATH_BYTES: usize = 1_024;
/// Maximum UTF-8 bytes of one path segment.
pub const MAX_SEGMENT_BYTES: usize = 255;

/// Checks one canonical logical path (Package/1 §5).
pub fn check_path(path: &str) -> Result<(), PackageError> {
    let invalid = |why: &str| {
        Err(PackageError::at(
            codes::PACKAGE_PATH_INVALID,
            path,
            format!("path {path:?} {why}"),
        ))
    };
    if path.is_empty() {
        return invalid("is empty");
    }
    if path.len() > MAX_PATH_BYTES {
        return invalid(&format!("exceeds {MAX_PATH_BYTES} UTF-8 bytes"));
    }
    if path.contains('\0') {
        return invalid("contains NUL");
    }
    if path.contains('\\') {
        return invalid("contains a backslash");
    }
    if path.starts_with('/') {
        return invalid("is absolute");
    }
    let mut segments = 0usize;
    for segment in path.split('/') {
        segments += 1;
        match segment {
            "" => return invalid("has an empty segment"),
            "." | ".." => return invalid("has a dot segment"),
            s if s.len() > MAX_SEGMENT_BYTES => {
                return invalid(&format!(
                    "has a segment over {MAX_SEGMENT_BYTES} UTF-8 bytes"
                ))
            }
            _ => {}
        }
    }
    if segments > MAX_PATH_SEGMENTS {
        return invalid(&format!("has more than {MAX_PATH_SEGMENTS} segments"));
    }
    if !is_nfc(path) {
        return invalid("is not in Unicode NFC");
    }
    Ok(())
}

/// Checks a `./` author reference from `FLOW.md` or a channel declaration
/// and returns the logical path it names. The prefix is stripped once,
/// without any other normalization or decoding.
pub fn check_author_reference(reference: &str) -> Result<&str, PackageError> {
    let Some(path) = reference.strip_prefix("./") else {
        return Err(PackageError::new(
            codes::METADATA_REFERENCE_INVALID,
            format!("reference {reference:?} must begin with \"./\""),
        ));
    };
    if path.contains('%') {
        return Err(PackageError::new(
            codes::METADATA_REFERENCE_INVALID,
            format!("reference {reference:?} uses an encoded form"),
        ));
    }
    check_path(path).map_err(|e| PackageError {
        code: codes::METADATA_REFERENCE_INVALID,
        message: format!("reference {reference:?}: {}", e.message),
        ..e
    })?;
    Ok(path)
}

/// Unicode full default case folding of a string.
pub fn case_fold(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match CASE_FOLDING.binary_search_by_key(&c, |&(k, _)| k) {
            Ok(i) => out.push_str(CASE_FOLDING[i].1),
            Err(_) => out.push(c),
        }
    }
    out
}

/// The key under which two paths collide: NFC of the full case fold of the
/// NFC form. Paths are already NFC when checked, but folding may produce a
/// non-NFC sequence, so normalize again.
pub fn collision_key(path: &str) -> String {
    let nfc: String = path.nfc().collect();
    case_fold(&nfc).nfc().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_case_folding_differs_from_lowercase() {
        assert_eq!(case_fold("Straße"), "strasse");
        assert_eq!(case_fold("ΣΑΣ"), "σασ");
        assert_eq!(case_fold("ς"), "σ");
        assert_eq!(case_fold("ﬁ"), "fi");
        assert_eq!(collision_key("README.md"), collision_key("readme.MD"));
        assert_eq!(collision_key("STRASSE"), collision_key("straße"));
    }

    #[test]
    fn path_limits() {
        let seg = "a".repeat(MAX_SEGMENT_BYTES);
        assert!(check_path(&seg).is_ok());
        assert!(check_path(&format!("{seg}a")).is_err());
        let deep = vec!["a"; MAX_PATH_SEGMENTS].join("/");
        assert!(check_path(&deep).is_ok());
        assert!(check_path(&format!("{deep}/a")).is_err());
        let long = vec!["b".repeat(204); 5].join("/");
        assert_eq!(long.len(), MAX_PATH_BYTES);
        assert!(check_path(&long).is_ok());
        assert!(check_path(&format!("{long}d")).is_err());
    }

    #[test]
    fn path_shapes() {
        for bad in [
            "", "/a", "a/", "a//b", "./a", "a/../b", "a\\b", "a\0b", "e\u{301}",
        ] {
            let e = check_path(bad).unwrap_err();
            assert_eq!(e.code, codes::PACKAGE_PATH_INVALID, "{bad:?}");
        }
        assert!(check_path("é/flow.py").is_ok());
        assert_eq!(check_author_reference("./c/x.json").unwrap(), "c/x.json");
        for bad in [
            "c/x.json", "./", "./../x", ".//x", "./a%2Fb", "/x", "./a\\b",
        ] {
            assert_eq!(
                check_author_reference(bad).unwrap_err().code,
                codes::METADATA_REFERENCE_INVALID,
                "{bad:?}"
            );
        }
    }
}
