//! The error every Package/1 check returns, and its stable codes.

/// Stable package error codes. Embedded schema and contract failures keep
/// their own codes (`SCHEMA_*`, `CONTRACT_*`) with `path` set.
pub mod codes {
    pub const PACKAGE_FLOW_MISSING: &str = "PACKAGE_FLOW_MISSING";
    pub const PACKAGE_ENTRYPOINT_AMBIGUOUS: &str = "PACKAGE_ENTRYPOINT_AMBIGUOUS";
    pub const PACKAGE_ENTRYPOINT_INVALID: &str = "PACKAGE_ENTRYPOINT_INVALID";
    pub const PACKAGE_PATH_INVALID: &str = "PACKAGE_PATH_INVALID";
    pub const PACKAGE_PATH_COLLISION: &str = "PACKAGE_PATH_COLLISION";
    pub const PACKAGE_SYMLINK: &str = "PACKAGE_SYMLINK";
    pub const PACKAGE_SPECIAL_FILE: &str = "PACKAGE_SPECIAL_FILE";
    pub const PACKAGE_HARDLINK: &str = "PACKAGE_HARDLINK";
    pub const PACKAGE_LIMIT_EXCEEDED: &str = "PACKAGE_LIMIT_EXCEEDED";
    pub const PACKAGE_SOURCE_CHANGED: &str = "PACKAGE_SOURCE_CHANGED";
    pub const PACKAGE_IO: &str = "PACKAGE_IO";
    pub const METADATA_ENCODING_INVALID: &str = "METADATA_ENCODING_INVALID";
    pub const METADATA_DELIMITER_INVALID: &str = "METADATA_DELIMITER_INVALID";
    pub const METADATA_YAML_INVALID: &str = "METADATA_YAML_INVALID";
    pub const METADATA_LIMIT_EXCEEDED: &str = "METADATA_LIMIT_EXCEEDED";
    pub const METADATA_INVALID: &str = "METADATA_INVALID";
    pub const METADATA_REFERENCE_INVALID: &str = "METADATA_REFERENCE_INVALID";
}

/// A package that could not be staged or is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct PackageError {
    pub code: &'static str,
    /// Logical path the failure concerns, when one does.
    pub path: Option<String>,
    /// RFC 6901 pointer inside that file, when one applies.
    pub pointer: Option<String>,
    pub message: String,
}

impl std::fmt::Display for PackageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)?;
        if let Some(path) = &self.path {
            write!(f, " at {path:?}")?;
        }
        if let Some(pointer) = &self.pointer {
            write!(f, " pointer {pointer:?}")?;
        }
        Ok(())
    }
}

impl PackageError {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        PackageError {
            code,
            path: None,
            pointer: None,
            message: message.into(),
        }
    }

    pub fn at(code: &'static str, path: &str, message: impl Into<String>) -> Self {
        PackageError {
            code,
            path: Some(path.to_owned()),
            pointer: None,
            message: message.into(),
        }
    }
}
