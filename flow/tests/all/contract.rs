use flow::contract::{self, ChannelContract, Contract};
use serde_json::json;

use crate::data;

const KNOWN: [(&str, &str); 4] = [
    (
        "session-store.capability.json",
        "sha256:95717125236427f83f401e2f942bb4df46e95867ac34828d719cc9795e5b3e98",
    ),
    (
        "agent-run.capability.json",
        "sha256:b43fba88de62ef189f54004318e9639df58661bb04b3bf76ecfac70e3a5d098b",
    ),
    (
        "project-command.capability.json",
        "sha256:aed62fe17f01897545f82d7ee91f163a023721431433c8f4f6981b4367c85bcf",
    ),
    (
        "run-checkpoint.capability.json",
        "sha256:e7961d96842dc07bf2932f2979b2145301e4071093435e0e4e842a057896c201",
    ),
];

#[test]
fn known_capability_digests_come_out_exactly() {
    for (file, digest) in KNOWN {
        let c = Contract::parse(&data(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(c.digest, digest, "{file}");
        assert_eq!(contract::digest(&c.descriptor), digest, "{file}");
    }
}

#[test]
fn session_store_methods_validate_values() {
    let c = Contract::parse(&data("session-store.capability.json")).unwrap();
    assert_eq!(c.id, "https://example.org/contracts/session-store");
    assert_eq!(c.version, "1.0.0");
    let read = c.method("read").expect("read method");
    assert!(read.input.validate(&json!({"sessionId": "s-1"})).is_ok());
    assert!(read.input.validate(&json!({"sessionId": ""})).is_err());
    assert!(read.errors["not-found"]
        .validate(&json!({"sessionId": "s-1"}))
        .is_ok());
    assert!(c.method("write").is_none());
}

#[test]
fn channel_contract_example_validates() {
    let c = ChannelContract::parse(&data("acp-public-updates.json")).unwrap();
    assert_eq!(c.id, "https://jig.md/contracts/acp-public-updates");
    assert!(c.digest.starts_with("sha256:") && c.digest.len() == 71);
    assert_eq!(c.digest, contract::channel_digest(&c.descriptor));
    assert_ne!(c.digest, contract::digest(&c.descriptor));
}
