//! Channel ports through the WASM component boundary, with a fake
//! `ChannelPorts` standing in for the host's broker.

use serde_json::json;

use super::channel_calls::*;
use super::*;

fn faulty() -> Arc<dyn Provider> {
    load("faulty-provider", json!({}))
}

#[test]
fn items_pass_both_ways_through_the_ports() {
    check_items_pass_both_ways(&*faulty());
}

#[test]
fn a_channel_failure_keeps_its_code() {
    check_channel_errors_keep_their_codes(&*faulty());
}

#[test]
fn a_provider_blocked_in_next_wakes_when_the_call_is_cancelled() {
    check_blocked_next_wakes_on_cancel(faulty());
}
