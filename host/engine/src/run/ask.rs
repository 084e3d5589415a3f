//! What a door was asked for one Run, parsed in one step before any
//! project file is read: the target, timeout and key
//! ([`submit::check`]), the `--receive` names, the `--attach`/`--select`
//! request and the input (inline JSON/1, or `@FILE` read once and
//! bounded). The first fault refuses, in that order, with its own code;
//! a door then submits what it was asked to a daemon or to the project it
//! holds.

use std::path::Path;

use flow::json::Value;

use crate::error::Error;
use crate::exec::{receive, submit};
use crate::files::Request;

/// `--input @FILE` is JSON/1, so it is bounded by the JSON/1 document limit.
pub(crate) const MAX_INPUT_FILE_BYTES: u64 = flow::json::MAX_DOCUMENT_BYTES as u64;

/// One Run as a door was given it, each value as written.
#[derive(Clone, Copy)]
pub struct Given<'a> {
    pub target: &'a str,
    pub timeout: Option<&'a str>,
    pub key: Option<&'a str>,
    /// `--input`: inline JSON/1, or `@FILE` relative to `base`; `{}` when absent.
    pub input: Option<&'a str>,
    pub attach: &'a [String],
    pub select: &'a [String],
    pub receive: &'a [String],
    /// The directory relative paths are read from.
    pub base: &'a Path,
}

/// One Run as asked, parsed and checked on its own (not yet against a
/// target: that is [`submit::check_declared`]).
pub struct Ask {
    pub checked: submit::Asked,
    pub receive: Vec<String>,
    pub request: Request,
    pub input: Value,
}

impl Ask {
    pub fn parse(given: &Given) -> Result<Ask, Error> {
        let checked = submit::check(given.target, given.timeout, given.key)?;
        let receive = receive::parse(given.receive)?;
        let request = Request::parse(given.attach, given.select)?;
        let input = input(given.input, given.base)?;
        Ok(Ask {
            checked,
            receive,
            request,
            input,
        })
    }
}

/// `--timeout`: [`submit::DEFAULT_TIMEOUT`] when absent.
pub fn timeout(text: Option<&str>) -> Result<std::time::Duration, Error> {
    match text {
        None => Ok(submit::DEFAULT_TIMEOUT),
        Some(text) => submit::parse_timeout(text).ok_or(Error::TimeoutInvalid),
    }
}

/// `--input JSON|@FILE`. A file is opened once, must be a regular
/// non-symlink file, is bounded, and is parsed as JSON/1.
pub fn input(text: Option<&str>, base: &Path) -> Result<Value, Error> {
    // The reference's texts (the reference-texts test); a refusal about a
    // local file names no host path, since a message can reach logs and
    // other people.
    let invalid = |m: &'static str| Error::InputInvalid(m);
    let Some(text) = text else {
        return Ok(Value::Object(Default::default()));
    };
    let Some(file) = text.strip_prefix('@') else {
        return flow::json::parse(text.as_bytes())
            .map_err(|_| invalid("--input must be FLOW JSON/1"));
    };
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let unreadable = || invalid("the selected --input file cannot be read");
    let mut handle = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(base.join(file))
        .map_err(|e| match e.raw_os_error() {
            Some(nix::libc::ELOOP) => invalid("--input file cannot be a symbolic link"),
            Some(nix::libc::ENOENT) => invalid("the selected --input file does not exist"),
            _ => unreadable(),
        })?;
    let meta = handle.metadata().map_err(|_| unreadable())?;
    if !meta.is_file() {
        return Err(invalid("the selected --input file is not a regular file"));
    }
    if meta.len() > MAX_INPUT_FILE_BYTES {
        return Err(invalid(
            "the selected --input file is larger than a FLOW JSON/1 document may be",
        ));
    }
    let mut bytes = Vec::new();
    Read::by_ref(&mut handle)
        .take(MAX_INPUT_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| unreadable())?;
    let after = handle.metadata().map_err(|_| unreadable())?;
    if bytes.len() as u64 != meta.len()
        || after.len() != meta.len()
        || after.modified().ok() != meta.modified().ok()
    {
        return Err(invalid(
            "the selected --input file changed while it was read",
        ));
    }
    flow::json::parse(&bytes).map_err(|_| invalid("the selected --input file is not FLOW JSON/1"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_quoted_at_string_is_inline_input() {
        let value = input(Some("\"@notes\""), Path::new("/nonexistent")).unwrap();
        assert_eq!(value, json!("@notes"));
        assert_eq!(input(None, Path::new(".")).unwrap(), json!({}));
        let err = input(Some("@/nonexistent/input.json"), Path::new(".")).unwrap_err();
        assert_eq!(err.code(), "JIG_RUN_INPUT_INVALID");
    }

    #[test]
    fn an_input_file_is_read_at_the_json1_document_limit_and_refused_past_it() {
        let dir = tempfile::tempdir().unwrap();
        // `{}` padded with whitespace: a JSON/1 document of exactly the size.
        let document = |bytes: u64| format!("{{}}{}", " ".repeat(bytes as usize - 2));
        std::fs::write(dir.path().join("at.json"), document(MAX_INPUT_FILE_BYTES)).unwrap();
        std::fs::write(
            dir.path().join("past.json"),
            document(MAX_INPUT_FILE_BYTES + 1),
        )
        .unwrap();
        assert_eq!(input(Some("@at.json"), dir.path()).unwrap(), json!({}));
        let err = input(Some("@past.json"), dir.path()).unwrap_err();
        assert_eq!(err.code(), "JIG_RUN_INPUT_INVALID");
        assert_eq!(
            err.to_string(),
            "the selected --input file is larger than a FLOW JSON/1 document may be"
        );
    }

    #[test]
    fn the_first_fault_refuses_in_the_order_asked() {
        let given = Given {
            target: "nonsense",
            timeout: Some("soon"),
            key: None,
            input: Some("not json"),
            attach: &[],
            select: &[],
            receive: &[],
            base: Path::new("."),
        };
        let code = |given: &Given| Ask::parse(given).err().map(|e| e.code());
        assert_eq!(code(&given), Some("JIG_RUN_TARGET_INVALID"));
        let given = Given {
            target: "flow:flows/hello",
            ..given
        };
        assert_eq!(code(&given), Some("JIG_RUN_TIMEOUT_INVALID"));
        let given = Given {
            timeout: None,
            ..given
        };
        assert_eq!(code(&given), Some("JIG_RUN_INPUT_INVALID"));
        let ask = Ask::parse(&Given {
            input: Some("{\"a\":1}"),
            ..given
        })
        .unwrap();
        assert_eq!(ask.input, json!({"a": 1}));
        assert_eq!(ask.checked.timeout, submit::DEFAULT_TIMEOUT);
    }
}
