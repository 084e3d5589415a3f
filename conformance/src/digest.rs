//! Capability Contract/1 conformance case 7: independent implementations
//! compute the same domain-separated full-descriptor digest.
//!
//! Not a Run/1 exchange: the component is a digest program. It is started
//! once per descriptor as `PROGRAM... capability` or `PROGRAM... channel`
//! with the descriptor's bytes on stdin, and must print its digest
//! (`sha256:<64 lowercase hex>`) and a LF on stdout and exit 0. Bytes that
//! are not JSON/1 (a duplicate member) must be refused: a nonzero exit and
//! no digest. The answers are the shared known-answer file
//! (`fixtures/contract-digests.json`), each also recomputed here with
//! `flow::contract`, so the runner never trusts the fixture or the
//! component alone.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::session::Component;

type Step<T> = Result<T, String>;

/// The shared known answers.
const KNOWN: &str = include_str!("../fixtures/contract-digests.json");

/// The descriptors `KNOWN` names, by their path below `flow/tests/data/`.
const DESCRIPTORS: &[(&str, &[u8])] = &[
    (
        "session-store.capability.json",
        include_bytes!("../../flow/tests/data/session-store.capability.json"),
    ),
    (
        "agent-run.capability.json",
        include_bytes!("../../flow/tests/data/agent-run.capability.json"),
    ),
    (
        "project-command.capability.json",
        include_bytes!("../../flow/tests/data/project-command.capability.json"),
    ),
    (
        "run-checkpoint.capability.json",
        include_bytes!("../../flow/tests/data/run-checkpoint.capability.json"),
    ),
    (
        "variants/agent-run-299110c.capability.json",
        include_bytes!("../../flow/tests/data/variants/agent-run-299110c.capability.json"),
    ),
    (
        "variants/agent-run-b38b3a9.capability.json",
        include_bytes!("../../flow/tests/data/variants/agent-run-b38b3a9.capability.json"),
    ),
    (
        "acp-public-updates.json",
        include_bytes!("../../flow/tests/data/acp-public-updates.json"),
    ),
    (
        "rfc8785-edges.capability.json",
        include_bytes!("../../flow/tests/data/rfc8785-edges.capability.json"),
    ),
];

/// A descriptor with a duplicate member: no JSON/1 value, so no digest.
const NOT_JSON1: &[u8] = br#"{"id":"https://example.org/a","id":"https://example.org/b"}"#;

/// One known answer: the kind, the descriptor bytes and the digest.
pub struct Known {
    pub file: String,
    pub kind: String,
    pub bytes: &'static [u8],
    pub digest: String,
}

/// Every known answer, each checked against `flow::contract` first.
pub fn known() -> Step<Vec<Known>> {
    let doc: Value = serde_json::from_str(KNOWN).map_err(|e| format!("fixture: {e}"))?;
    let listed = doc["descriptors"]
        .as_array()
        .ok_or("fixture: no descriptors")?;
    let mut answers = Vec::new();
    for entry in listed {
        let field = |name: &str| entry[name].as_str().map(str::to_owned);
        let (Some(file), Some(kind), Some(digest)) =
            (field("file"), field("kind"), field("digest"))
        else {
            return Err(format!("fixture: malformed entry {entry}"));
        };
        let bytes = DESCRIPTORS
            .iter()
            .find(|(name, _)| *name == file)
            .map(|(_, bytes)| *bytes)
            .ok_or_else(|| format!("fixture names {file}, which the runner does not carry"))?;
        let value = flow::json::parse(bytes).map_err(|e| format!("{file}: {e}"))?;
        let ours = match kind.as_str() {
            "capability" => flow::contract::digest(&value),
            "channel" => flow::contract::channel_digest(&value),
            other => return Err(format!("{file}: unknown kind {other}")),
        };
        if ours != digest {
            return Err(format!(
                "{file}: the fixture says {digest}, flow computes {ours}"
            ));
        }
        answers.push(Known {
            file,
            kind,
            bytes,
            digest,
        });
    }
    if answers.len() != DESCRIPTORS.len() {
        return Err("the fixture and the runner's descriptors differ".into());
    }
    Ok(answers)
}

/// What the component printed and whether it exited 0.
fn compute(component: &Component, kind: &str, bytes: &[u8]) -> Step<(bool, String)> {
    let (program, args) = component
        .argv
        .split_first()
        .ok_or("empty component command")?;
    let mut child = Command::new(program)
        .args(args)
        .arg(kind)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {program}: {e}"))?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    // A component that refuses early may close stdin first: not a failure here.
    let _ = stdin.write_all(bytes);
    drop(stdin);
    let out = child
        .wait_with_output()
        .map_err(|e| format!("waiting for {program}: {e}"))?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    ))
}

/// The case: every known descriptor's digest, exactly, and a refusal.
pub fn contract_digests(component: &Component) -> Step<()> {
    for known in known()? {
        let (ok, printed) = compute(component, &known.kind, known.bytes)?;
        if !ok || printed != format!("{}\n", known.digest) {
            return Err(format!(
                "{} ({}): printed {printed:?} (exit ok: {ok}), want {}",
                known.file, known.kind, known.digest
            ));
        }
    }
    let (ok, printed) = compute(component, "capability", NOT_JSON1)?;
    if ok || printed.contains("sha256:") {
        return Err(format!(
            "a descriptor with a duplicate member got {printed:?} (exit ok: {ok}); want a refusal"
        ));
    }
    Ok(())
}
