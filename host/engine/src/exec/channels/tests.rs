use super::*;
use std::collections::BTreeMap;

fn package(flow_md: &str) -> Package {
    let files = BTreeMap::from([
        ("FLOW.md".to_string(), flow_md.as_bytes().to_vec()),
        ("flow.py".to_string(), b"pass\n".to_vec()),
    ]);
    Package::from_files(files).unwrap()
}

fn plain() -> Package {
    package("---\nname: plain\ndescription: No ports.\n---\n")
}

async fn call(
    broker: &Arc<Broker>,
    holder: HolderId,
    method: Method,
    params: Value,
) -> Result<Value, OperationalError> {
    broker
        .request(holder, &plain(), method, &params)
        .unwrap()
        .await
}

/// `channel.send` of `value` through the send end of `created` (a
/// `channel.create` answer).
async fn send(
    broker: &Arc<Broker>,
    holder: HolderId,
    created: &Value,
    value: Value,
) -> Result<Value, OperationalError> {
    call(
        broker,
        holder,
        Method::ChannelSend,
        send_params(created, value),
    )
    .await
}

/// `channel.subscribe` to the source of `created`.
async fn subscribe(
    broker: &Arc<Broker>,
    holder: HolderId,
    created: &Value,
) -> Result<Value, OperationalError> {
    call(
        broker,
        holder,
        Method::ChannelSubscribe,
        json!({"source": created["source"]}),
    )
    .await
}

/// `channel.next` on `reader`'s endpoint (a subscription, or the
/// `receive` end of a create answer).
async fn next(
    broker: &Arc<Broker>,
    holder: HolderId,
    reader: &Value,
) -> Result<Value, OperationalError> {
    call(
        broker,
        holder,
        Method::ChannelNext,
        json!({"endpoint": reader["endpoint"]}),
    )
    .await
}

#[tokio::test]
async fn broadcast_without_readers_advances_the_sequence_without_retaining() {
    let broker = Broker::new();
    let me = broker.new_holder();
    let created = pair(&broker, me, "broadcast").await;
    for v in 0..2 {
        send(&broker, me, &created, json!(v)).await.unwrap();
    }
    let sub = subscribe(&broker, me, &created).await.unwrap();
    assert_eq!(sub["startSequence"], 3);
    send(&broker, me, &created, json!("x")).await.unwrap();
    call(
        &broker,
        me,
        Method::ChannelClose,
        json!({"endpoint": created["send"]["endpoint"]}),
    )
    .await
    .unwrap();
    assert_eq!(
        next(&broker, me, &sub).await.unwrap(),
        json!({"item": {"sequence": 3, "value": "x"}})
    );
    assert_eq!(
        next(&broker, me, &sub).await.unwrap(),
        json!({"end": {"lastSequence": 3}})
    );
}

#[tokio::test]
async fn another_invocation_cannot_use_or_move_a_right_it_does_not_hold() {
    let broker = Broker::new();
    let owner = broker.new_holder();
    let other = broker.new_holder();
    let pair = call(&broker, owner, Method::ChannelCreate, json!({}))
        .await
        .unwrap();
    let send = pair["send"]["endpoint"].as_str().unwrap().to_string();
    let e = call(
        &broker,
        other,
        Method::ChannelSend,
        json!({"endpoint": send, "value": 1}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::PermissionDenied);
    let sender = package(
            "---\nname: sender\ndescription: One port.\nchannels:\n  events:\n    direction: send\n---\n",
        );
    let refs = BTreeMap::from([("events".to_string(), send.clone())]);
    let e = broker.transfer(other, owner, &refs, &sender).unwrap_err();
    assert_eq!(e.code, ErrorCode::PermissionDenied);
    // The holder moves it: the old token is dead, the new one works.
    let grants = broker.transfer(owner, other, &refs, &sender).unwrap();
    let moved = grants["events"].endpoint.clone();
    assert_ne!(moved, send);
    let e = call(
        &broker,
        owner,
        Method::ChannelSend,
        json!({"endpoint": send, "value": 1}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::PermissionDenied);
    call(
        &broker,
        other,
        Method::ChannelSend,
        json!({"endpoint": moved, "value": 1}),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_beginning_port_refuses_a_late_subscription_a_suffix_port_takes_it() {
    let broker = Broker::new();
    let owner = broker.new_holder();
    let child = broker.new_holder();
    let created = pair(&broker, owner, "broadcast").await;
    send(&broker, owner, &created, json!(0)).await.unwrap();
    let sub = subscribe(&broker, owner, &created).await.unwrap();
    let refs = BTreeMap::from([(
        "events".to_string(),
        sub["endpoint"].as_str().unwrap().to_string(),
    )]);
    let beginning = package(
            "---\nname: b\ndescription: Reads all.\nchannels:\n  events:\n    direction: receive\n---\n",
        );
    let e = broker
        .transfer(owner, child, &refs, &beginning)
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    let suffix = package(
            "---\nname: s\ndescription: Reads a suffix.\nchannels:\n  events:\n    direction: receive\n    start: suffix\n---\n",
        );
    let grants = broker.transfer(owner, child, &refs, &suffix).unwrap();
    assert_eq!(grants["events"].start_sequence, Some(2));
}

/// A string whose canonical JSON is exactly `bytes` long.
fn item(bytes: usize) -> Value {
    json!("a".repeat(bytes - 2))
}

async fn pair(broker: &Arc<Broker>, holder: HolderId, delivery: &str) -> Value {
    call(
        broker,
        holder,
        Method::ChannelCreate,
        json!({ "delivery": delivery }),
    )
    .await
    .unwrap()
}

fn send_params(created: &Value, value: Value) -> Value {
    json!({ "endpoint": created["send"]["endpoint"], "value": value })
}

fn send_future(
    broker: &Arc<Broker>,
    holder: HolderId,
    params: Value,
) -> BoxFuture<Result<Value, OperationalError>> {
    broker
        .request(holder, &plain(), Method::ChannelSend, &params)
        .unwrap()
}

/// Whether `fut` is still waiting after the broker had time to act.
async fn still_waiting(fut: &mut BoxFuture<Result<Value, OperationalError>>) -> bool {
    tokio::time::timeout(std::time::Duration::from_millis(50), fut)
        .await
        .is_err()
}

#[tokio::test]
async fn a_direct_receiver_holds_its_byte_budget_then_the_sender_waits() {
    let broker = Broker::new();
    let me = broker.new_holder();
    let created = pair(&broker, me, "direct").await;
    let full = MAX_READER_BYTES / MAX_ITEM_BYTES;
    assert_eq!(full * MAX_ITEM_BYTES, MAX_READER_BYTES);
    for _ in 0..full {
        send(&broker, me, &created, item(MAX_ITEM_BYTES))
            .await
            .unwrap();
    }
    // One byte past the budget waits, though the queue has item room.
    let mut past = send_future(&broker, me, send_params(&created, json!(0)));
    assert!(still_waiting(&mut past).await);
    next(&broker, me, &created["receive"]).await.unwrap();
    // The committed item keeps its bytes until the next read.
    assert!(still_waiting(&mut past).await);
    next(&broker, me, &created["receive"]).await.unwrap();
    assert_eq!(past.await.unwrap(), Value::Null);
    let state = broker.state.lock().unwrap();
    assert_eq!(
        state.payload_bytes(),
        (full - 1) * MAX_ITEM_BYTES + 1,
        "two reads released one item's credit; the small item was queued"
    );
}

#[tokio::test]
async fn the_read_admitted_first_holds_the_receiver_whichever_is_awaited_first() {
    let broker = Broker::new();
    let me = broker.new_holder();
    let created = pair(&broker, me, "direct").await;
    let read = json!({"endpoint": created["receive"]["endpoint"]});
    let mut first = broker
        .request(me, &plain(), Method::ChannelNext, &read)
        .unwrap();
    let second = broker
        .request(me, &plain(), Method::ChannelNext, &read)
        .unwrap();
    let second = tokio::time::timeout(std::time::Duration::from_secs(5), second)
        .await
        .expect("the second read is answered at once");
    assert_eq!(second.unwrap_err().code, ErrorCode::ResourceExhausted);
    assert!(still_waiting(&mut first).await);
    send(&broker, me, &created, json!("a")).await.unwrap();
    assert_eq!(
        first.await.unwrap(),
        json!({"item": {"sequence": 1, "value": "a"}})
    );
}

#[tokio::test]
async fn waiting_sends_land_in_the_order_they_were_admitted() {
    let broker = Broker::new();
    let me = broker.new_holder();
    let created = pair(&broker, me, "direct").await;
    let receiver = &created["receive"];
    let mut got = Vec::new();
    for v in 0..DIRECT_QUEUE_CAPACITY {
        send(&broker, me, &created, json!(v)).await.unwrap();
    }
    let [mut w0, mut w1, mut w2] =
        ["w0", "w1", "w2"].map(|v| send_future(&broker, me, send_params(&created, json!(v))));
    // Room for one (a read releases the credit of the one before): the
    // first in line takes it, though the others are awaited first.
    for _ in 0..2 {
        got.push(next(&broker, me, receiver).await.unwrap());
    }
    assert!(still_waiting(&mut w2).await);
    assert!(still_waiting(&mut w1).await);
    assert_eq!(w0.as_mut().await.unwrap(), Value::Null);
    // Room for two, and a send admitted now waits behind the line.
    for _ in 0..2 {
        got.push(next(&broker, me, receiver).await.unwrap());
    }
    let mut late = send_future(&broker, me, send_params(&created, json!("late")));
    assert!(still_waiting(&mut late).await);
    assert!(still_waiting(&mut w2).await);
    assert_eq!(w1.as_mut().await.unwrap(), Value::Null);
    assert_eq!(w2.as_mut().await.unwrap(), Value::Null);
    got.push(next(&broker, me, receiver).await.unwrap());
    assert_eq!(late.as_mut().await.unwrap(), Value::Null);
    while got.len() < DIRECT_QUEUE_CAPACITY + 4 {
        got.push(next(&broker, me, receiver).await.unwrap());
    }
    let values: Vec<Value> = got.iter().map(|r| r["item"]["value"].clone()).collect();
    let mut sent: Vec<Value> = (0..DIRECT_QUEUE_CAPACITY).map(|v| json!(v)).collect();
    sent.extend(["w0", "w1", "w2", "late"].map(|v| json!(v)));
    assert_eq!(values, sent);
}

#[tokio::test]
async fn waiting_sends_hold_at_most_their_byte_budget() {
    let broker = Broker::new();
    let me = broker.new_holder();
    let created = pair(&broker, me, "direct").await;
    for _ in 0..MAX_READER_BYTES / MAX_ITEM_BYTES {
        send(&broker, me, &created, item(MAX_ITEM_BYTES))
            .await
            .unwrap();
    }
    let mut waiting = Vec::new();
    for _ in 0..MAX_PENDING_SEND_BYTES / MAX_ITEM_BYTES {
        let mut fut = send_future(&broker, me, send_params(&created, item(MAX_ITEM_BYTES)));
        assert!(still_waiting(&mut fut).await);
        waiting.push(fut);
    }
    assert!(waiting.len() < MAX_PENDING_SENDS);
    let e = send(&broker, me, &created, json!(0)).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::ResourceExhausted);
    // Retracting one waiting send (cancelling it) makes room again.
    drop(waiting.pop());
    let mut again = send_future(&broker, me, send_params(&created, item(MAX_ITEM_BYTES)));
    assert!(still_waiting(&mut again).await);
    assert_eq!(
        broker.state.lock().unwrap().payload_bytes(),
        MAX_READER_BYTES + MAX_PENDING_SEND_BYTES
    );
}

#[tokio::test]
async fn a_root_tree_holds_its_byte_budget_then_refuses_what_cannot_wait() {
    let broker = Broker::new();
    let me = broker.new_holder();
    let child = broker.new_holder();
    let per_reader = MAX_READER_BYTES / MAX_ITEM_BYTES;
    let channels = MAX_TREE_BYTES / MAX_READER_BYTES;
    assert_eq!(channels * MAX_READER_BYTES, MAX_TREE_BYTES);
    let mut created = Vec::new();
    // Two holders share the tree's budget.
    for i in 0..channels {
        let holder = if i % 2 == 0 { me } else { child };
        let c = pair(&broker, holder, "direct").await;
        for _ in 0..per_reader {
            send(&broker, holder, &c, item(MAX_ITEM_BYTES))
                .await
                .unwrap();
        }
        created.push(c);
    }
    assert_eq!(broker.state.lock().unwrap().payload_bytes(), MAX_TREE_BYTES);
    // One byte more cannot queue and cannot wait within the budget.
    let spare = pair(&broker, me, "direct").await;
    let e = send(&broker, me, &spare, json!(0)).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::ResourceExhausted);
    // A broadcast reader the tree cannot hold fails LAGGED alone; the
    // writer's send is accepted.
    let source = pair(&broker, me, "broadcast").await;
    let sub = subscribe(&broker, me, &source).await.unwrap();
    send(&broker, me, &source, json!(0)).await.unwrap();
    let e = next(&broker, me, &sub).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Lagged);
    // Two reads anywhere in the tree release one item: the spare fits.
    for _ in 0..2 {
        next(&broker, me, &created[0]["receive"]).await.unwrap();
    }
    send(&broker, me, &spare, json!(0)).await.unwrap();
    // A holder's end releases the bytes of the sources it created.
    broker.finish(child, true);
    assert_eq!(
        broker.state.lock().unwrap().payload_bytes(),
        (channels / 2) * MAX_READER_BYTES - MAX_ITEM_BYTES + 1
    );
}

#[tokio::test]
async fn a_broadcast_reader_past_its_byte_budget_fails_lagged_alone() {
    let broker = Broker::new();
    let me = broker.new_holder();
    let source = pair(&broker, me, "broadcast").await;
    let behind = subscribe(&broker, me, &source).await.unwrap();
    let reading = subscribe(&broker, me, &source).await.unwrap();
    let full = MAX_READER_BYTES / MAX_ITEM_BYTES;
    for _ in 0..full {
        send(&broker, me, &source, item(MAX_ITEM_BYTES))
            .await
            .unwrap();
    }
    // Two reads release one item's bytes for `reading` only.
    next(&broker, me, &reading).await.unwrap();
    next(&broker, me, &reading).await.unwrap();
    send(&broker, me, &source, json!(0)).await.unwrap();
    assert_eq!(
        next(&broker, me, &behind).await.unwrap_err().code,
        ErrorCode::Lagged
    );
    for sequence in 3..=full as u64 {
        assert_eq!(
            next(&broker, me, &reading).await.unwrap()["item"]["sequence"],
            sequence
        );
    }
    assert_eq!(
        next(&broker, me, &reading).await.unwrap(),
        json!({"item": {"sequence": full + 1, "value": 0}})
    );
}

#[tokio::test]
async fn a_source_accepts_its_lifetime_bytes_and_fails_one_byte_past() {
    let broker = Broker::new();
    let me = broker.new_holder();
    // No reader retains anything: only the lifetime budget advances.
    let source = pair(&broker, me, "broadcast").await;
    let full = item(MAX_ITEM_BYTES);
    let items = MAX_SOURCE_BYTES / MAX_ITEM_BYTES as u64;
    assert_eq!(items * MAX_ITEM_BYTES as u64, MAX_SOURCE_BYTES);
    for _ in 0..items {
        send(&broker, me, &source, full.clone()).await.unwrap();
    }
    let late = subscribe(&broker, me, &source).await.unwrap();
    let e = send(&broker, me, &source, json!(0)).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::ResourceExhausted);
    // The value was not accepted: the source failed before it.
    let read = next(&broker, me, &late).await.unwrap_err();
    assert_eq!(read.code, ErrorCode::ResourceExhausted);
    assert_eq!(late["startSequence"], items + 1);
}

// Channel Contract/1 §3 matching, the refusals (the positive paths are in
// host/tests/all/channels.rs): each mapping below is invalid input, and a
// refused mapping moves nothing, so the same right still maps to a port
// that does match.

/// A package with one port, `events`, declared by `port` (the YAML lines
/// under it), carrying the reference's ACP public updates channel contract
/// as `./updates.json`.
fn with_port(port: &str) -> Package {
    let flow_md =
        format!("---\nname: p\ndescription: One port.\nchannels:\n  events:\n{port}---\n");
    let files = BTreeMap::from([
        ("FLOW.md".to_string(), flow_md.into_bytes()),
        ("flow.py".to_string(), b"pass\n".to_vec()),
        (
            "updates.json".to_string(),
            include_bytes!("../../../../../flow/tests/data/acp-public-updates.json").to_vec(),
        ),
    ]);
    Package::from_files(files).unwrap()
}

fn events(endpoint: &Value) -> BTreeMap<String, String> {
    BTreeMap::from([("events".to_string(), endpoint.as_str().unwrap().to_string())])
}

#[tokio::test]
async fn an_unnamed_source_cannot_fill_a_named_reader() {
    let broker = Broker::new();
    let owner = broker.new_holder();
    let child = broker.new_holder();
    let created = pair(&broker, owner, "direct").await;
    let refs = events(&created["receive"]["endpoint"]);
    let named = with_port("    direction: receive\n    contract: ./updates.json\n");
    let e = broker.transfer(owner, child, &refs, &named).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    assert!(
        e.message.contains("exact channel contract"),
        "{}",
        e.message
    );
    // The same receiver fills a generic port: the refusal moved nothing.
    let generic = with_port("    direction: receive\n");
    broker.transfer(owner, child, &refs, &generic).unwrap();
}

#[tokio::test]
async fn a_named_source_needs_its_exact_contract_on_a_transferred_writer() {
    let broker = Broker::new();
    let owner = broker.new_holder();
    let child = broker.new_holder();
    let named = with_port("    direction: send\n    contract: ./updates.json\n");
    let created = broker
        .request(
            owner,
            &named,
            Method::ChannelCreate,
            &json!({"contract": "./updates.json"}),
        )
        .unwrap()
        .await
        .unwrap();
    let refs = events(&created["send"]["endpoint"]);
    let generic = with_port("    direction: send\n");
    let e = broker.transfer(owner, child, &refs, &generic).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    assert!(
        e.message.contains("exact channel contract"),
        "{}",
        e.message
    );
    broker.transfer(owner, child, &refs, &named).unwrap();
}

#[tokio::test]
async fn direct_late_binding_checks_the_queued_prefix_against_the_reader() {
    let broker = Broker::new();
    let owner = broker.new_holder();
    let child = broker.new_holder();
    let created = pair(&broker, owner, "direct").await;
    send(&broker, owner, &created, json!("queued text"))
        .await
        .unwrap();
    let refs = events(&created["receive"]["endpoint"]);
    let integers = with_port("    direction: receive\n    schema:\n      type: integer\n");
    let e = broker.transfer(owner, child, &refs, &integers).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    assert!(e.message.contains("queued items"), "{}", e.message);
    let strings = with_port("    direction: receive\n    schema:\n      type: string\n");
    let grants = broker.transfer(owner, child, &refs, &strings).unwrap();
    let moved = json!(grants["events"].endpoint);
    assert_eq!(
        next(&broker, child, &json!({"endpoint": moved}))
            .await
            .unwrap(),
        json!({"item": {"sequence": 1, "value": "queued text"}})
    );
}

#[tokio::test]
async fn a_new_writer_must_match_a_live_subscribers_item_schema() {
    let broker = Broker::new();
    let owner = broker.new_holder();
    let reader_child = broker.new_holder();
    let writer_child = broker.new_holder();
    let created = pair(&broker, owner, "broadcast").await;
    let sub = subscribe(&broker, owner, &created).await.unwrap();
    let integers = with_port("    direction: receive\n    schema:\n      type: integer\n");
    broker
        .transfer(owner, reader_child, &events(&sub["endpoint"]), &integers)
        .unwrap();
    let refs = events(&created["send"]["endpoint"]);
    let strings = with_port("    direction: send\n    schema:\n      type: string\n");
    let e = broker
        .transfer(owner, writer_child, &refs, &strings)
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    assert!(e.message.contains("live receiver"), "{}", e.message);
    let writer = with_port("    direction: send\n    schema:\n      type: integer\n");
    broker
        .transfer(owner, writer_child, &refs, &writer)
        .unwrap();
}

#[tokio::test]
async fn a_broadcast_subscription_failing_its_schema_fails_alone() {
    let broker = Broker::new();
    let owner = broker.new_holder();
    let child = broker.new_holder();
    let created = pair(&broker, owner, "broadcast").await;
    let strict = subscribe(&broker, owner, &created).await.unwrap();
    let generic = subscribe(&broker, owner, &created).await.unwrap();
    let integers = with_port("    direction: receive\n    schema:\n      type: integer\n");
    let grants = broker
        .transfer(owner, child, &events(&strict["endpoint"]), &integers)
        .unwrap();
    let strict = json!({"endpoint": grants["events"].endpoint});
    // The source accepts the value: only the subscription it breaks fails.
    send(&broker, owner, &created, json!("text")).await.unwrap();
    let e = next(&broker, child, &strict).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    assert_eq!(
        next(&broker, owner, &generic).await.unwrap(),
        json!({"item": {"sequence": 1, "value": "text"}})
    );
    send(&broker, owner, &created, json!(2)).await.unwrap();
    assert_eq!(
        next(&broker, owner, &generic).await.unwrap(),
        json!({"item": {"sequence": 2, "value": 2}})
    );
}
