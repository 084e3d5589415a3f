//! Channel ports through the WASM component boundary, with a fake
//! `ChannelPorts` standing in for the host's broker.

super::channel_calls::loader_channel_tests!(super::load("faulty-provider", serde_json::json!({})));
