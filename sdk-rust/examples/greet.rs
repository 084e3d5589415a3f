//! The smallest component: greets the name given as input.
//!
//! Input: a string name (anything else greets "world").
//! Output: `{"outcome":"done","output":{"message":"Hello, <name>!"}}`.

use flow_sdk::{handle, HandlerError, RunContext, RunResult};
use serde_json::json;

async fn run(ctx: RunContext) -> Result<RunResult, HandlerError> {
    let name = ctx.input().as_str().unwrap_or("world");
    Ok(RunResult::done(
        json!({ "message": format!("Hello, {name}!") }),
    ))
}

fn main() {
    handle(run)
}
