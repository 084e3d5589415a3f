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

/// The known answers every implementation shares
/// (`conformance/fixtures/contract-digests.json`: the Python and TypeScript
/// SDKs' suites and the conformance runner read the same file), so `flow`
/// is held to exactly what they are.
#[test]
fn shared_known_answers_come_out_exactly() {
    let known: Value = serde_json::from_str(include_str!(
        "../../../conformance/fixtures/contract-digests.json"
    ))
    .unwrap();
    let descriptors = known["descriptors"].as_array().unwrap();
    assert!(descriptors.len() >= 8);
    for entry in descriptors {
        let file = entry["file"].as_str().unwrap();
        let value = flow::json::parse(&data(file)).unwrap();
        let digest = match entry["kind"].as_str().unwrap() {
            "capability" => contract::digest(&value),
            _ => contract::channel_digest(&value),
        };
        assert_eq!(digest, entry["digest"].as_str().unwrap(), "{file}");
    }
    for case in known["canonical"].as_array().unwrap() {
        let value = flow::json::parse(case[0].as_str().unwrap().as_bytes()).unwrap();
        assert_eq!(
            flow::json::canonical_string(&value),
            case[1].as_str().unwrap()
        );
    }
    for case in known["numbers"].as_array().unwrap() {
        let bits = u64::from_str_radix(case[0].as_str().unwrap(), 16).unwrap();
        assert_eq!(
            flow::json::format_number(f64::from_bits(bits)),
            case[1].as_str().unwrap()
        );
    }
    for text in known["refused"].as_array().unwrap() {
        assert!(
            flow::json::parse(text.as_str().unwrap().as_bytes()).is_err(),
            "{text}"
        );
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

/// Channel Contract/1 §2: `sha256(UTF8("FLOW-Channel-Contract/1\0") ||
/// RFC8785(descriptor))`. The expected value was computed outside this
/// crate (Python's hashlib over the RFC 8785 bytes of the reference's
/// example, the same computation reproducing the capability digests in
/// `KNOWN` under their own domain), so a change of the domain string or of
/// the canonical bytes fails here.
#[test]
fn known_channel_digest_comes_out_exactly() {
    const ACP_PUBLIC_UPDATES: &str =
        "sha256:6c6ff5e95478b9a974490bd3a7c0c26974b434daa144a6d6cdd5512129fd36bb";
    let c = ChannelContract::parse(&data("acp-public-updates.json")).unwrap();
    assert_eq!(c.digest, ACP_PUBLIC_UPDATES);
    assert_eq!(contract::channel_digest(&c.descriptor), ACP_PUBLIC_UPDATES);
    assert_eq!(contract::CHANNEL_DOMAIN, b"FLOW-Channel-Contract/1\0");
}

use flow::contract::codes::*;
use serde_json::Value;

fn base() -> Value {
    json!({
        "$schema": contract::CAPABILITY_SCHEMA_URI,
        "flowCapabilityContract": 1,
        "id": "https://example.org/contracts/thing",
        "version": "1.0.0",
        "methods": {"get": {"input": true, "output": true, "errors": {}}}
    })
}

fn code(v: Value) -> &'static str {
    Contract::from_value(v).unwrap_err().code
}

#[test]
fn variants_and_true_schemas() {
    for file in [
        "variants/agent-run-299110c.capability.json",
        "variants/agent-run-b38b3a9.capability.json",
    ] {
        let c = Contract::parse(&data(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_ne!(c.digest, KNOWN[1].1);
    }
    let c = Contract::from_value(base()).unwrap();
    let get = c.method("get").unwrap();
    assert!(get.input.accepts_anything());
    assert!(get.output.validate(&json!({"any": [1, "json"]})).is_ok());
    // Unknown methods and errors simply are not there.
    assert!(c.method("put").is_none());
    assert!(!get.errors.contains_key("nope"));
}

#[test]
fn any_change_changes_the_digest() {
    let d = Contract::from_value(base()).unwrap().digest;
    let mut v = base();
    v["methods"]["get"]["input"] = json!({"description": "inert, but part of identity"});
    assert_ne!(Contract::from_value(v).unwrap().digest, d);
    // Member order and whitespace do not matter.
    let text = serde_json::to_string_pretty(&base()).unwrap();
    assert_eq!(Contract::parse(text.as_bytes()).unwrap().digest, d);
}

#[test]
fn closed_fields() {
    let mut v = base();
    v["extra"] = json!(1);
    assert_eq!(code(v), CONTRACT_INVALID);
    let mut v = base();
    v["methods"]["get"]["doc"] = json!("x");
    assert_eq!(code(v), CONTRACT_INVALID);
    for field in [
        "$schema",
        "flowCapabilityContract",
        "id",
        "version",
        "methods",
    ] {
        let mut v = base();
        v.as_object_mut().unwrap().remove(field);
        assert_eq!(code(v), CONTRACT_INVALID, "{field}");
    }
    for field in ["input", "output", "errors"] {
        let mut v = base();
        v["methods"]["get"].as_object_mut().unwrap().remove(field);
        assert_eq!(code(v), CONTRACT_INVALID, "{field}");
    }
    let mut v = base();
    v["flowCapabilityContract"] = json!(2);
    assert_eq!(code(v), CONTRACT_INVALID);
    let mut v = base();
    v["flowCapabilityContract"] = json!("1");
    assert_eq!(code(v), CONTRACT_INVALID);
    let mut v = base();
    v["$schema"] = json!(contract::CHANNEL_SCHEMA_URI);
    assert_eq!(code(v), CONTRACT_INVALID);
    assert_eq!(
        Contract::parse(b"{").unwrap_err().code,
        CONTRACT_INVALID_JSON
    );
    assert_eq!(Contract::parse(b"[]").unwrap_err().code, CONTRACT_INVALID);
}

#[test]
fn identity_grammar() {
    for good in [
        "https://example.org/a",
        "https://a.b.c/x/y.z/~_-",
        "https://xn--bcher-kva.example/contracts/v1",
        "https://0x7f.example.org/a",
        "https://1.2.3.example/a",
        "https://example.0x7g/a",
    ] {
        assert!(contract::is_contract_id(good), "{good}");
    }
    for bad in [
        "http://example.org/a",
        "https://example.org",
        "https://example.org/",
        "https://localhost/a",
        "https://Example.org/a",
        "https://example.org/A",
        "https://example.org:443/a",
        "https://user@example.org/a",
        "https://192.168.0.1/a",
        "https://10.0.0.01/a",
        // IPv4 in its other spellings: a numeric last label is an address.
        "https://127.1/a",
        "https://0x7f.0.0.1/a",
        "https://1.2.3/a",
        "https://999.1.1.1/a",
        "https://example.0x7f/a",
        "https://example.0x/a",
        "https://example.123/a",
        "https://example.org/a//b",
        "https://example.org/a/./b",
        "https://example.org/a/..",
        "https://example.org/a%20b",
        "https://example.org/a?q",
        "https://example.org/a#f",
        "https://-a.org/x",
        "https://a-.org/x",
        "https://a..org/x",
        "https://[::1]/x",
        &format!("https://{}.org/x", "a".repeat(64)),
    ] {
        assert!(!contract::is_contract_id(bad), "{bad}");
        let mut v = base();
        v["id"] = json!(bad);
        assert_eq!(code(v), CONTRACT_INVALID, "{bad}");
    }
    assert!(contract::is_contract_id(&format!(
        "https://{}.org/x",
        "a".repeat(63)
    )));
    for good in ["0.0.0", "1.2.3", "10.20.30"] {
        assert!(contract::is_version(good));
    }
    for bad in [
        "1.0",
        "1.0.0.0",
        "v1.0.0",
        "01.0.0",
        "1.0.0-beta",
        "1.0.0+b",
        "1..0",
        "",
        "1.0.x",
    ] {
        assert!(!contract::is_version(bad), "{bad}");
        let mut v = base();
        v["version"] = json!(bad);
        assert_eq!(code(v), CONTRACT_INVALID, "{bad}");
    }
}

fn methods(n: usize) -> Value {
    let map: serde_json::Map<String, Value> = (0..n)
        .map(|i| {
            (
                format!("m{i}"),
                json!({"input": true, "output": true, "errors": {}}),
            )
        })
        .collect();
    Value::Object(map)
}

#[test]
fn method_error_and_definition_counts() {
    let mut v = base();
    v["methods"] = methods(0);
    assert_eq!(code(v), CONTRACT_INVALID);
    let mut v = base();
    v["methods"] = methods(contract::MAX_METHODS);
    assert!(Contract::from_value(v).is_ok());
    let mut v = base();
    v["methods"] = methods(contract::MAX_METHODS + 1);
    assert_eq!(code(v), CONTRACT_INVALID);
    let mut v = base();
    v["methods"] = json!({"Get": {"input": true, "output": true, "errors": {}}});
    assert_eq!(code(v), CONTRACT_INVALID);

    let errors = |n: usize| -> Value {
        Value::Object((0..n).map(|i| (format!("e{i}"), json!(true))).collect())
    };
    let mut v = base();
    v["methods"]["get"]["errors"] = errors(contract::MAX_ERRORS);
    assert!(Contract::from_value(v).is_ok());
    let mut v = base();
    v["methods"]["get"]["errors"] = errors(contract::MAX_ERRORS + 1);
    assert_eq!(code(v), CONTRACT_INVALID);
    let mut v = base();
    v["methods"]["get"]["errors"] = json!({"Not_Found": true});
    assert_eq!(code(v), CONTRACT_INVALID);

    let defs = |n: usize| -> Value {
        Value::Object((0..n).map(|i| (format!("D{i}"), json!(true))).collect())
    };
    let mut v = base();
    v["$defs"] = defs(contract::MAX_DEFS);
    assert!(Contract::from_value(v).is_ok());
    let mut v = base();
    v["$defs"] = defs(contract::MAX_DEFS + 1);
    assert_eq!(code(v), CONTRACT_INVALID);
}

#[test]
fn descriptor_byte_limit() {
    let with_padding = |total: usize| {
        let text = serde_json::to_string(&base()).unwrap();
        let mut bytes = text.into_bytes();
        bytes.resize(total, b' ');
        bytes
    };
    assert!(Contract::parse(&with_padding(contract::MAX_DESCRIPTOR_BYTES)).is_ok());
    assert_eq!(
        Contract::parse(&with_padding(contract::MAX_DESCRIPTOR_BYTES + 1))
            .unwrap_err()
            .code,
        CONTRACT_LIMIT_EXCEEDED
    );
    let mut v = base();
    v["methods"]["get"]["input"] =
        json!({"description": "d".repeat(contract::MAX_DESCRIPTOR_BYTES)});
    assert_eq!(code(v), CONTRACT_LIMIT_EXCEEDED);
}

#[test]
fn embedded_schemas_form_one_graph() {
    // No file-root $schema and no nested $defs inside embedded schemas.
    let mut v = base();
    v["methods"]["get"]["input"] = json!({"$schema": flow::schema::SCHEMA_URI});
    assert_eq!(code(v), "SCHEMA_INVALID");
    let mut v = base();
    v["methods"]["get"]["input"] = json!({"$defs": {}});
    assert_eq!(code(v), "SCHEMA_INVALID");
    let mut v = base();
    v["methods"]["get"]["output"] = json!({"pattern": "x"});
    let e = Contract::from_value(v).unwrap_err();
    assert_eq!(
        (e.code, e.pointer.as_str()),
        ("SCHEMA_KEYWORD_UNSUPPORTED", "/methods/get/output/pattern")
    );
    let mut v = base();
    v["methods"]["get"]["input"] = json!({"$ref": "#/$defs/Missing"});
    assert_eq!(code(v), "SCHEMA_REFERENCE_INVALID");
    let mut v = base();
    v["$defs"] = json!({"A": {"$ref": "#/$defs/B"}, "B": {"items": {"$ref": "#/$defs/A"}}});
    assert_eq!(code(v), "SCHEMA_REFERENCE_INVALID");
    let mut v = base();
    v["$defs"] = json!({"bad-name": true});
    assert_eq!(code(v), "SCHEMA_INVALID");

    // The node limit is graph-wide: splitting across methods cannot evade it.
    let props = |n: usize| -> Value {
        json!({"properties": Value::Object((0..n).map(|i| (format!("p{i}"), json!(true))).collect())})
    };
    let per_method = flow::schema::MAX_SCHEMA_NODES / 4;
    let mut ms = serde_json::Map::new();
    for i in 0..4 {
        ms.insert(
            format!("m{i}"),
            json!({"input": props(per_method - 2), "output": true, "errors": {}}),
        );
    }
    let mut v = base();
    v["methods"] = Value::Object(ms.clone());
    assert!(Contract::from_value(v).is_ok(), "exactly at the limit");
    ms.insert(
        "m4".into(),
        json!({"input": true, "output": true, "errors": {}}),
    );
    let mut v = base();
    v["methods"] = Value::Object(ms);
    assert_eq!(code(v), "SCHEMA_LIMIT_EXCEEDED");
}

#[test]
fn method_channel_declarations() {
    let mut v = base();
    v["methods"]["get"]["channels"] = json!({
        "events": {"direction": "send", "required": false, "delivery": "direct", "contract": "./contracts/acp.json"},
        "feed": {"direction": "receive", "start": "suffix", "delivery": "broadcast", "schema": {"type": "string"}}
    });
    let c = Contract::from_value(v).unwrap();
    let channels = &c.method("get").unwrap().channels;
    assert_eq!(
        channels["events"].contract.as_deref(),
        Some("./contracts/acp.json")
    );
    assert!(!channels["events"].required);
    assert_eq!(channels["feed"].start, contract::Start::Suffix);
    assert!(channels["feed"]
        .schema
        .as_ref()
        .unwrap()
        .validate(&json!("x"))
        .is_ok());
    assert!(channels["feed"]
        .schema
        .as_ref()
        .unwrap()
        .validate(&json!(1))
        .is_err());

    for bad in [
        json!({"e": {"required": true}}),
        json!({"e": {"direction": "both"}}),
        json!({"e": {"direction": "send", "start": "beginning"}}),
        json!({"e": {"direction": "receive", "start": "middle"}}),
        json!({"e": {"direction": "send", "delivery": "multicast"}}),
        json!({"e": {"direction": "send", "required": "yes"}}),
        json!({"e": {"direction": "send", "schema": true, "contract": "./x.json"}}),
        json!({"e": {"direction": "send", "contract": "x.json"}}),
        json!({"e": {"direction": "send", "contract": "./../x.json"}}),
        json!({"e": {"direction": "send", "contract": format!("./{}", "a/".repeat(2048))}}),
        json!({"e": {"direction": "send", "other": 1}}),
        json!({"E": {"direction": "send"}}),
    ] {
        let mut v = base();
        v["methods"]["get"]["channels"] = bad.clone();
        assert!(Contract::from_value(v).is_err(), "{bad}");
    }
}

fn channel_base() -> Value {
    json!({
        "$schema": contract::CHANNEL_SCHEMA_URI,
        "id": "https://example.org/channels/text",
        "version": "0.1.0",
        "semantics": "Each item appends text.",
        "item": {"$ref": "#/$defs/Chunk"},
        "$defs": {"Chunk": {"type": "string"}}
    })
}

#[test]
fn channel_contract_descriptors() {
    let c = ChannelContract::from_value(channel_base()).unwrap();
    assert!(c.item.validate(&json!("x")).is_ok());
    assert!(c.item.validate(&json!(1)).is_err());
    assert_eq!(c.semantics, "Each item appends text.");
    // The semantics are part of identity.
    let mut v = channel_base();
    v["semantics"] = json!("Each item replaces the text.");
    assert_ne!(ChannelContract::from_value(v).unwrap().digest, c.digest);

    let mut v = channel_base();
    v["semantics"] = json!("s".repeat(contract::MAX_SEMANTICS_BYTES));
    assert!(ChannelContract::from_value(v).is_ok());
    let mut v = channel_base();
    v["semantics"] = json!("s".repeat(contract::MAX_SEMANTICS_BYTES + 1));
    assert!(ChannelContract::from_value(v).is_err());
    for (field, value) in [
        ("semantics", json!("")),
        ("id", json!("https://example.org")),
        ("version", json!("1")),
        ("$schema", json!(contract::CAPABILITY_SCHEMA_URI)),
        ("extra", json!(1)),
        ("item", json!({"format": "x"})),
    ] {
        let mut v = channel_base();
        v[field] = value;
        assert!(ChannelContract::from_value(v).is_err(), "{field}");
    }
    let mut v = channel_base();
    v.as_object_mut().unwrap().remove("item");
    assert!(ChannelContract::from_value(v).is_err());
}
