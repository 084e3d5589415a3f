//! A file Flow: lists the files of its `source` attachment into
//! `listing.txt` in its writable `deliverables` attachment, and reports
//! whether writing into `source` was refused (it is read-only).
//!
//! Output: `{"files": <count>, "sourceWriteRefused": <bool>}`.

use std::path::Path;

use flow_sdk::{HandlerError, RunContext, RunResult, handle};
use serde_json::json;

fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            walk(root, &path, out)?;
        } else {
            let len = std::fs::metadata(&path)?.len();
            let rel = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .display()
                .to_string();
            out.push(format!("{rel} {len}"));
        }
    }
    Ok(())
}

async fn run(ctx: RunContext) -> Result<RunResult, HandlerError> {
    let failed = |e: std::io::Error| HandlerError::from(e.to_string());
    let attachment = |name: &str| {
        ctx.attachments()
            .get(name)
            .map(|a| a.path.clone())
            .ok_or_else(|| HandlerError::from(format!("no attachment {name}")))
    };
    let source = attachment("source")?;
    let deliverables = attachment("deliverables")?;
    let mut lines = Vec::new();
    walk(Path::new(&source), Path::new(&source), &mut lines).map_err(failed)?;
    let refused = std::fs::write(Path::new(&source).join("new.txt"), b"x").is_err();
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(Path::new(&deliverables).join("listing.txt"), text).map_err(failed)?;
    Ok(RunResult::done(
        json!({ "files": lines.len(), "sourceWriteRefused": refused }),
    ))
}

fn main() {
    handle(run)
}
