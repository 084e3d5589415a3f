//! Every corpus case passes against the SDK's standard and matrix examples.

use flow_conformance::{Target, CASES};

use crate::example;

fn run_case(name: &str) {
    let case = CASES
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no case {name}"));
    let component = match case.target {
        Target::Standard => example("standard"),
        Target::Matrix => example("matrix"),
        Target::Channels => example("channels"),
        Target::Broadcast => example("broadcast"),
        Target::ChannelWiring => example("channel_wiring"),
    };
    if let Err(reason) = (case.run)(&component) {
        panic!("FAIL {name}: {reason}");
    }
}

macro_rules! cases {
    ($($test:ident => $name:literal,)*) => {
        $(#[test] fn $test() { run_case($name); })*

        #[test]
        fn every_case_has_a_test() {
            let tested = [$($name),*];
            for case in CASES {
                assert!(tested.contains(&case.name), "case {} has no test", case.name);
            }
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
    channel_sequence_gap => "channel-sequence-gap",
    channel_broadcast_late_subscriber => "channel-broadcast-late-subscriber",
    channel_wiring_root => "channel-wiring-root",
    channel_wiring_hosted => "channel-wiring-hosted",
    channel_wiring_root_progress => "channel-wiring-root-progress",
    channel_wiring_worker => "channel-wiring-worker",
    channel_wiring_monitor_drain => "channel-wiring-monitor-drain",
    channel_wiring_monitor_stop => "channel-wiring-monitor-stop",
    channel_wiring_monitor_lagged => "channel-wiring-monitor-lagged",
}
