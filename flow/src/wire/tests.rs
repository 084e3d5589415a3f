use super::*;
use serde_json::json;
use serde_json::Value;

fn frames(bytes: &[u8]) -> Result<Vec<Vec<u8>>, FrameError> {
    let mut r = FrameReader::new(bytes);
    let mut out = Vec::new();
    while let Some(f) = r.read_frame()? {
        out.push(f);
    }
    Ok(out)
}

#[test]
fn frame_at_limit_is_accepted_and_one_more_is_fatal() {
    let mut at = vec![b' '; MAX_FRAME_BYTES];
    at.push(b'\n');
    assert_eq!(frames(&at).unwrap()[0].len(), MAX_FRAME_BYTES);
    let mut over = vec![b' '; MAX_FRAME_BYTES + 1];
    over.push(b'\n');
    assert!(matches!(frames(&over), Err(FrameError::Oversized)));
    // Without an LF the decoder fails as soon as the bound is passed.
    let mut d = FrameDecoder::new();
    d.push(&vec![b'x'; MAX_FRAME_BYTES]);
    assert!(d.next_frame().unwrap().is_none());
    d.push(b"x");
    assert!(matches!(d.next_frame(), Err(FrameError::Oversized)));
}

#[test]
fn empty_and_incomplete_frames_are_fatal() {
    assert!(matches!(frames(b"{}\n\n"), Err(FrameError::Empty)));
    assert!(matches!(frames(b"{}\n{}"), Err(FrameError::Incomplete)));
    assert_eq!(frames(b"{}\n{\"a\":1}\n").unwrap().len(), 2);
    assert!(frames(b"").unwrap().is_empty());
}

#[test]
fn decoder_splits_across_pushes() {
    let mut d = FrameDecoder::new();
    d.push(b"{\"a\"");
    assert!(d.next_frame().unwrap().is_none());
    d.push(b":1}\n{}\n{");
    assert_eq!(d.next_frame().unwrap().unwrap(), b"{\"a\":1}");
    assert_eq!(d.next_frame().unwrap().unwrap(), b"{}");
    assert!(d.next_frame().unwrap().is_none());
    assert!(matches!(d.finish(), Err(FrameError::Incomplete)));
}

#[test]
fn wire_id_grammar_and_bounds() {
    assert!(is_wire_id("component:1"));
    assert!(is_wire_id("a._:/-Z9"));
    assert!(!is_wire_id(""));
    assert!(!is_wire_id("-a"));
    assert!(!is_wire_id("a b"));
    assert!(is_wire_id(&"a".repeat(MAX_ID_BYTES)));
    assert!(!is_wire_id(&"a".repeat(MAX_ID_BYTES + 1)));
}

#[test]
fn local_name_grammar_and_bounds() {
    assert!(is_local_name("not-found"));
    assert!(!is_local_name("Not"));
    assert!(!is_local_name("a--b"));
    assert!(!is_local_name("-a"));
    assert!(!is_local_name("a-"));
    assert!(is_local_name(&"a".repeat(MAX_LOCAL_NAME_BYTES)));
    assert!(!is_local_name(&"a".repeat(MAX_LOCAL_NAME_BYTES + 1)));
}

#[test]
fn error_codes_round_trip() {
    for c in ErrorCode::ALL {
        assert_eq!(ErrorCode::parse(c.as_str()), Some(c));
    }
    assert_eq!(ErrorCode::ALL.iter().filter(|c| c.is_wire()).count(), 13);
    assert_eq!(ErrorCode::parse_wire("PROTOCOL_ERROR"), None);
    let e = OperationalError {
        code: ErrorCode::Unavailable,
        message: "gone".into(),
        details: Some(json!({"slot": "x"})),
    };
    let rpc = e.to_rpc();
    assert_eq!(rpc.code, -32000);
    assert_eq!(
        rpc.data,
        Some(json!({"code": "UNAVAILABLE", "details": {"slot": "x"}}))
    );
    assert_eq!(rpc.operational(), Some(e));
    let local = OperationalError::new(ErrorCode::ChannelLost, "");
    assert_eq!(
        local.to_rpc().data,
        Some(json!({"code": "EXECUTION_FAILED"}))
    );
}

#[test]
fn error_message_bound() {
    let at = "é".repeat(MAX_ERROR_MESSAGE_CHARS);
    let over = "é".repeat(MAX_ERROR_MESSAGE_CHARS + 1);
    let frame = |m: &str| json!({"jsonrpc":"2.0","id":"a","error":{"code":-32000,"message":m,"data":{"code":"UNCERTAIN"}}});
    assert!(decode_value(frame(&at)).is_ok());
    assert!(decode_value(frame(&over)).is_err());
    assert!(decode_value(frame("")).is_err());
    let e = OperationalError::new(ErrorCode::Uncertain, over).to_rpc();
    assert_eq!(e.message.chars().count(), MAX_ERROR_MESSAGE_CHARS);
}

#[test]
fn envelope_rules() {
    let inv = |v: Value| matches!(decode_value(v), Err(DecodeError::InvalidEnvelope { .. }));
    assert!(inv(json!([])));
    assert!(inv(json!(1)));
    assert!(inv(
        json!({"jsonrpc":"1.0","id":"a","method":"flow/run","params":{}})
    ));
    assert!(inv(
        json!({"jsonrpc":"2.0","id":1,"method":"flow/run","params":{}})
    ));
    assert!(inv(
        json!({"jsonrpc":"2.0","id":null,"method":"flow/run","params":{}})
    ));
    assert!(inv(
        json!({"jsonrpc":"2.0","id":"a","method":"x","params":null})
    ));
    assert!(inv(
        json!({"jsonrpc":"2.0","id":"a","method":"x","params":3})
    ));
    assert!(inv(
        json!({"jsonrpc":"2.0","id":"a","method":"x","extra":1})
    ));
    assert!(inv(json!({"jsonrpc":"2.0","id":"a","result":1,"error":{}})));
    assert!(inv(
        json!({"jsonrpc":"2.0","id":"a","error":{"code":-32001,"message":"m"}})
    ));
    assert!(inv(json!({"jsonrpc":"2.0","id":null,"result":1})));
    assert!(!inv(json!({"jsonrpc":"2.0","method":"x","params":[]})));
    assert!(!inv(
        json!({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"p"}})
    ));
    // The reply to an invalid envelope carries a valid id when there is one.
    let e = decode_value(json!({"jsonrpc":"2.0","id":"h:2","method":"x","params":1})).unwrap_err();
    let reply = e.reply().unwrap().to_value();
    assert_eq!(reply["id"], json!("h:2"));
    assert_eq!(reply["error"]["code"], json!(-32600));
}

#[test]
fn decode_classes() {
    assert_eq!(decode(b"{\"a\":\xff}"), Err(DecodeError::InvalidUtf8));
    let parse = decode(b"{").unwrap_err();
    assert!(matches!(parse, DecodeError::Parse(_)));
    assert_eq!(
        parse.reply().unwrap().to_value()["error"]["code"],
        json!(-32700)
    );
    assert_eq!(parse.reply().unwrap().to_value()["id"], Value::Null);
}

#[test]
fn encode_round_trips() {
    let m = Message::request(
        "component:1",
        Method::CapabilityCall,
        json!({"operationId":"a","slot":"b","method":"c","input":null}),
    );
    let bytes = encode(&m);
    assert_eq!(bytes.last(), Some(&b'\n'));
    assert_eq!(decode(&bytes[..bytes.len() - 1]).unwrap(), m);
    let c = Message::cancel("component:1");
    assert_eq!(
        c.to_value(),
        json!({"jsonrpc":"2.0","method":"request/cancel","params":{"requestId":"component:1"}})
    );
}

#[test]
fn method_table_per_direction() {
    use Direction::*;
    assert_eq!(
        request_method(HostToComponent, "flow/run"),
        Some(Method::FlowRun)
    );
    assert_eq!(request_method(ComponentToHost, "flow/run"), None);
    assert_eq!(request_method(HostToComponent, "capability/call"), None);
    assert_eq!(
        request_method(ComponentToHost, "flow/run-child"),
        Some(Method::RunChild)
    );
    assert_eq!(
        request_method(ComponentToHost, "channel/next"),
        Some(Method::ChannelNext)
    );
    assert_eq!(request_method(HostToComponent, "request/cancel"), None);
    assert_eq!(request_method(ComponentToHost, "nope"), None);
    assert!(Method::RequestCancel.allowed(HostToComponent));
}

fn root_params() -> Value {
    json!({"protocol":"run/1","input":null,"settings":{},"attachments":{},"scratch":"/s","deadlineUnixMs":0})
}

#[test]
fn flow_run_params_limits() {
    let ok = FlowRunParams::from_value(&root_params()).unwrap();
    assert_eq!(FlowRunParams::from_value(&ok.to_value()).unwrap(), ok);
    let with = |k: &str, v: Value| {
        let mut p = root_params();
        p[k] = v;
        FlowRunParams::from_value(&p)
    };
    assert!(with("deadlineUnixMs", json!(MAX_SAFE_INTEGER)).is_ok());
    assert!(with("deadlineUnixMs", json!(MAX_SAFE_INTEGER + 1)).is_err());
    assert!(with("deadlineUnixMs", json!(-1)).is_err());
    assert!(with("protocol", json!("run/2")).is_err());
    assert!(with("scratch", json!("")).is_err());
    assert!(with("settings", json!([])).is_err());
    let atts = |n: usize| {
        Value::Object(
            (0..n)
                .map(|i| (format!("a{i}"), json!({"path":"/p","access":"read"})))
                .collect(),
        )
    };
    assert_eq!(
        with("attachments", atts(MAX_ATTACHMENTS))
            .unwrap()
            .attachments
            .len(),
        MAX_ATTACHMENTS
    );
    assert!(with("attachments", atts(MAX_ATTACHMENTS + 1)).is_err());
    assert!(with("attachments", json!({"A":{"path":"/p","access":"read"}})).is_err());
    assert!(with("attachments", json!({"a":{"path":"/p","access":"write"}})).is_err());
    let grants = |n: usize| {
        Value::Object(
            (0..n)
                .map(|i| {
                    (
                        format!("c{i}"),
                        json!({"endpoint":format!("e{i}"),"direction":"send","delivery":"direct"}),
                    )
                })
                .collect(),
        )
    };
    assert_eq!(
        with("channels", grants(MAX_CHANNELS))
            .unwrap()
            .channels
            .len(),
        MAX_CHANNELS
    );
    assert!(with("channels", grants(MAX_CHANNELS + 1)).is_err());
    let dup = json!({
        "a":{"endpoint":"e","direction":"send","delivery":"direct"},
        "b":{"endpoint":"e","direction":"receive","delivery":"direct","startSequence":1}
    });
    assert!(with("channels", dup).is_err());
    let direct_late =
        json!({"a":{"endpoint":"e","direction":"receive","delivery":"direct","startSequence":2}});
    assert!(with("channels", direct_late).is_err());
}

#[test]
fn intent_bound() {
    let p = |intent: String| {
        RunChildParams::from_value(
            &json!({"operationId":"o","slot":"s","intent":intent,"input":null}),
        )
    };
    assert!(p("é".repeat(MAX_INTENT_CHARS)).is_ok());
    assert!(p("é".repeat(MAX_INTENT_CHARS + 1)).is_err());
    assert!(p(String::new()).is_err());
}

#[test]
fn channel_reference_map_bound() {
    let refs = |n: usize| {
        Value::Object(
            (0..n)
                .map(|i| (format!("c{i}"), json!(format!("e{i}"))))
                .collect(),
        )
    };
    let p = |channels: Value| {
        CapabilityCallParams::from_value(
            &json!({"operationId":"o","slot":"s","method":"m","input":null,"channels":channels}),
        )
    };
    assert!(p(refs(MAX_CHANNELS)).is_ok());
    assert!(p(refs(MAX_CHANNELS + 1)).is_err());
}

#[test]
fn channel_contract_reference_bound() {
    let p = |c: String| ChannelCreateParams::from_value(&json!({ "contract": c }));
    let at = format!("./{}", "a".repeat(MAX_CONTRACT_REF_BYTES - 2));
    let over = format!("./{}", "a".repeat(MAX_CONTRACT_REF_BYTES - 1));
    assert!(p(at).is_ok());
    assert!(p(over).is_err());
    assert!(p("contracts/x.json".into()).is_err());
}

#[test]
fn grant_contract_ids_follow_the_contract_id_grammar() {
    let grant = |id: &str| {
        ChannelResult::from_value(&json!({
            "endpoint": "r", "direction": "receive", "delivery": "broadcast", "startSequence": 1,
            "contract": {"id": id, "version": "1.0.0", "digest": format!("sha256:{}", "0".repeat(64))},
        }))
    };
    assert!(grant("https://example.org/updates").is_ok());
    // More than the https:// prefix: the whole Capability Contract/1 §1.1
    // grammar, IP literals in any spelling refused.
    for bad in [
        "https://",
        "https://example.org",
        "https://Example.org/updates",
        "https://example.org:443/updates",
        "https://example.org/a%20b",
        "https://192.168.0.1/updates",
        "https://127.1/updates",
        "https://0x7f.0.0.1/updates",
        "https://1.2.3/updates",
    ] {
        assert!(grant(bad).is_err(), "{bad}");
    }
}

#[test]
fn channel_results_fit_their_methods() {
    let r = ChannelResult::from_value(&json!(null)).unwrap();
    assert!(r.fits(Method::ChannelSend));
    assert!(!r.fits(Method::ChannelNext));
    let end = ChannelResult::from_value(&json!({"end":{"lastSequence":0}})).unwrap();
    assert!(end.fits(Method::ChannelNext));
    let sub = ChannelResult::from_value(
        &json!({"endpoint":"r","direction":"receive","delivery":"broadcast","startSequence":3}),
    )
    .unwrap();
    assert!(sub.fits(Method::ChannelSubscribe));
    let rel = ChannelResult::from_value(&json!({"status":"failed","code":"LAGGED"})).unwrap();
    assert_eq!(
        rel,
        ChannelResult::Release(ReleaseStatus::Failed {
            code: ErrorCode::Lagged,
            details: None
        })
    );
}
/// Whether `value` satisfies the named definition of the Run/1 message
/// schema, using only this module's decoders.
fn conforms(definition: &str, value: Value) -> bool {
    let Ok(message) = decode_value(value) else {
        return false;
    };
    let request = |method: Method, check: fn(&Value) -> bool| match &message {
        Message::Request {
            method: m,
            params: Some(p),
            ..
        } => m == method.as_str() && check(p),
        _ => false,
    };
    let success = |check: fn(&Value) -> bool| match &message {
        Message::Success { result, .. } => check(result),
        _ => false,
    };
    match definition {
        "flowRunRequest" => request(Method::FlowRun, |p| FlowRunParams::from_value(p).is_ok()),
        "childFlowRequest" => request(Method::RunChild, |p| RunChildParams::from_value(p).is_ok()),
        "capabilityCallRequest" => request(Method::CapabilityCall, |p| {
            CapabilityCallParams::from_value(p).is_ok()
        }),
        "channelCreateRequest" => request(Method::ChannelCreate, |p| {
            ChannelCreateParams::from_value(p).is_ok()
        }),
        "channelSubscribeRequest" => request(Method::ChannelSubscribe, |p| {
            ChannelSubscribeParams::from_value(p).is_ok()
        }),
        "channelSendRequest" => request(Method::ChannelSend, |p| {
            ChannelSendParams::from_value(p).is_ok()
        }),
        "channelNextRequest" => request(Method::ChannelNext, |p| {
            ChannelEndpointParams::from_value(p).is_ok()
        }),
        "channelCloseRequest" => request(Method::ChannelClose, |p| {
            ChannelEndpointParams::from_value(p).is_ok()
        }),
        "channelReleaseRequest" => request(Method::ChannelRelease, |p| {
            ChannelEndpointParams::from_value(p).is_ok()
        }),
        "requestCancelNotification" => matches!(
            &message,
            Message::Notification { method, params: Some(p) }
                if method == "request/cancel" && CancelParams::from_value(p).is_ok()
        ),
        "runSuccessResponse" => success(|r| RunResult::from_value(r).is_ok()),
        "capabilitySuccessResponse" => success(|r| CapabilityResult::from_value(r).is_ok()),
        "channelSuccessResponse" => success(|r| ChannelResult::from_value(r).is_ok()),
        "flowErrorResponse" => matches!(
            &message,
            Message::Failure { id: Some(_), error } if error.operational().is_some()
        ),
        other => panic!("fixture names unknown definition {other}"),
    }
}

#[test]
fn message_fixtures_are_accepted_and_rejected_as_tagged() {
    let fixtures: Value =
        serde_json::from_str(include_str!("../../tests/data/run-1/messages.json")).unwrap();
    let mut seen = 0;
    for (group, expect) in [("valid", true), ("invalid", false)] {
        for case in fixtures[group].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let def = case["definition"].as_str().unwrap();
            assert_eq!(
                conforms(def, case["value"].clone()),
                expect,
                "{group} fixture {name} ({def})"
            );
            // Valid messages survive an encode/decode round trip.
            if expect {
                let m = decode_value(case["value"].clone()).unwrap();
                let bytes = encode(&m);
                assert_eq!(decode(&bytes[..bytes.len() - 1]).unwrap(), m, "{name}");
            }
            seen += 1;
        }
    }
    assert_eq!(seen, 33);
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Frames a byte stream and parses every frame as JSON/1.
fn frame_and_parse(bytes: &[u8]) -> Result<usize, String> {
    let mut r = FrameReader::new(bytes);
    let mut n = 0;
    while let Some(f) = r.read_frame().map_err(|e| e.to_string())? {
        match decode(&f) {
            Err(DecodeError::InvalidEnvelope { .. }) | Ok(_) => n += 1,
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(n)
}

#[test]
fn framing_fixtures() {
    let fixtures: Value =
        serde_json::from_str(include_str!("../../tests/data/run-1/framing.json")).unwrap();
    for case in fixtures["valid"].as_array().unwrap() {
        let bytes = hex(case["hex"].as_str().unwrap());
        assert_eq!(frame_and_parse(&bytes), Ok(1), "{}", case["name"]);
    }
    for case in fixtures["invalid"].as_array().unwrap() {
        let bytes = hex(case["hex"].as_str().unwrap());
        assert!(frame_and_parse(&bytes).is_err(), "{}", case["name"]);
    }
    // Classes: invalid UTF-8 is not answered; a BOM or duplicate member is -32700.
    let class = |h: &str| decode(&hex(h)[..hex(h).len() - 1]);
    assert_eq!(class("7b2261223aff7d0a"), Err(DecodeError::InvalidUtf8));
    assert!(matches!(class("efbbbf7b7d0a"), Err(DecodeError::Parse(_))));
    assert!(matches!(
        class("7b2261223a312c2261223a327d0a"),
        Err(DecodeError::Parse(_))
    ));
}
