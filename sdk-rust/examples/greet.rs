//! The smallest component: greets the name given as input.
//!
//! Input: a string name (anything else greets "world").
//! Output: `{"outcome":"done","output":{"message":"Hello, <name>!"}}`.

use flow_sdk::{handle, HandlerError, RunContext, RunResult};
use serde_json::json;

async fn run(ctx: RunContext) -> Result<RunResult, HandlerError> {
    let name = ctx.input().as_str().unwrap_or("world");
    // The SDK pointed fd 1 at stderr before the handler ran, so ordinary
    // output is a diagnostic and cannot corrupt protocol stdout.
    println!("greeting {name}");
    Ok(RunResult::done(
        json!({ "message": format!("Hello, {name}!") }),
    ))
}

fn main() {
    handle(run)
}
