//! Run/1 conformance: plays the host side of the public Run/1 corpus against
//! a component command and reports each case.
//!
//! It owns only the host-peer checks a component must pass (the Run/1 conformance scenarios,
//! "What an independent host peer checks of a component"). It never knows
//! about projects, admission or sandboxes, and it never trusts a component's
//! output beyond what the wire rules allow.

pub mod cases;
pub mod digest;
pub mod session;

pub use cases::{Case, Target, CASES};
pub use session::{Component, Session};

/// The outcome of one case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub name: &'static str,
    pub result: Result<(), String>,
}

impl Verdict {
    /// `PASS name` or `FAIL name: reason`.
    pub fn line(&self) -> String {
        match &self.result {
            Ok(()) => format!("PASS {}", self.name),
            Err(reason) => format!("FAIL {}: {reason}", self.name),
        }
    }
}

/// The components under test; cases for an absent component are skipped.
#[derive(Debug, Clone, Default)]
pub struct Components {
    pub standard: Option<Component>,
    pub matrix: Option<Component>,
    pub channels: Option<Component>,
    pub broadcast: Option<Component>,
    pub channel_wiring: Option<Component>,
    pub contract_digest: Option<Component>,
}

impl Components {
    /// The component a target names, if given.
    pub fn get(&self, target: Target) -> Option<&Component> {
        match target {
            Target::Standard => self.standard.as_ref(),
            Target::Matrix => self.matrix.as_ref(),
            Target::Channels => self.channels.as_ref(),
            Target::Broadcast => self.broadcast.as_ref(),
            Target::ChannelWiring => self.channel_wiring.as_ref(),
            Target::ContractDigest => self.contract_digest.as_ref(),
        }
    }
}

/// Runs every case whose target component was given and whose name
/// contains `filter` (when set), calling `report` as each case finishes.
pub fn run(
    components: &Components,
    filter: Option<&str>,
    mut report: impl FnMut(&Verdict),
) -> Vec<Verdict> {
    let mut verdicts = Vec::new();
    for case in CASES {
        if filter.is_some_and(|f| !case.name.contains(f)) {
            continue;
        }
        let Some(component) = components.get(case.target) else {
            continue;
        };
        let verdict = Verdict {
            name: case.name,
            result: (case.run)(component),
        };
        report(&verdict);
        verdicts.push(verdict);
    }
    verdicts
}
