//! The TCP listener's bearer token: made by `jig serve --new-token`, read
//! at start only if it is long enough and private to its owner (as ssh
//! refuses a private key others can read), and checked for every TCP
//! request and console sign-in behind the per-peer brake
//! ([`super::throttle`]).

use std::path::Path;
use std::sync::Arc;

use subtle::ConstantTimeEq;

use super::listen::Peer;
use super::throttle::Throttle;
use crate::Error;

/// The shortest token `jig serve` accepts, in bytes.
pub const MIN_TOKEN_BYTES: usize = 32;
/// The bearer token file is small; anything larger is not a token.
pub const MAX_TOKEN_BYTES: u64 = 4096;
/// Random bytes in a token `--new-token` writes (as hex, twice as many).
const NEW_TOKEN_RANDOM_BYTES: usize = 32;
/// How to make a token that meets the rules, for every refusal.
const HOW: &str = "make one with jig serve --new-token FILE";

/// The token and the brake on guessing it, shared by a listener's API and
/// console.
pub struct Bearer {
    token: Vec<u8>,
    throttle: Throttle,
}

impl Bearer {
    pub fn new(token: Vec<u8>) -> Bearer {
        Bearer {
            token,
            throttle: Throttle::default(),
        }
    }

    /// Whether `given` is the token, unless `peer` failed too often lately:
    /// then `JIG_AUTH_THROTTLED` without comparing. A wrong token counts
    /// against its peer.
    pub fn check(&self, peer: Option<Peer>, given: Option<&[u8]>) -> Result<(), Error> {
        let peer = peer.map(|p| p.0);
        if let Some(wait) = peer.and_then(|p| self.throttle.wait(p)) {
            return Err(Error::Throttled {
                message: format!(
                    "too many failed authentications from this address; retry in {}s",
                    wait.as_secs().max(1)
                ),
                retry_after: wait,
            });
        }
        if given.is_some_and(|given| same(given, &self.token)) {
            return Ok(());
        }
        if let Some(peer) = peer {
            self.throttle.failed(peer);
        }
        Err(Error::Unauthenticated(
            "a valid bearer token is required".into(),
        ))
    }
}

/// Equal in time independent of where the bytes differ.
pub fn same(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

/// Read the bearer token TCP clients must present: refused unless the
/// file is private to its owner and holds at least [`MIN_TOKEN_BYTES`].
pub fn read_token(path: &Path) -> Result<Arc<Bearer>, Error> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path)
        .map_err(|e| Error::Config(format!("token file {}: {e}", path.display())))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(Error::TokenWeak(format!(
            "token file {} is accessible by group or others (mode {mode:04o}): chmod 600 it, \
             or {HOW}",
            path.display()
        )));
    }
    let token = read_bytes(path)?;
    if token.len() < MIN_TOKEN_BYTES {
        return Err(Error::TokenWeak(format!(
            "token file {} holds {} bytes, fewer than the {MIN_TOKEN_BYTES} a token needs: {HOW}",
            path.display(),
            token.len()
        )));
    }
    Ok(Arc::new(Bearer::new(token)))
}

/// A token file's bytes, trimmed, as a `--server` client sends them (the
/// daemon judges the token; [`read_token`] holds its own to the rules).
pub fn read_bytes(path: &Path) -> Result<Vec<u8>, Error> {
    let unreadable =
        |e: std::io::Error| Error::Config(format!("token file {}: {e}", path.display()));
    let meta = std::fs::metadata(path).map_err(unreadable)?;
    if meta.len() > MAX_TOKEN_BYTES {
        return Err(Error::Config(format!(
            "token file {} is larger than {MAX_TOKEN_BYTES} bytes",
            path.display()
        )));
    }
    let bytes = std::fs::read(path).map_err(unreadable)?;
    let token = bytes.trim_ascii().to_vec();
    if token.is_empty() {
        return Err(Error::Config(format!(
            "token file {} is empty",
            path.display()
        )));
    }
    Ok(token)
}

/// `jig serve --new-token FILE`: a fresh random token (hex, then a
/// newline) in a new file of mode 0600; an existing file is never replaced.
pub fn new_token(path: &Path) -> Result<(), Error> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut random = [0u8; NEW_TOKEN_RANDOM_BYTES];
    getrandom::fill(&mut random)
        .map_err(|e| Error::Internal(format!("no randomness for a token: {e}")))?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => Error::TokenExists(format!(
                "{} already exists; --new-token never replaces a file",
                path.display()
            )),
            _ => Error::Config(format!("token file {}: {e}", path.display())),
        })?;
    let mut text = flow::digest::hex(&random);
    text.push('\n');
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| Error::Config(format!("token file {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_token_meets_the_rules_and_is_never_overwritten() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        new_token(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let written = std::fs::read(&path).unwrap();
        assert_eq!(written.len(), 2 * NEW_TOKEN_RANDOM_BYTES + 1);
        assert!(read_token(&path).is_ok());
        assert_eq!(new_token(&path).unwrap_err().code(), "JIG_OUTPUT_EXISTS");
        assert_eq!(std::fs::read(&path).unwrap(), written);
    }

    #[test]
    fn a_short_or_shared_token_is_refused_at_the_bound() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        let write = |text: &str, mode: u32| {
            std::fs::write(&path, text).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        let at_bound = "x".repeat(MIN_TOKEN_BYTES);
        write(&format!("{at_bound}\n"), 0o600);
        assert!(read_token(&path).is_ok());
        write(&at_bound[1..], 0o600);
        let refusal = read_token(&path).err().unwrap();
        assert_eq!(refusal.code(), "JIG_TOKEN_WEAK");
        assert!(refusal.to_string().contains("jig serve --new-token"));
        for mode in [0o640, 0o604, 0o644] {
            write(&at_bound, mode);
            assert_eq!(read_token(&path).err().unwrap().code(), "JIG_TOKEN_WEAK");
        }
        write(&at_bound, 0o400);
        assert!(read_token(&path).is_ok());
    }
}
