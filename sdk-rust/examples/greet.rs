//! The smallest component: greets the name given as input.
//!
//! Input: a string name (anything else greets "world").
//! Output: `{"outcome":"done","output":{"message":"Hello, <name>!"}}`.

use flow_sdk::{HandlerError, RunContext, RunResult, handle};
use serde_json::json;

async fn run(ctx: RunContext) -> Result<RunResult, HandlerError> {
    let name = ctx.input().as_str().unwrap_or("world");
    // Natively the SDK pointed fd 1 at stderr before the handler ran, so
    // println! is a diagnostic and cannot corrupt protocol stdout. WASI
    // preview 1 has no way to move fd 1, so a wasm32-wasip1 build logs with
    // eprintln! (println! there would write into the protocol).
    #[cfg(not(target_os = "wasi"))]
    println!("greeting {name}");
    #[cfg(target_os = "wasi")]
    eprintln!("greeting {name}");
    Ok(RunResult::done(
        json!({ "message": format!("Hello, {name}!") }),
    ))
}

fn main() {
    handle(run)
}
