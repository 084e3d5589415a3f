//! The "broadcast component" of the Run/1 conformance scenarios.
//!
//! Creates a broadcast channel; subscribes (`early`); sends `"before-late"`;
//! subscribes again (`late`); sends `"after-late"`; closes the writer; reads
//! both readers with their reads outstanding together. Each reader reports
//! `{"start", "values", "complete"}` (`LAGGED` makes `complete: false`).

use flow_sdk::{
    ChannelOptions, ChannelReceiver, Delivery, ErrorCode, HandlerError, RunContext, RunResult,
    Value, handle,
};
use serde_json::json;

struct Reader {
    receiver: ChannelReceiver,
    values: Vec<Value>,
    complete: bool,
    done: bool,
}

impl Reader {
    fn new(receiver: ChannelReceiver) -> Self {
        Reader {
            receiver,
            values: Vec::new(),
            complete: true,
            done: false,
        }
    }

    fn report(&self) -> Value {
        json!({
            "start": self.receiver.start_sequence(),
            "values": self.values,
            "complete": self.complete,
        })
    }
}

async fn run(ctx: RunContext) -> Result<RunResult, HandlerError> {
    let channel = ctx
        .channel(ChannelOptions {
            delivery: Some(Delivery::Broadcast),
            ..Default::default()
        })
        .await?
        .into_broadcast()
        .ok_or("the host returned a direct pair for a broadcast request")?;
    let early = channel.subscribe().await?;
    channel.sender.send(json!("before-late")).await?;
    let late = channel.subscribe().await?;
    channel.sender.send(json!("after-late")).await?;
    channel.sender.close().await?;

    let mut readers = [Reader::new(early), Reader::new(late)];
    while readers.iter().any(|r| !r.done) {
        // Put one read per unfinished reader on the wire, then settle them.
        let reads: Vec<_> = readers
            .iter()
            .map(|r| (!r.done).then(|| r.receiver.next()))
            .collect();
        for (reader, read) in readers.iter_mut().zip(reads) {
            let Some(read) = read else { continue };
            match read.await {
                Ok(Some(v)) => reader.values.push(v),
                Ok(None) => reader.done = true,
                Err(e) if e.code == ErrorCode::Lagged => {
                    reader.complete = false;
                    reader.done = true;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(RunResult::done(json!({
        "early": readers[0].report(),
        "late": readers[1].report(),
    })))
}

fn main() {
    handle(run)
}
