//! Capability Contract/1 §3: "Two descriptors claiming the same URI/version
//! but deriving different digests are incompatible. A publisher, trusted
//! index, or source revision claiming both is reported as equivocation in
//! that authority domain." A project revision is one source revision: every
//! capability descriptor its packages carry is its claim, so one contract
//! ID and version carried with two digests refuses the revision, each
//! claimant named. Nothing outside the revision counts (a provider, another
//! project): an untrusted claimant elsewhere quarantines nothing here.

use std::collections::BTreeMap;

use flow::package::{Package, Use};

use super::Diagnostic;

/// The diagnostic code of a claimant of an equivocated contract version.
pub(crate) const CODE: &str = "PROJECT_CONTRACT_EQUIVOCATION";

/// The slots carrying each digest of one contract version: digest -> the
/// (package path, slot) pairs carrying it.
type Claimants<'a> = BTreeMap<&'a str, Vec<(&'a str, &'a str)>>;

/// One diagnostic per slot that carries a descriptor of a contract version
/// the same revision also carries with another digest; none when every
/// contract version has one digest.
pub(crate) fn check(packages: &BTreeMap<String, Package>) -> Vec<Diagnostic> {
    let mut claims: BTreeMap<(&str, &str), Claimants> = BTreeMap::new();
    for (path, package) in packages {
        for (slot, use_) in &package.metadata().uses {
            if !matches!(use_, Use::Contract { .. }) {
                continue;
            }
            let Some(contract) = package.contract(slot) else {
                continue;
            };
            claims
                .entry((&contract.id, &contract.version))
                .or_default()
                .entry(&contract.digest)
                .or_default()
                .push((path, slot));
        }
    }
    let mut diagnostics = Vec::new();
    for ((id, version), digests) in claims {
        if digests.len() < 2 {
            continue;
        }
        let listed: Vec<&str> = digests.keys().copied().collect();
        for (digest, claimants) in &digests {
            for (path, slot) in claimants {
                diagnostics.push(Diagnostic {
                    code: CODE.into(),
                    path: Some(format!("{path}/FLOW.md")),
                    pointer: Some(format!("/uses/{slot}")),
                    message: format!(
                        "{id} {version} is carried in this project with {} different \
                         descriptors ({}); this slot's is {digest}",
                        listed.len(),
                        listed.join(", ")
                    ),
                });
            }
        }
    }
    diagnostics
}

#[cfg(test)]
mod tests {
    use super::*;

    const STORE: &[u8] =
        include_bytes!("../../../../flow/tests/data/session-store.capability.json");

    /// A package whose `store` slot carries `descriptor`.
    fn carrying(descriptor: &[u8]) -> Package {
        let flow_md = "---\nname: p\ndescription: Uses a store.\nuses:\n  store:\n    \
                       contract: ./contracts/store.capability.json\n---\n";
        Package::from_files(BTreeMap::from([
            ("FLOW.md".to_string(), flow_md.as_bytes().to_vec()),
            ("flow.py".to_string(), b"pass\n".to_vec()),
            (
                "contracts/store.capability.json".to_string(),
                descriptor.to_vec(),
            ),
        ]))
        .unwrap()
    }

    /// The session-store descriptor under the same ID and version with
    /// one more method: another digest.
    fn changed_store() -> Vec<u8> {
        let mut value: serde_json::Value = serde_json::from_slice(STORE).unwrap();
        value["methods"]["forget"] = value["methods"]["read"].clone();
        serde_json::to_vec(&value).unwrap()
    }

    #[test]
    fn one_version_with_two_descriptors_names_every_claimant() {
        let packages = BTreeMap::from([
            ("flows/a".to_string(), carrying(STORE)),
            ("flows/b".to_string(), carrying(&changed_store())),
            ("flows/c".to_string(), carrying(STORE)),
        ]);
        let found = check(&packages);
        let at: Vec<_> = found
            .iter()
            .map(|d| {
                (
                    d.code.as_str(),
                    d.path.as_deref().unwrap(),
                    d.pointer.as_deref().unwrap(),
                )
            })
            .collect();
        assert_eq!(at.len(), 3, "{found:?}");
        for path in ["flows/a/FLOW.md", "flows/b/FLOW.md", "flows/c/FLOW.md"] {
            assert!(at.contains(&(CODE, path, "/uses/store")), "{at:?}");
        }
        assert!(found[0]
            .message
            .contains("https://example.org/contracts/session-store 1.0.0"));
    }

    #[test]
    fn the_same_descriptor_twice_or_another_version_is_no_equivocation() {
        let mut other_version: serde_json::Value = serde_json::from_slice(STORE).unwrap();
        other_version["version"] = "2.0.0".into();
        let packages = BTreeMap::from([
            ("flows/a".to_string(), carrying(STORE)),
            ("flows/b".to_string(), carrying(STORE)),
            (
                "flows/c".to_string(),
                carrying(&serde_json::to_vec(&other_version).unwrap()),
            ),
        ]);
        assert_eq!(check(&packages), vec![]);
    }

    /// The planner refuses such a revision as an invalid candidate (before
    /// it asks whether any provider serves the contract).
    #[test]
    fn review_refuses_the_revision_as_an_invalid_candidate() {
        let packages = BTreeMap::from([
            ("flows/a".to_string(), carrying(STORE)),
            ("flows/b".to_string(), carrying(&changed_store())),
        ]);
        let candidate = super::super::Candidate {
            declarations: jig_project::Declarations {
                flows: packages.keys().cloned().collect(),
                bindings: BTreeMap::new(),
                project: serde_json::json!({}),
                sources: BTreeMap::new(),
            },
            packages,
        };
        let providers = crate::providers::ProviderSet::new(Vec::new());
        let refused = super::super::plan(
            &candidate,
            &crate::config::HostConfig::default(),
            &providers,
            None,
        )
        .unwrap_err();
        assert_eq!(refused.code(), "INVALID_CANDIDATE");
        let codes: Vec<_> = refused
            .diagnostics()
            .iter()
            .map(|d| d.code.as_str())
            .collect();
        assert_eq!(codes, [CODE, CODE], "{refused}");
    }
}
