//! `jig init`: a new project skeleton, built beside the destination and
//! renamed into place without replacement, so a failure leaves nothing behind
//! and an existing file is never touched.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::InitError;

/// The generated `jig.ts` (seed 002 §1): conventional membership made explicit.
pub const JIG_TS: &str = r#"import { defineJig, discover } from "@jigging/jig";

export default defineJig({
  flows: discover("./flows"),
  bindings: discover("./bindings"),
});
"#;

/// The generated `.gitignore`: local admission state is never project source.
pub const GITIGNORE: &str = ".jig/\n";

/// The generated README's opening: what a Jig project is.
const README_INTRO: &str = r#"# Jig project

This is a [Jig](https://jig.md) project. `jig.ts` declares which Flow packages
(under `flows/`) and Bindings (under `bindings/`) belong to it. Editing them
proposes a change; nothing runs until you review and approve it.

"#;

/// `--lang rust`: the README says to build the Flow first.
const RUST_BUILD_NOTE: &str = r#"The greeting Flow is written in Rust: `src/hello/` is its crate, built against
the Rust Run SDK (`flow-sdk`) for `wasm32-wasip1`. Build it into
`flows/hello/flow.wasm` first (it needs `rustup target add wasm32-wasip1`), and
again after each edit:

```sh
./build.sh
```

"#;

/// The generated README's end: review, then run the greeting.
const README_STEPS: &str = r#"Review and approve the project:

```sh
jig review
```

Then run the greeting Flow:

```sh
jig run flow:flows/hello --input '"Ada"'
```
"#;

const HELLO_FLOW_MD: &str = r#"---
name: hello
description: Greet someone by name.
---

Greet the supplied name, or the world when no name is given.
Return a short greeting message.
"#;

/// The default greeting (the reference's): `flow.ts` on the bundled SDK.
const HELLO_FLOW_TS: &str = r#"import { handle } from "@jigging/flow";

await handle(async (run) => {
  const name = typeof run.input === "string" ? run.input : "world";
  return { outcome: "done", output: { message: `Hello, ${name}!` } };
});
"#;

/// The greeting's package-local manifest: it names the exact bundled SDK
/// revision, which review satisfies with no lock and no network.
fn hello_package_json(sdk_revision: &str) -> String {
    format!(
        "{{\n  \"name\": \"hello\",\n  \"private\": true,\n  \"type\": \"module\",\n  \
         \"dependencies\": {{\n    \"@jigging/flow\": \"{sdk_revision}\"\n  }}\n}}\n"
    )
}

const HELLO_FLOW_PY: &str = r#"from jiggy.flow import RunContext, RunResult, handle

async def run(context: RunContext) -> RunResult:
    name = context.input if isinstance(context.input, str) else "world"
    return {"outcome": "done", "output": {"message": f"Hello, {name}!"}}

handle(run)
"#;

/// The greeting crate, outside the Flow package: the package holds only
/// the built `flow.wasm`. `@SDK@` is the SDK's absolute path.
const HELLO_CARGO_TOML: &str = r#"[package]
name = "hello"
version = "0.1.0"
edition = "2021"
publish = false

[dependencies]
# The Rust Run SDK (not published), from the copy named when this was made.
flow-sdk = { path = "@SDK@" }
serde_json = "1"

# Not part of any enclosing workspace.
[workspace]
"#;

const HELLO_MAIN_RS: &str = r#"//! The greeting Flow: greets the name given as input.
//! `../../build.sh` builds it into flows/hello/flow.wasm.

use flow_sdk::{handle, HandlerError, RunContext, RunResult};
use serde_json::json;

async fn run(ctx: RunContext) -> Result<RunResult, HandlerError> {
    let name = ctx.input().as_str().unwrap_or("world");
    // On wasm32-wasip1 stdout carries the protocol: log with eprintln!.
    eprintln!("greeting {name}");
    Ok(RunResult::done(json!({ "message": format!("Hello, {name}!") })))
}

fn main() {
    handle(run)
}
"#;

/// Builds the greeting crate and puts the component where the Flow is.
const BUILD_SH: &str = r#"#!/bin/sh
# Builds the greeting Flow (src/hello) for wasm32-wasip1 and copies it to
# flows/hello/flow.wasm. Run it before jig review, and after each edit.
set -eu
cd "$(dirname "$0")"
cargo build --quiet --release --manifest-path src/hello/Cargo.toml --target wasm32-wasip1
cp "${CARGO_TARGET_DIR:-src/hello/target}/wasm32-wasip1/release/hello.wasm" flows/hello/flow.wasm
echo "built flows/hello/flow.wasm"
"#;

/// What `jig init` creates beside the skeleton.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Template<'a> {
    /// `--bare`: the skeleton only.
    Bare,
    /// The default, the reference's greeting: `flows/hello/flow.ts` with a
    /// `package.json` naming the exact bundled `@jigging/flow` revision.
    TypeScript { sdk_revision: &'a str },
    /// `--lang python`: `flows/hello/flow.py` on the bundled `jiggy.flow`.
    Python,
    /// `--lang rust`: the greeting crate in `src/hello` against the Rust SDK
    /// at `sdk` (an absolute path, written into its Cargo.toml) and
    /// `build.sh`, which builds `flows/hello/flow.wasm`.
    Rust { sdk: &'a str },
    /// `jig new flow NAME`: one Flow package (not a project), a greeting in
    /// TypeScript on the bundled SDK revision, with a fixture that passes;
    /// with `agent` (the Agent Run descriptor the host serves), a Flow that
    /// asks the Agent instead, the descriptor beside it.
    FlowTypeScript {
        name: &'a str,
        sdk_revision: &'a str,
        agent: Option<AgentContracts<'a>>,
    },
    /// `jig new flow NAME --lang python`: the same in Python.
    FlowPython {
        name: &'a str,
        agent: Option<AgentContracts<'a>>,
    },
}

/// The Agent Run descriptor the host serves and the channel contract it
/// names, each with its path in the package, for an Agent Flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentContracts<'a> {
    pub capability: &'a str,
    pub updates_path: &'static str,
    pub updates: &'a str,
}

/// Where an Agent Flow keeps the Agent Run descriptor it uses.
const AGENT_DESCRIPTOR: &str = "contracts/agent-run.capability.json";

/// A new Agent Flow's FLOW.md: its `agent` slot on the descriptor beside it.
fn agent_flow_md(name: &str) -> String {
    format!(
        "---\nname: {name}\ndescription: Ask the Agent a question and return its answer.\n\
         uses:\n  agent:\n    contract: ./{AGENT_DESCRIPTOR}\n---\n\n\
         Send the input (a question) to the Agent and return what it answers.\n\
         Replace this text with what {name} does: a person and an Agent read it.\n"
    )
}

const AGENT_FLOW_PY: &str = r#"from jiggy.flow import RunContext, RunResult, handle


async def run(context: RunContext) -> RunResult:
    question = context.input if isinstance(context.input, str) else "Say hello."
    answer = await context.call_capability(
        operation_id="ask:1",
        slot="agent",
        method="run",
        input={"instructions": question},
    )
    if answer["outcome"] != "completed":
        return {"outcome": "done", "output": {"outcome": answer["outcome"], "text": answer["text"]}}
    return {"outcome": "done", "output": {"text": answer["text"]}}


handle(run)
"#;

const AGENT_FLOW_TS: &str = r#"import { handle, type RunResult } from "@jigging/flow";

await handle(async (run): Promise<RunResult> => {
  const question = typeof run.input === "string" ? run.input : "Say hello.";
  const answer = (await run.callCapability({
    operationId: "ask:1",
    slot: "agent",
    method: "run",
    input: { instructions: question },
  })) as { outcome: string; text: string };
  if (answer.outcome !== "completed") {
    return { outcome: "done", output: { outcome: answer.outcome, text: answer.text } };
  }
  return { outcome: "done", output: { text: answer.text } };
});
"#;

/// A new Flow's FLOW.md: its name, what it does, and where to go next.
fn flow_md(name: &str) -> String {
    format!(
        "---\nname: {name}\ndescription: Greet someone by name.\n---\n\n\
         Greet the name given as input (a string), or the world.\n\
         Replace this text with what {name} does: a person and an Agent read it.\n"
    )
}

/// A new Flow's input schema (Schema/1): a name, or nothing.
const FLOW_INPUT_SCHEMA: &str = r#"{
  "$schema": "https://flow.jig.md/schemas/schema-1.json",
  "type": ["string", "object"]
}
"#;

/// A new Flow's fixture (`jig test`): the input it is given and what it
/// must give back.
const FLOW_FIXTURE: &str = r#"{
  "input": "Ada",
  "expect": {
    "outcome": "done",
    "output": { "message": "Hello, Ada!" }
  }
}
"#;

/// A new Flow's package-local manifest on the bundled SDK revision.
fn flow_package_json(name: &str, sdk_revision: &str) -> String {
    hello_package_json(sdk_revision)
        .replace("\"name\": \"hello\"", &format!("\"name\": \"{name}\""))
}

/// One entry of the skeleton, in creation order.
enum Entry {
    Dir(&'static str),
    File(&'static str, String),
    /// An executable file.
    Script(&'static str, String),
}

fn skeleton(template: Template) -> Vec<Entry> {
    // A Flow package alone: its FLOW.md, entrypoint, schema and fixture.
    let flow_entries = |md: String, entry: Vec<Entry>| {
        let mut entries = vec![
            Entry::File("FLOW.md", md),
            Entry::File("input.schema.json", FLOW_INPUT_SCHEMA.into()),
        ];
        entries.extend(entry);
        entries.extend([
            Entry::Dir("fixtures"),
            Entry::Dir("fixtures/example"),
            Entry::File("fixtures/example/case.json", FLOW_FIXTURE.into()),
        ]);
        entries
    };
    // An Agent Flow: the descriptor beside it, and no fixture (its Runs
    // need the Agent endpoint this host is configured with).
    let agent_entries = |name: &str, entry: Vec<Entry>, contracts: AgentContracts| {
        let mut entries = vec![
            Entry::File("FLOW.md", agent_flow_md(name)),
            Entry::Dir("contracts"),
            Entry::File(AGENT_DESCRIPTOR, contracts.capability.to_string()),
            Entry::File(contracts.updates_path, contracts.updates.to_string()),
        ];
        entries.extend(entry);
        entries
    };
    match template {
        Template::FlowTypeScript {
            name,
            sdk_revision,
            agent: Some(descriptor),
        } => {
            return agent_entries(
                name,
                vec![
                    Entry::File("package.json", flow_package_json(name, sdk_revision)),
                    Entry::File("flow.ts", AGENT_FLOW_TS.into()),
                ],
                descriptor,
            )
        }
        Template::FlowPython {
            name,
            agent: Some(descriptor),
        } => {
            return agent_entries(
                name,
                vec![Entry::File("flow.py", AGENT_FLOW_PY.into())],
                descriptor,
            )
        }
        Template::FlowTypeScript {
            name, sdk_revision, ..
        } => {
            return flow_entries(
                flow_md(name),
                vec![
                    Entry::File("package.json", flow_package_json(name, sdk_revision)),
                    Entry::File("flow.ts", HELLO_FLOW_TS.into()),
                ],
            )
        }
        Template::FlowPython { name, .. } => {
            return flow_entries(
                flow_md(name),
                vec![Entry::File("flow.py", HELLO_FLOW_PY.into())],
            )
        }
        _ => {}
    }
    let mut entries = vec![
        Entry::File(".gitignore", GITIGNORE.into()),
        Entry::File("jig.ts", JIG_TS.into()),
        Entry::Dir("flows"),
        Entry::Dir("bindings"),
    ];
    if template == Template::Bare {
        return entries;
    }
    let build_note = match template {
        Template::Rust { .. } => RUST_BUILD_NOTE,
        _ => "",
    };
    let readme = format!("{README_INTRO}{build_note}{README_STEPS}");
    entries.extend([
        Entry::File("README.md", readme),
        Entry::Dir("flows/hello"),
        Entry::File("flows/hello/FLOW.md", HELLO_FLOW_MD.into()),
    ]);
    match template {
        Template::Bare | Template::FlowTypeScript { .. } | Template::FlowPython { .. } => {}
        Template::TypeScript { sdk_revision } => entries.extend([
            Entry::File("flows/hello/package.json", hello_package_json(sdk_revision)),
            Entry::File("flows/hello/flow.ts", HELLO_FLOW_TS.into()),
        ]),
        Template::Python => entries.push(Entry::File("flows/hello/flow.py", HELLO_FLOW_PY.into())),
        Template::Rust { sdk } => entries.extend([
            Entry::Dir("src"),
            Entry::Dir("src/hello"),
            Entry::Dir("src/hello/src"),
            Entry::File(
                "src/hello/Cargo.toml",
                HELLO_CARGO_TOML.replace("@SDK@", sdk),
            ),
            Entry::File("src/hello/src/main.rs", HELLO_MAIN_RS.into()),
            Entry::File("src/hello/.gitignore", "/target/\n".into()),
            Entry::Script("build.sh", BUILD_SH.into()),
        ]),
    }
    entries
}

/// Creates a new project at `destination`, which must not exist while its
/// parent must. [`Template::Bare`] creates only `.gitignore`, `jig.ts`,
/// `flows/` and `bindings/`; the others add a README and the `flows/hello`
/// greeting.
pub fn init(destination: &Path, template: Template) -> Result<(), InitError> {
    init_with(destination, template, &mut |_| Ok(()))
}

/// `init` with a hook run before each entry is created, so tests can inject
/// a failure part-way through.
pub(crate) fn init_with(
    destination: &Path,
    template: Template,
    before_entry: &mut dyn FnMut(&Path) -> io::Result<()>,
) -> Result<(), InitError> {
    if fs::symlink_metadata(destination).is_ok() {
        return Err(InitError::DestinationExists(destination.to_path_buf()));
    }
    let unavailable = |source: io::Error| InitError::Unavailable {
        destination: destination.to_path_buf(),
        source,
    };
    let name = destination.file_name().ok_or_else(|| {
        unavailable(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the destination has no final name",
        ))
    })?;
    let parent = match destination.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !fs::metadata(&parent).map_err(unavailable)?.is_dir() {
        return Err(unavailable(io::Error::new(
            io::ErrorKind::NotADirectory,
            "the parent is not a directory",
        )));
    }

    let staging = parent.join(staging_name(name));
    fs::create_dir(&staging).map_err(unavailable)?;
    let result = populate(&staging, template, before_entry)
        .map_err(unavailable)
        .and_then(|()| publish(&staging, destination));
    match result {
        Ok(()) => Ok(()),
        Err(failure) => match fs::remove_dir_all(&staging) {
            Ok(()) => Err(failure),
            Err(cleanup) => Err(InitError::CleanupFailed {
                failure: Box::new(failure),
                leftover: staging,
                cleanup,
            }),
        },
    }
}

fn staging_name(name: &std::ffi::OsStr) -> std::ffi::OsString {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut staged = std::ffi::OsString::from(".");
    staged.push(name);
    staged.push(format!(".jig-init-{}-{nanos}", std::process::id()));
    staged
}

fn populate(
    staging: &Path,
    template: Template,
    before_entry: &mut dyn FnMut(&Path) -> io::Result<()>,
) -> io::Result<()> {
    for entry in skeleton(template) {
        let script = matches!(entry, Entry::Script(..));
        match entry {
            Entry::Dir(rel) => {
                let path = staging.join(rel);
                before_entry(&path)?;
                fs::create_dir(&path)?;
            }
            Entry::File(rel, text) | Entry::Script(rel, text) => {
                use std::os::unix::fs::OpenOptionsExt;
                let path = staging.join(rel);
                before_entry(&path)?;
                let mode = if script { 0o777 } else { 0o666 };
                let mut file = fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(mode)
                    .open(&path)?;
                file.write_all(text.as_bytes())?;
                file.sync_all()?;
            }
        }
    }
    Ok(())
}

/// Renames the finished tree into place; never replaces an existing entry.
fn publish(staging: &Path, destination: &Path) -> Result<(), InitError> {
    use nix::fcntl::{renameat2, RenameFlags, AT_FDCWD};
    match renameat2(
        AT_FDCWD,
        staging,
        AT_FDCWD,
        destination,
        RenameFlags::RENAME_NOREPLACE,
    ) {
        Ok(()) => Ok(()),
        Err(nix::errno::Errno::EEXIST) | Err(nix::errno::Errno::ENOTEMPTY) => {
            Err(InitError::DestinationExists(destination.to_path_buf()))
        }
        Err(errno) => Err(InitError::Unavailable {
            destination: destination.to_path_buf(),
            source: io::Error::from(errno),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(dir: &Path) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in fs::read_dir(&d).unwrap() {
                let e = e.unwrap();
                let rel = e
                    .path()
                    .strip_prefix(dir)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                if e.file_type().unwrap().is_dir() {
                    out.push(format!("{rel}/"));
                    stack.push(e.path());
                } else {
                    out.push(rel);
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn failure_part_way_leaves_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let dest = tmp.path().join("project");
        let mut seen = 0;
        let err = init_with(&dest, Template::Python, &mut |_| {
            seen += 1;
            if seen == 6 {
                Err(io::Error::other("injected failure"))
            } else {
                Ok(())
            }
        })
        .unwrap_err();
        assert_eq!(err.code(), "JIG_INIT_UNAVAILABLE");
        assert_eq!(err.exit_code(), 2);
        assert!(listing(tmp.path()).is_empty(), "{:?}", listing(tmp.path()));
    }

    #[test]
    fn cleanup_failure_keeps_both_failures() {
        let tmp = tempfile::tempdir().unwrap();
        let dest = tmp.path().join("project");
        // Replacing the staging directory with a file makes the write fail and
        // leaves the cleanup something it cannot remove as a directory tree.
        let err = init_with(&dest, Template::Bare, &mut |path| {
            if path.ends_with("jig.ts") {
                let staging = path.parent().unwrap();
                fs::remove_dir_all(staging)?;
                fs::write(staging, b"not a directory")?;
            }
            Ok(())
        })
        .unwrap_err();
        assert_eq!(err.code(), "JIG_INIT_CLEANUP_FAILED", "{err}");
        let InitError::CleanupFailed {
            failure, leftover, ..
        } = &err
        else {
            unreachable!()
        };
        assert_eq!(failure.code(), "JIG_INIT_UNAVAILABLE");
        assert!(leftover.exists());
        assert!(!dest.exists());
    }

    #[test]
    fn a_destination_appearing_late_is_not_replaced() {
        let tmp = tempfile::tempdir().unwrap();
        let dest = tmp.path().join("project");
        let dest_for_hook = dest.clone();
        let err = init_with(&dest, Template::Bare, &mut |path| {
            if path.ends_with("bindings") {
                fs::create_dir(&dest_for_hook)?;
                fs::write(dest_for_hook.join("mine.txt"), b"keep me")?;
            }
            Ok(())
        })
        .unwrap_err();
        assert_eq!(err.code(), "JIG_INIT_DESTINATION_EXISTS");
        assert_eq!(listing(tmp.path()), vec!["project/", "project/mine.txt"]);
        assert_eq!(fs::read(dest.join("mine.txt")).unwrap(), b"keep me");
    }
}
