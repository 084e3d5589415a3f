//! The providers a host has loaded, indexed by exact contract identity.

use std::collections::HashMap;
use std::sync::Arc;

use crate::{ContractIdentity, Provider, RegistryError};

/// Maps each exact contract identity to the one provider serving it.
#[derive(Default, Clone)]
pub struct Registry {
    providers: Vec<Arc<dyn Provider>>,
    by_identity: HashMap<ContractIdentity, usize>,
}

impl Registry {
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Adds a provider. Refused, leaving the registry unchanged, when its
    /// name is taken or another provider already serves one of its exact
    /// contract identities.
    pub fn add(&mut self, provider: Arc<dyn Provider>) -> Result<(), RegistryError> {
        if self.providers.iter().any(|p| p.name() == provider.name()) {
            return Err(RegistryError::NameUsedTwice(provider.name().to_owned()));
        }
        let index = self.providers.len();
        let mut claimed: HashMap<&ContractIdentity, ()> = HashMap::new();
        for served in provider.contracts() {
            let identity = &served.identity;
            if let Some(&other) = self.by_identity.get(identity) {
                return Err(RegistryError::ContractServedTwice {
                    identity: identity.clone(),
                    first: self.providers[other].name().to_owned(),
                    second: provider.name().to_owned(),
                });
            }
            claimed.insert(identity, ());
        }
        for identity in claimed.into_keys() {
            self.by_identity.insert(identity.clone(), index);
        }
        self.providers.push(provider);
        Ok(())
    }

    /// The provider serving exactly `identity` (id, version and digest).
    pub fn resolve(&self, identity: &ContractIdentity) -> Option<Arc<dyn Provider>> {
        self.by_identity
            .get(identity)
            .map(|&i| Arc::clone(&self.providers[i]))
    }

    /// Every provider, in the order added.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Provider>> {
        self.providers.iter()
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.providers.iter().map(|p| p.name()))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::{CallContext, CallError, ServedContract};

    struct Fixed {
        name: &'static str,
        contracts: Vec<ServedContract>,
    }

    impl Provider for Fixed {
        fn name(&self) -> &str {
            self.name
        }
        fn contracts(&self) -> &[ServedContract] {
            &self.contracts
        }
        fn call(
            &self,
            _: &CallContext,
            _: &str,
            _: &Value,
            _: Arc<dyn crate::ChannelPorts>,
        ) -> Result<Value, CallError> {
            Ok(json!(self.name))
        }
    }

    fn served(version: &str, digest: &str) -> ServedContract {
        ServedContract {
            identity: ContractIdentity {
                id: "https://example.org/contracts/kv".to_owned(),
                version: version.to_owned(),
                digest: digest.to_owned(),
            },
            descriptor: json!({}),
        }
    }

    fn fixed(name: &'static str, contracts: Vec<ServedContract>) -> Arc<dyn Provider> {
        Arc::new(Fixed { name, contracts })
    }

    #[test]
    fn resolves_only_the_exact_triple() {
        let mut registry = Registry::new();
        registry
            .add(fixed("a", vec![served("1.0.0", "sha256:aa")]))
            .unwrap();
        registry
            .add(fixed("b", vec![served("1.0.0", "sha256:bb")]))
            .unwrap();
        let a = registry
            .resolve(&served("1.0.0", "sha256:aa").identity)
            .unwrap();
        assert_eq!(a.name(), "a");
        let b = registry
            .resolve(&served("1.0.0", "sha256:bb").identity)
            .unwrap();
        assert_eq!(b.name(), "b");
        assert!(registry
            .resolve(&served("2.0.0", "sha256:aa").identity)
            .is_none());
        assert_eq!(registry.iter().count(), 2);
    }

    #[test]
    fn same_identity_twice_is_refused_and_leaves_registry_unchanged() {
        let mut registry = Registry::new();
        registry
            .add(fixed("a", vec![served("1.0.0", "sha256:aa")]))
            .unwrap();
        let err = registry
            .add(fixed(
                "b",
                vec![served("3.0.0", "sha256:cc"), served("1.0.0", "sha256:aa")],
            ))
            .unwrap_err();
        assert_eq!(err.code(), "PROVIDER_CONFLICT");
        assert!(registry
            .resolve(&served("3.0.0", "sha256:cc").identity)
            .is_none());
        assert_eq!(registry.iter().count(), 1);
    }

    #[test]
    fn same_name_twice_is_refused() {
        let mut registry = Registry::new();
        registry.add(fixed("a", vec![])).unwrap();
        let err = registry.add(fixed("a", vec![])).unwrap_err();
        assert_eq!(err.code(), "PROVIDER_CONFLICT");
    }
}
