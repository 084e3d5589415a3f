//! How a SHA-256 is spelled: lowercase hexadecimal, and as a digest
//! `sha256:<64 lowercase hex>` (Package/1, Capability Contract/1 and every
//! host digest above them). One spelling, so two digests of the same bytes
//! compare equal wherever they were made.

use sha2::{Digest, Sha256};

/// The prefix of a SHA-256 digest.
const SHA256_PREFIX: &str = "sha256:";

/// `bytes` as lowercase hexadecimal, two digits a byte.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// The SHA-256 of `bytes` as 64 lowercase hex digits.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// The SHA-256 of `bytes` as a digest, `sha256:<64 lowercase hex>`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    finish(Sha256::new_with_prefix(bytes))
}

/// The digest of everything `hasher` has read, `sha256:<64 lowercase hex>`,
/// for callers that hash a stream or several parts.
pub fn finish(hasher: Sha256) -> String {
    format!("{SHA256_PREFIX}{}", hex(&hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FIPS 180-2's first example, "abc", and the empty message.
    #[test]
    fn known_answers() {
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(sha256_hex(b"abc"), abc);
        assert_eq!(sha256_digest(b"abc"), format!("sha256:{abc}"));
        let mut parts = Sha256::new();
        parts.update(b"a");
        parts.update(b"bc");
        assert_eq!(finish(parts), format!("sha256:{abc}"));
        assert_eq!(
            sha256_digest(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn hex_is_two_lowercase_digits_a_byte() {
        assert_eq!(hex(&[]), "");
        assert_eq!(hex(&[0x00, 0x0f, 0xa0, 0xff]), "000fa0ff");
    }
}
