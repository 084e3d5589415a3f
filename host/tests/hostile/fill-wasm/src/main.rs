//! Writes `{"bytes": N}` bytes (all 7) to `fill.bin` in its writable
//! `deliverables` attachment (or, with `{"scratch": true}`, in its scratch)
//! and reports how many it wrote; a failed write fails the Run with the I/O
//! error's text.

use flow_sdk::{handle, HandlerError, RunContext, RunResult};
use serde_json::json;

async fn run(ctx: RunContext) -> Result<RunResult, HandlerError> {
    let n = ctx.input()["bytes"].as_u64().unwrap_or(0) as usize;
    let dir = match ctx.input()["scratch"].as_bool() {
        Some(true) => ctx.scratch().to_string(),
        _ => ctx
            .attachments()
            .get("deliverables")
            .map(|a| a.path.clone())
            .ok_or_else(|| HandlerError::from("no deliverables attachment".to_string()))?,
    };
    std::fs::write(std::path::Path::new(&dir).join("fill.bin"), vec![7u8; n])
        .map_err(|e| HandlerError::from(format!("writing fill.bin failed: {e}")))?;
    Ok(RunResult::done(json!({ "wrote": n })))
}

fn main() {
    handle(run)
}
