//! The capability-provider interface the `jig` host calls, and the registry
//! that maps an exact contract identity to the one provider serving it.
//!
//! This crate owns the host-side vocabulary shared by every kind of provider
//! (WASM component, native library, builtin): contract identities, the call
//! context, the two kinds of call failure, the operator's provider
//! declaration, and the checks every loader applies around a guest call
//! ([`dispatch`]). It must never load or run provider code itself, and it
//! must never put a secret's contents into an error, a log line or `Debug`
//! output.

mod call;
mod channels;
mod config;
mod contract;
pub mod dispatch;
mod error;
pub mod grants;
mod registry;

pub use call::{CallContext, CallError, MAX_MESSAGE_CHARS, WIRE_CODES};
pub use channels::{
    check_granted, not_granted, ChannelItem, ChannelPorts, GrantedPort, NoPorts, PortDirection,
};
pub use config::{ProviderConfig, ProviderDecl, ProviderKind, Secrets, MAX_SECRET_BYTES};
pub use contract::{ContractIdentity, ServedContract};
pub use dispatch::ContractSet;
pub use error::{LoadError, RegistryError};
pub use grants::{CheckedGrants, Grants, Origin};
pub use registry::Registry;

/// A loaded provider serving one or more exact contracts.
pub trait Provider: Send + Sync {
    /// The operator's name for this provider (`[[providers]] name`).
    fn name(&self) -> &str;
    /// The exact contracts this provider serves, each with its descriptor.
    fn contracts(&self) -> &[ServedContract];
    /// Calls `method` of `ctx.contract` with `input`; `ports` reaches the
    /// channel endpoints the caller connected to the method's declared
    /// ports ([`NoPorts`] when none). Shared, because a WASM store must own
    /// what its host imports reach.
    ///
    /// Blocking; the host calls it from a blocking thread and enforces the
    /// deadline around it too.
    fn call(
        &self,
        ctx: &CallContext,
        method: &str,
        input: &serde_json::Value,
        ports: std::sync::Arc<dyn ChannelPorts>,
    ) -> Result<serde_json::Value, CallError>;

    /// `sha256:<hex>` of the exact artifact bytes this provider was loaded
    /// from, for admission to pin; `None` for builtins.
    fn artifact_digest(&self) -> Option<&str> {
        None
    }
}

/// `sha256:<64 lowercase hex>` of artifact bytes, the form
/// [`Provider::artifact_digest`] reports.
pub fn artifact_digest(bytes: &[u8]) -> String {
    flow::digest::sha256_digest(bytes)
}

#[cfg(test)]
mod tests {
    #[test]
    fn artifact_digest_is_prefixed_lowercase_sha256() {
        assert_eq!(
            super::artifact_digest(b"abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
