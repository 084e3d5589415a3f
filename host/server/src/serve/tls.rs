//! TLS for the TCP listener: a certificate chain and its private key, read
//! from PEM files at start (a file that cannot be read or parsed, or a key
//! that is not the certificate's, refuses the start) and again on SIGHUP.
//! A reload swaps the pair every later handshake is answered with; the
//! listener and the connections already open are untouched, and a pair
//! that fails to load leaves the one in use in place.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio_rustls::TlsAcceptor;

use crate::Error;

/// A certificate chain or key file larger than this is not one (a chain
/// of a few certificates is a few KiB).
pub const MAX_PEM_BYTES: u64 = 1024 * 1024;

/// Where the certificate chain and its key are read from.
#[derive(Debug, Clone)]
pub struct Files {
    /// The chain, leaf first, as PEM `CERTIFICATE` blocks.
    pub cert: PathBuf,
    /// The leaf's private key: PEM PKCS#8, PKCS#1 (RSA) or SEC1 (EC).
    pub key: PathBuf,
}

/// The listener's TLS: the acceptor every TCP connection goes through and
/// the pair it presents, which [`Tls::reload`] replaces.
pub struct Tls {
    files: Files,
    provider: Arc<CryptoProvider>,
    current: Arc<Current>,
    acceptor: TlsAcceptor,
}

/// The pair a handshake is answered with.
#[derive(Debug)]
struct Current(RwLock<Arc<CertifiedKey>>);

impl ResolvesServerCert for Current {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().unwrap_or_else(|p| p.into_inner()).clone())
    }
}

impl Tls {
    /// Read and check `files`; refused with `JIG_CONFIG_INVALID` (naming
    /// the file and what is wrong) unless both are usable and belong
    /// together.
    pub fn load(files: Files) -> Result<Tls, Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let pair = certified(&files, &provider)?;
        let current = Arc::new(Current(RwLock::new(pair)));
        let mut config = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Internal(format!("TLS: {e}")))?
            .with_no_client_auth()
            .with_cert_resolver(current.clone());
        // HTTP/1.1 only, as the listener serves.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Tls {
            files,
            provider,
            current,
            acceptor: TlsAcceptor::from(Arc::new(config)),
        })
    }

    /// Read the files again and present the new pair from the next
    /// handshake on; on failure the pair in use stays and the refusal says
    /// why.
    pub fn reload(&self) -> Result<(), Error> {
        let pair = certified(&self.files, &self.provider)?;
        *self.current.0.write().unwrap_or_else(|p| p.into_inner()) = pair;
        Ok(())
    }

    pub fn files(&self) -> &Files {
        &self.files
    }

    pub fn acceptor(&self) -> TlsAcceptor {
        self.acceptor.clone()
    }
}

/// The chain and key in `files`, checked to belong together.
fn certified(files: &Files, provider: &CryptoProvider) -> Result<Arc<CertifiedKey>, Error> {
    let invalid =
        |path: &Path, what: String| Error::Config(format!("TLS file {}: {what}", path.display()));
    let pem = read(&files.cert)?;
    let chain = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(&files.cert, format!("not a PEM certificate chain: {e}")))?;
    if chain.is_empty() {
        return Err(invalid(
            &files.cert,
            "holds no PEM CERTIFICATE block".into(),
        ));
    }
    let pem = read(&files.key)?;
    let key = PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        invalid(
            &files.key,
            format!("not a PEM private key (PKCS#8, RSA or EC): {e}"),
        )
    })?;
    let signing = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| invalid(&files.key, format!("unusable private key: {e}")))?;
    let pair = CertifiedKey::new(chain, signing);
    pair.keys_match().map_err(|e| {
        Error::Config(format!(
            "TLS key {} does not belong to the certificate {} (its first, the leaf): {e}",
            files.key.display(),
            files.cert.display()
        ))
    })?;
    Ok(Arc::new(pair))
}

/// A PEM file's bytes, at most [`MAX_PEM_BYTES`].
fn read(path: &Path) -> Result<Vec<u8>, Error> {
    let unreadable = |e: std::io::Error| Error::Config(format!("TLS file {}: {e}", path.display()));
    let meta = std::fs::metadata(path).map_err(unreadable)?;
    if meta.len() > MAX_PEM_BYTES {
        return Err(Error::Config(format!(
            "TLS file {}: larger than {MAX_PEM_BYTES} bytes, not a PEM file",
            path.display()
        )));
    }
    std::fs::read(path).map_err(unreadable)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(cert: &[u8]) -> String {
        let dir = tempfile::tempdir().unwrap();
        let files = Files {
            cert: dir.path().join("cert.pem"),
            key: dir.path().join("key.pem"),
        };
        std::fs::write(&files.cert, cert).unwrap();
        std::fs::write(&files.key, b"").unwrap();
        let refused = Tls::load(files).err().unwrap();
        assert_eq!(refused.code(), "JIG_CONFIG_INVALID");
        refused.to_string()
    }

    #[test]
    fn a_pem_file_is_read_up_to_the_bound_and_refused_past_it() {
        let at_bound = vec![b'x'; MAX_PEM_BYTES as usize];
        let read = refusal(&at_bound);
        assert!(read.contains("holds no PEM CERTIFICATE block"), "{read}");
        let past = vec![b'x'; MAX_PEM_BYTES as usize + 1];
        let refused = refusal(&past);
        assert!(refused.contains("larger than"), "{refused}");
    }
}
