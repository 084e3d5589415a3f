//! The one scenario list: every corpus case runs against the Rust SDK's
//! examples, the Python SDK's components (`host/python/tests/components/`)
//! and the TypeScript SDK's components (`host/typescript/tests/components/`,
//! under Node, as the TypeScript suite runs them). One test per case and
//! SDK, so a case that one SDK passes and another fails shows by name.

use flow_conformance::{Component, Target, CASES};

use crate::example;

/// The three SDKs whose components the runner drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sdk {
    Rust,
    Python,
    TypeScript,
}

/// The component file name of a target, the same in every SDK.
fn component_name(target: Target) -> &'static str {
    match target {
        Target::Standard => "standard",
        Target::Matrix => "matrix",
        Target::Channels => "channels",
        Target::Broadcast => "broadcast",
        Target::ChannelWiring => "channel_wiring",
        Target::ContractDigest => "contract_digest",
    }
}

fn python(name: &str) -> Component {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../host/python");
    Component {
        argv: vec![
            "/usr/bin/env".into(),
            format!("PYTHONPATH={root}"),
            "PYTHONDONTWRITEBYTECODE=1".into(),
            "python3".into(),
            format!("{root}/tests/components/{name}.py"),
        ],
    }
}

fn typescript(name: &str) -> Component {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../host/typescript");
    Component {
        argv: vec![
            "/usr/bin/env".into(),
            "node".into(),
            format!("{root}/tests/components/{name}.js"),
        ],
    }
}

/// The component of `sdk` that plays `target`.
pub fn component(sdk: Sdk, target: Target) -> Component {
    let name = component_name(target);
    match sdk {
        Sdk::Rust => example(name),
        Sdk::Python => python(name),
        Sdk::TypeScript => typescript(name),
    }
}

fn run_case(name: &str, sdk: Sdk) {
    let case = CASES
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no case {name}"));
    if let Err(reason) = (case.run)(&component(sdk, case.target)) {
        panic!("FAIL {name} ({sdk:?}): {reason}");
    }
}

macro_rules! cases {
    ($($test:ident => $name:literal,)*) => {
        $(
            mod $test {
                use super::{run_case, Sdk};

                #[test]
                fn rust() {
                    run_case($name, Sdk::Rust);
                }

                #[test]
                fn python() {
                    run_case($name, Sdk::Python);
                }

                #[test]
                fn typescript() {
                    run_case($name, Sdk::TypeScript);
                }
            }
        )*

        #[test]
        fn every_case_has_a_test() {
            let tested = [$($name),*];
            for case in CASES {
                assert!(tested.contains(&case.name), "case {} has no test", case.name);
            }
            assert_eq!(tested.len(), CASES.len(), "a test names a case twice");
        }
    };
}

cases! {
    json_framing_fixtures => "json-framing-fixtures",
    json_depth_and_frame_bounds => "json-depth-and-frame-bounds",
    structured_params => "structured-params",
    golden_conversation => "golden-conversation",
    direction_and_request_form => "direction-and-request-form",
    invalid_root_params => "invalid-root-params",
    second_root => "second-root",
    root_cancellation => "root-cancellation",
    malformed_root_cancellation => "malformed-root-cancellation",
    fatal_frames => "fatal-frames",
    root_frame_boundaries => "root-frame-boundaries",
    terminal_half_close => "terminal-half-close",
    response_failures => "response-failures",
    simultaneous_request_ceiling => "simultaneous-request-ceiling",
    request_lifetime_ceiling => "request-lifetime-ceiling",
    operation_join_replay_conflict => "operation-join-replay-conflict",
    joined_waiter_cancellation => "joined-waiter-cancellation",
    uncertain_replay => "uncertain-replay",
    call_cancellation_late_response => "call-cancellation-late-response",
    abandoned_call => "abandoned-call",
    one_flow => "one-flow",
    two_effects => "two-effects",
    channel_direct_drain => "channel-direct-drain",
    channel_direct_lagged => "channel-direct-lagged",
    channel_direct_cancelled_read => "channel-direct-cancelled-read",
    channel_sequence_gap => "channel-sequence-gap",
    channel_broadcast_late_subscriber => "channel-broadcast-late-subscriber",
    channel_broadcast_lagged_subscriber => "channel-broadcast-lagged-subscriber",
    channel_wiring_root => "channel-wiring-root",
    channel_wiring_hosted => "channel-wiring-hosted",
    channel_wiring_root_progress => "channel-wiring-root-progress",
    channel_wiring_worker => "channel-wiring-worker",
    channel_wiring_monitor_drain => "channel-wiring-monitor-drain",
    channel_wiring_monitor_stop => "channel-wiring-monitor-stop",
    channel_wiring_monitor_lagged => "channel-wiring-monitor-lagged",
    contract_digest => "contract-digest",
}

/// The runner's expectation table covers the fixture file exactly.
#[test]
fn every_framing_fixture_has_one_expectation() {
    use flow_conformance::cases::{framing_fixtures, FRAMING_EXPECTATIONS};
    let fixtures = framing_fixtures().unwrap();
    let mut names: Vec<&str> = fixtures.iter().map(|f| f.name.as_str()).collect();
    names.sort_unstable();
    let mut expected: Vec<&str> = FRAMING_EXPECTATIONS.iter().map(|(n, _)| *n).collect();
    expected.sort_unstable();
    assert_eq!(names, expected);
    // A fixture the file calls valid passes framing and JSON/1; it can only
    // fail as an envelope.
    for f in fixtures.iter().filter(|f| f.valid) {
        let reply = FRAMING_EXPECTATIONS.iter().find(|(n, _)| *n == f.name);
        assert_eq!(
            reply.map(|(_, r)| *r),
            Some(Some(flow::wire::INVALID_REQUEST)),
            "{}",
            f.name
        );
    }
}
