//! The capability providers this host offers, as the operator configured
//! them: loaded on demand, pinned by file digest at review, and checked again
//! before a Run calls them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use flow::json::Value;
use jig_provider_api::{ContractIdentity, Provider, ProviderDecl, ProviderKind};
use serde_json::json;

/// Is this one of the Jig contracts the portable `jig.lock` names (its
/// schema is closed to them)? Our own contracts are host policy.
pub(crate) fn portable_contract(id: &str) -> bool {
    id.starts_with("https://jig.md/contracts/")
}

/// Is this builtin a Project Command (candidate or credentialed)?
pub(crate) fn is_project_command(name: Option<&str>) -> bool {
    matches!(
        name,
        Some("project-command" | "project-command-credentialed")
    )
}

/// The builtin name of a Jig contract URI (any version).
pub(crate) fn builtin_contract(id: &str) -> Option<&'static str> {
    jig_provider_builtin::CONTRACTS
        .iter()
        .find(|(uri, ..)| *uri == id)
        .map(|(_, name, ..)| *name)
}

/// The builtin serving exactly this contract identity, if any: the URI,
/// version and digest must all match (Capability Contract/1 §3).
pub(crate) fn builtin_exact(id: &str, version: &str, digest: &str) -> Option<&'static str> {
    jig_provider_builtin::CONTRACTS
        .iter()
        .find(|(uri, _, v, d)| *uri == id && *v == version && *d == digest)
        .map(|(_, name, ..)| *name)
}

/// Is this Plan pin a builtin's (`{"kind": "builtin", "name"}`)? Its name.
pub(crate) fn builtin_pin(pin: &Value) -> Option<&str> {
    if pin.get("kind").and_then(Value::as_str) == Some("builtin") {
        pin.get("name").and_then(Value::as_str)
    } else {
        None
    }
}

pub struct ProviderSet {
    decls: Vec<ProviderDecl>,
    loaded: Mutex<BTreeMap<String, Arc<dyn Provider>>>,
}

impl ProviderSet {
    pub fn new(decls: Vec<ProviderDecl>) -> ProviderSet {
        ProviderSet {
            decls,
            loaded: Mutex::new(BTreeMap::new()),
        }
    }

    fn decl(&self, name: &str) -> Option<&ProviderDecl> {
        self.decls.iter().find(|d| d.name == name)
    }

    fn load(&self, decl: &ProviderDecl) -> Result<Arc<dyn Provider>, String> {
        if let Some(p) = self.loaded.lock().unwrap().get(&decl.name) {
            return Ok(p.clone());
        }
        if decl.kind != ProviderKind::Wasm && !decl.grants.is_empty() {
            // A native library runs with the host's own rights; granting it
            // something would promise a sandbox that is not there.
            return Err(format!(
                "provider {:?}: grants apply to wasm providers only",
                decl.name
            ));
        }
        let provider = match decl.kind {
            ProviderKind::Wasm => jig_provider_wasm::WasmProvider::load(decl),
            ProviderKind::Native => jig_provider_native::NativeProvider::load(decl),
            ProviderKind::Builtin => {
                return Err(format!(
                    "builtin provider {:?} is not available in this build",
                    decl.name
                ))
            }
        }
        .map_err(|e| format!("provider {:?} failed to load: {e}", decl.name))?;
        self.loaded
            .lock()
            .unwrap()
            .insert(decl.name.clone(), provider.clone());
        Ok(provider)
    }

    fn file_digest(decl: &ProviderDecl) -> Result<String, String> {
        let path = decl
            .path
            .as_ref()
            .ok_or_else(|| format!("provider {:?} has no path", decl.name))?;
        let bytes = std::fs::read(path)
            .map_err(|e| format!("provider {:?}: {}: {e}", decl.name, path.display()))?;
        Ok(flow::digest::sha256_digest(&bytes))
    }

    /// Does any configured provider serve this exact identity? An operator's
    /// provider for a Jig contract takes the place of the builtin.
    pub fn serves(&self, id: &str, version: &str, digest: &str) -> Result<bool, String> {
        let wanted = ContractIdentity {
            id: id.into(),
            version: version.into(),
            digest: digest.into(),
        };
        for decl in &self.decls {
            if self
                .load(decl)?
                .contracts()
                .iter()
                .any(|c| c.identity == wanted)
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Choose the provider serving an exact contract identity, as a pin
    /// `{name, kind, fileDigest}` for the Plan.
    pub(crate) fn plan_for(&self, id: &str, version: &str, digest: &str) -> Result<Value, String> {
        let wanted = ContractIdentity {
            id: id.into(),
            version: version.into(),
            digest: digest.into(),
        };
        let mut found = Vec::new();
        for decl in &self.decls {
            let provider = self.load(decl)?;
            if provider.contracts().iter().any(|c| c.identity == wanted) {
                found.push(decl);
            }
        }
        match found.as_slice() {
            [decl] => {
                let mut pin = json!({
                    "name": decl.name,
                    "kind": kind_name(&decl.kind),
                    // The digest of the very bytes that were loaded and asked
                    // for their contracts.
                    "fileDigest": self.load(decl)?.artifact_digest().ok_or_else(|| {
                        format!("provider {:?} has no artifact to pin", decl.name)
                    })?,
                });
                // The operator's grants are part of the reviewed identity;
                // a provider granted nothing pins as it always did.
                if let Some(digest) = decl.grants.digest() {
                    pin["grants"] = json!(decl.grants.names());
                    pin["grantsDigest"] = json!(digest);
                }
                Ok(pin)
            }
            [] => Err(format!(
                "no configured provider serves {id} {version} ({digest})"
            )),
            _ => Err(format!(
                "more than one configured provider serves {id} {version}; keep one"
            )),
        }
    }

    /// Are the grants of every configured provider these pins name still
    /// the reviewed ones? `Err` names the first that changed: a Run must
    /// not start (REVIEW_REQUIRED) until the change is reviewed.
    pub(crate) fn verify_grants(&self, pins: &Value) -> Result<(), String> {
        for pin in pins.as_object().into_iter().flat_map(|m| m.values()) {
            if builtin_pin(pin).is_some() {
                continue;
            }
            let name = pin.get("name").and_then(Value::as_str).unwrap_or_default();
            let Some(decl) = self.decl(name) else {
                continue; // resolve reports a provider no longer configured
            };
            if !Self::grants_match(decl, pin) {
                return Err(format!(
                    "the grants of provider {name:?} changed since review"
                ));
            }
        }
        Ok(())
    }

    fn grants_match(decl: &ProviderDecl, pin: &Value) -> bool {
        pin.get("grantsDigest").and_then(Value::as_str) == decl.grants.digest().as_deref()
    }

    /// The provider a reviewed pin names, if it is still the same file and
    /// still serves the identity. `Err` means the execution environment changed.
    pub fn resolve(
        &self,
        pin: &Value,
        identity: &ContractIdentity,
    ) -> Result<Arc<dyn Provider>, String> {
        let name = pin.get("name").and_then(Value::as_str).unwrap_or_default();
        let decl = self
            .decl(name)
            .ok_or_else(|| format!("provider {name:?} is no longer configured"))?;
        let pinned = pin.get("fileDigest").and_then(Value::as_str);
        let changed = || format!("provider {name:?} changed since review");
        if !Self::grants_match(decl, pin) {
            return Err(changed());
        }
        let loaded = self.loaded.lock().unwrap().get(name).cloned();
        let provider = match loaded {
            Some(provider) => provider,
            None => {
                // Never load (and so never run) anything but the reviewed
                // file: its digest is checked before it is opened.
                if Some(Self::file_digest(decl)?.as_str()) != pinned {
                    return Err(changed());
                }
                self.load(decl)?
            }
        };
        // The bytes actually loaded are the reviewed ones too (the file
        // could change between the check and the load). Once loaded, this
        // is all a call costs: the file is not read again.
        if provider.artifact_digest() != pinned {
            return Err(changed());
        }
        if !provider.contracts().iter().any(|c| &c.identity == identity) {
            return Err(format!(
                "provider {name:?} no longer serves {}",
                identity.id
            ));
        }
        Ok(provider)
    }
}

fn kind_name(kind: &ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Wasm => "wasm",
        ProviderKind::Native => "native",
        ProviderKind::Builtin => "builtin",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jig_provider_builtin::agent;

    /// The three Agent Run revisions the reference published, digested
    /// by our own Capability Contract/1 code: each is exactly an identity
    /// the builtin serves, and the prefixes are the ones projects name.
    #[test]
    fn every_published_agent_run_revision_is_served_by_the_builtin() {
        let revisions = [
            (
                include_str!("../../../flow/tests/data/agent-run.capability.json"),
                agent::CONTRACT_DIGEST,
                "sha256:b43fba88",
            ),
            (
                include_str!("../../../flow/tests/data/variants/agent-run-299110c.capability.json"),
                agent::EVENTS_NO_DELIVERY_DIGEST,
                "sha256:5e7df440",
            ),
            (
                include_str!("../../../flow/tests/data/variants/agent-run-b38b3a9.capability.json"),
                agent::NO_CHANNELS_DIGEST,
                "sha256:5a0f0649",
            ),
        ];
        for (descriptor, pinned, prefix) in revisions {
            let contract = flow::contract::Contract::parse(descriptor.as_bytes()).unwrap();
            assert_eq!(contract.digest, pinned);
            assert!(pinned.starts_with(prefix), "{pinned}");
            assert_eq!(contract.id, "https://jig.md/contracts/agent-run");
            assert_eq!(contract.version, "1.0.0");
            assert!(contract.method("run").is_some());
            assert_eq!(
                builtin_exact(&contract.id, &contract.version, &contract.digest),
                Some("agent-run")
            );
        }
        // Any other revision of the same id and version is not served.
        assert_eq!(
            builtin_exact(
                "https://jig.md/contracts/agent-run",
                "1.0.0",
                "sha256:0000000000000000000000000000000000000000000000000000000000000000"
            ),
            None
        );
    }
}
