//! Load-time and registry errors. Activation failures are not Run/1 errors
//! (Run/1 §7), so these carry host codes of their own.

use std::path::PathBuf;

use crate::ContractIdentity;

/// Why a provider could not be loaded. Messages name the provider, a path or
/// a secret's name, never a secret's contents.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The declaration itself is unusable (wrong kind, no path, bad settings).
    #[error("provider {provider}: invalid declaration: {reason}")]
    ConfigInvalid { provider: String, reason: String },
    /// A secret file is missing, unreadable, too large or not UTF-8.
    #[error("provider {provider}: secret {secret} is unusable: {reason}")]
    SecretUnreadable {
        provider: String,
        secret: String,
        reason: String,
    },
    /// The artifact could not be read, compiled, linked or instantiated.
    #[error("provider {provider}: cannot load {}: {reason}", path.display())]
    LoadFailed {
        provider: String,
        path: PathBuf,
        reason: String,
    },
    /// A native library speaks another version of the C ABI.
    #[error("provider {provider}: {} has ABI version {found}, this host speaks {expected}", path.display())]
    AbiMismatch {
        provider: String,
        path: PathBuf,
        found: u32,
        expected: u32,
    },
    /// A descriptor the provider reported is not a valid Capability
    /// Contract/1, or the provider reported one identity twice.
    #[error("provider {provider}: contract {index}: {reason}")]
    ContractInvalid {
        provider: String,
        index: usize,
        reason: String,
    },
}

impl LoadError {
    /// The stable code the CLI maps to an exit status.
    pub fn code(&self) -> &'static str {
        match self {
            LoadError::ConfigInvalid { .. } => "PROVIDER_CONFIG_INVALID",
            LoadError::SecretUnreadable { .. } => "PROVIDER_SECRET_UNREADABLE",
            LoadError::LoadFailed { .. } => "PROVIDER_LOAD_FAILED",
            LoadError::AbiMismatch { .. } => "PROVIDER_ABI_MISMATCH",
            LoadError::ContractInvalid { .. } => "PROVIDER_CONTRACT_INVALID",
        }
    }
}

/// Why a provider could not join the registry.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// Two providers claim the same exact contract identity; the host could
    /// not tell which one a slot is bound to.
    #[error("providers {first} and {second} both serve {identity}")]
    ContractServedTwice {
        identity: ContractIdentity,
        first: String,
        second: String,
    },
    #[error("provider name {0} is used twice")]
    NameUsedTwice(String),
}

impl RegistryError {
    pub fn code(&self) -> &'static str {
        match self {
            RegistryError::ContractServedTwice { .. } => "PROVIDER_CONFLICT",
            RegistryError::NameUsedTwice(_) => "PROVIDER_CONFLICT",
        }
    }
}
