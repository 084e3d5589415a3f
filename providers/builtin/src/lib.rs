//! The builtin capabilities of a Jig host (docs/src/agents.md, commands.md, runs.md): their exact
//! contracts, the validation of their inputs and policies, and the wire
//! clients of their effects.
//!
//! This crate owns policy and protocol only. It never starts a process,
//! opens an envelope or touches a project: the host lends it those through
//! narrow interfaces, never the reverse (ARCHITECTURE.md, Providers).

pub mod agent;
pub mod checkpoint;
pub mod command;

/// Every exact contract a builtin serves: the Jig contracts (Agent Run,
/// Project Command, Run Checkpoint) and our credentialed Project Command (seed 003; its descriptor
/// ships in `contracts/`), as (contract URI, builtin name, exact version,
/// exact Capability Contract/1 digest).
///
/// The reference published Agent Run 1.0.0 in three revisions, and
/// projects written for it carry any of them, so the builtin serves each
/// exact identity: the current one; the one whose `events` channel names
/// no `delivery` (either profile is accepted, and the SDKs open it
/// direct); and the one with no channels at all (its Flows simply have no
/// `events` port). The method and its semantics are the same in all three.
pub const CONTRACTS: [(&str, &str, &str, &str); 6] = [
    (
        agent::CONTRACT_ID,
        "agent-run",
        agent::CONTRACT_VERSION,
        agent::CONTRACT_DIGEST,
    ),
    (
        agent::CONTRACT_ID,
        "agent-run",
        agent::CONTRACT_VERSION,
        agent::EVENTS_NO_DELIVERY_DIGEST,
    ),
    (
        agent::CONTRACT_ID,
        "agent-run",
        agent::CONTRACT_VERSION,
        agent::NO_CHANNELS_DIGEST,
    ),
    (
        checkpoint::CONTRACT_ID,
        "run-checkpoint",
        checkpoint::CONTRACT_VERSION,
        checkpoint::CONTRACT_DIGEST,
    ),
    (
        command::CONTRACT_ID,
        "project-command",
        command::CONTRACT_VERSION,
        command::CONTRACT_DIGEST,
    ),
    (
        command::CREDENTIALED_CONTRACT_ID,
        "project-command-credentialed",
        command::CREDENTIALED_CONTRACT_VERSION,
        command::CREDENTIALED_CONTRACT_DIGEST,
    ),
];

#[cfg(test)]
mod tests {
    use super::CONTRACTS;

    /// Every builtin identity is distinct, and a URI names one builtin.
    #[test]
    fn builtin_identities_are_distinct() {
        for (i, a) in CONTRACTS.iter().enumerate() {
            for b in &CONTRACTS[i + 1..] {
                assert_ne!(a.3, b.3);
                if a.0 == b.0 {
                    assert_eq!(a.1, b.1);
                }
            }
        }
    }

    /// The credentialed Project Command's pinned digest is its shipped
    /// descriptor's.
    #[test]
    fn the_shipped_descriptor_has_the_pinned_digest() {
        let descriptor = include_str!("../contracts/project-command-credentialed.capability.json");
        let contract = flow::contract::Contract::parse(descriptor.as_bytes()).unwrap();
        assert_eq!(
            (
                contract.id.as_str(),
                contract.version.as_str(),
                contract.digest.as_str()
            ),
            (
                super::command::CREDENTIALED_CONTRACT_ID,
                super::command::CREDENTIALED_CONTRACT_VERSION,
                super::command::CREDENTIALED_CONTRACT_DIGEST
            )
        );
    }
}
