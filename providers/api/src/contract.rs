//! Exact contract identities (Capability Contract/1 §3) and the descriptors a
//! provider serves.

use serde_json::Value;

/// Contract URI + exact SemVer + exact descriptor digest. Two identities
/// match only when all three strings are equal.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct ContractIdentity {
    pub id: String,
    pub version: String,
    /// `sha256:<64 lowercase hex>` over the domain-separated RFC 8785 bytes.
    pub digest: String,
}

impl ContractIdentity {
    /// The identity of a validated descriptor.
    pub fn of(contract: &flow::contract::Contract) -> ContractIdentity {
        ContractIdentity {
            id: contract.id.clone(),
            version: contract.version.clone(),
            digest: contract.digest.clone(),
        }
    }
}

impl std::fmt::Display for ContractIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{} ({})", self.id, self.version, self.digest)
    }
}

/// One exact contract a provider serves, with its complete descriptor.
#[derive(Clone, Debug, PartialEq)]
pub struct ServedContract {
    pub identity: ContractIdentity,
    pub descriptor: Value,
}

impl ServedContract {
    /// Validates descriptor bytes and derives their exact identity. A
    /// provider never states its own digest: the host computes it.
    pub fn from_descriptor_bytes(
        bytes: &[u8],
    ) -> Result<ServedContract, flow::contract::ContractError> {
        flow::contract::Contract::parse(bytes).map(|c| ServedContract::from(&c))
    }

    /// The method object named `method`, if the contract declares it.
    pub fn method(&self, method: &str) -> Option<&Value> {
        self.descriptor.get("methods")?.get(method)
    }
}

impl From<&flow::contract::Contract> for ServedContract {
    fn from(contract: &flow::contract::Contract) -> ServedContract {
        ServedContract {
            identity: ContractIdentity::of(contract),
            descriptor: contract.descriptor.clone(),
        }
    }
}
