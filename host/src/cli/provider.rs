//! Commands for provider authors: `jig provider new NAME --lang LANG`
//! (a scaffold, [`scaffold`]), `jig provider inspect FILE` and `jig
//! provider call FILE ...`. Both load the file through the loader the host
//! uses for `[[providers]]` (so the same checks, ceilings and deadline
//! apply), with no settings but the ones given and no secrets.
//!
//! Loading a native library runs its initialisers: only give these commands
//! files you would configure as a provider.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Subcommand;
use jig_provider_api::{
    dispatch, CallContext, CallError, ContractIdentity, Grants, Provider, ProviderDecl,
    ProviderKind,
};
use serde_json::{json, Value};

use super::{CliError, Code};

mod scaffold;

/// Bytes read to tell a component from a library.
const MAGIC_BYTES: usize = 8;
/// `\0asm` followed by the component-model layer (version 0x0d, layer 1).
const COMPONENT_MAGIC: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];
/// `\0asm` followed by the core module version 1: a module, not a component.
const CORE_MODULE_MAGIC: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
/// The interfaces a component imports for outbound HTTP.
const WASI_HTTP: &str = "wasi:http/";
const ELF_MAGIC: [u8; 4] = [0x7f, b'E', b'L', b'F'];

#[derive(Subcommand, Debug)]
pub enum ProviderAction {
    /// Make a provider project: a contract to edit, its source, a test and the build command.
    New {
        /// The provider's name (lower-case letters, digits and '-').
        name: String,
        /// The provider's source language; each builds a WASM component.
        #[arg(long, value_enum)]
        lang: scaffold::Lang,
        /// Where to make it (default: ./NAME); must be missing or empty.
        dir: Option<PathBuf>,
        /// For --lang rust: the providers/sdk directory of a jig checkout
        /// (default: the SDK installed with this jig, else the checkout it
        /// was built in).
        #[arg(long, value_name = "PATH")]
        sdk: Option<PathBuf>,
    },
    /// Kind, world or ABI version, served contracts and imports of a provider file.
    Inspect {
        /// The provider file: a WASM component (.wasm) or a native library (.so).
        file: PathBuf,
        /// Print one JSON document instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Make one call into a provider file, as a Flow's capability/call would.
    Call {
        /// The provider file: a WASM component (.wasm) or a native library (.so).
        file: PathBuf,
        /// The contract: ID@VERSION (the provider's descriptor gives the digest).
        #[arg(long, value_name = "ID@VERSION")]
        contract: String,
        /// The contract's method to call.
        #[arg(long, value_name = "METHOD")]
        method: String,
        /// The call's input: JSON text, or @FILE.
        #[arg(long, value_name = "JSON|@FILE")]
        input: String,
        /// The provider's settings object, as the host configuration would give it.
        #[arg(long, value_name = "JSON")]
        settings: Option<String>,
        /// The provider's grants (http, directory, limits), as the `grants`
        /// table of its `[[providers]]` entry would give them, in JSON.
        #[arg(long, value_name = "JSON")]
        grants: Option<String>,
        /// The call's deadline (default 30s, at most 24h).
        #[arg(long, value_name = "DURATION")]
        timeout: Option<String>,
    },
}

pub fn main(action: ProviderAction, base: &Path) -> Result<u8, CliError> {
    match action {
        ProviderAction::New {
            name,
            lang,
            dir,
            sdk,
        } => scaffold::new(&name, lang, dir.as_deref(), sdk.as_deref(), base),
        ProviderAction::Inspect { file, json } => inspect(&base.join(file), json),
        ProviderAction::Call {
            file,
            contract,
            method,
            input,
            settings,
            grants,
            timeout,
        } => {
            let timeout = match timeout {
                None => super::DEFAULT_TIMEOUT,
                Some(text) => super::parse_timeout(&text).ok_or_else(|| {
                    CliError::new(
                        Code::TimeoutInvalid,
                        format!("--timeout {text:?} is not a duration of at most 24h"),
                    )
                })?,
            };
            let input = jig_engine::run::ask::input(Some(&input), base)?;
            call(CallArgs {
                file: &base.join(file),
                contract: &contract,
                method: &method,
                input,
                settings: settings.as_deref(),
                grants: grants.as_deref(),
                timeout,
            })
        }
    }
}

/// What the first bytes of `path` say it is.
fn kind_of(path: &Path) -> Result<ProviderKind, CliError> {
    let unreadable = |e: std::io::Error| {
        CliError::new(
            Code::InvalidRequest,
            format!("cannot read {}: {e}", path.display()),
        )
    };
    let mut head = Vec::with_capacity(MAGIC_BYTES);
    std::fs::File::open(path)
        .map_err(unreadable)?
        .take(MAGIC_BYTES as u64)
        .read_to_end(&mut head)
        .map_err(unreadable)?;
    let not = |what: &str| {
        CliError::new(
            Code::NotAProvider,
            format!("{} is {what}, not a provider", path.display()),
        )
    };
    if head == COMPONENT_MAGIC {
        Ok(ProviderKind::Wasm)
    } else if head == CORE_MODULE_MAGIC {
        Err(not("a core WASM module (build a component: wasm32-wasip2)"))
    } else if head.starts_with(&ELF_MAGIC) {
        Ok(ProviderKind::Native)
    } else {
        Err(not("neither a WASM component nor a native library"))
    }
}

/// Loads `path` as the host would load a `[[providers]]` entry naming it
/// with these settings and grants.
fn load(
    path: &Path,
    kind: ProviderKind,
    settings: Value,
    grants: Grants,
) -> Result<Arc<dyn Provider>, CliError> {
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "provider".to_owned());
    let decl = ProviderDecl {
        name,
        kind,
        path: Some(path.to_owned()),
        settings,
        secrets: Default::default(),
        grants,
    };
    let loaded = match kind {
        ProviderKind::Wasm => jig_provider_wasm::WasmProvider::load(&decl),
        _ => jig_provider_native::NativeProvider::load(&decl),
    };
    loaded.map_err(|e| CliError::Artifact {
        code: e.code(),
        message: e.to_string(),
    })
}

fn inspect(path: &Path, json_output: bool) -> Result<u8, CliError> {
    let kind = kind_of(path)?;
    let bytes = std::fs::read(path).map_err(|e| {
        CliError::new(
            Code::InvalidRequest,
            format!("cannot read {}: {e}", path.display()),
        )
    })?;
    let mut grants = Grants::default();
    let mut report = match kind {
        ProviderKind::Wasm => {
            let shape = jig_provider_wasm::component_shape(&bytes)
                .map_err(|e| CliError::new(Code::NotAProvider, e))?;
            // A component importing wasi:http loads only with an http grant.
            // Inspecting makes no call, so one allowing no origin shows what
            // it serves and asks for while letting it reach nothing.
            if shape.imports.iter().any(|i| i.starts_with(WASI_HTTP)) {
                grants.http = Some(jig_provider_api::grants::HttpGrant { allow: Vec::new() });
            }
            json!({
                "kind": "wasm",
                "world": jig_provider_wasm::WORLD,
                "imports": shape.imports,
                "exports": shape.exports,
            })
        }
        _ => json!({
            "kind": "native",
            "abiVersion": jig_provider_native::ABI_VERSION,
            // Native code is not contained: it can reach whatever the
            // host process can, so it has no import list to show.
            "imports": Value::Null,
        }),
    };
    let provider = load(path, kind, Value::Null, grants)?;
    let contracts: Vec<Value> = provider
        .contracts()
        .iter()
        .map(|c| {
            let methods: Vec<&String> = c
                .descriptor
                .get("methods")
                .and_then(Value::as_object)
                .map(|m| m.keys().collect())
                .unwrap_or_default();
            json!({
                "id": c.identity.id,
                "version": c.identity.version,
                "digest": c.identity.digest,
                "methods": methods,
            })
        })
        .collect();
    report["file"] = json!(path.display().to_string());
    report["artifactDigest"] = json!(jig_provider_api::artifact_digest(&bytes));
    report["contracts"] = json!(contracts);
    if json_output {
        outln!("{}", flow::json::canonical_string(&report));
    } else {
        out!("{}", render_inspection(&report));
    }
    Ok(0)
}

fn render_inspection(report: &Value) -> String {
    let text = |key: &str| report[key].as_str().unwrap_or_default().to_owned();
    let mut out = format!("file: {}\nkind: {}\n", text("file"), text("kind"));
    match report["kind"].as_str() {
        Some("wasm") => out.push_str(&format!("world: {}\n", text("world"))),
        _ => out.push_str(&format!("abi version: {}\n", report["abiVersion"])),
    }
    out.push_str(&format!(
        "artifact digest: {}\ncontracts:\n",
        text("artifactDigest")
    ));
    for c in report["contracts"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  {}@{} {}\n    methods: {}\n",
            c["id"].as_str().unwrap_or_default(),
            c["version"].as_str().unwrap_or_default(),
            c["digest"].as_str().unwrap_or_default(),
            c["methods"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    match report["imports"].as_array() {
        Some(imports) if imports.is_empty() => out.push_str("imports: none\n"),
        Some(imports) => {
            out.push_str("imports:\n");
            for import in imports.iter().filter_map(Value::as_str) {
                out.push_str(&format!("  {import}\n"));
            }
        }
        None => out.push_str("imports: not contained (native code runs with the host's rights)\n"),
    }
    out
}

struct CallArgs<'a> {
    file: &'a Path,
    contract: &'a str,
    method: &'a str,
    input: Value,
    settings: Option<&'a str>,
    grants: Option<&'a str>,
    timeout: Duration,
}

/// `--grants JSON`: the `grants` table of a `[[providers]]` entry, read with
/// the same rules (unknown keys refused); the loader then checks its values
/// as it checks a configured provider's.
fn parse_grants(text: Option<&str>, kind: ProviderKind) -> Result<Grants, CliError> {
    let Some(text) = text else {
        return Ok(Grants::default());
    };
    let invalid =
        |reason: String| CliError::new(Code::GrantsInvalid, format!("--grants: {reason}"));
    let value = dispatch::json(text.as_bytes()).map_err(|e| invalid(format!("not JSON/1: {e}")))?;
    let grants: Grants = serde_json::from_value(value).map_err(|e| invalid(e.to_string()))?;
    if kind != ProviderKind::Wasm && !grants.is_empty() {
        // As the host refuses it: a native library runs with the host's own
        // rights, so a grant would promise a sandbox that is not there.
        return Err(invalid("grants apply to wasm providers only".to_owned()));
    }
    Ok(grants)
}

/// One call. The value is printed as JSON on stdout (exit 0); a declared
/// application error as `{"error": {"name", "data"}}` on stdout (exit 1);
/// an operational error as `CODE: message` on stderr with its exit status.
fn call(args: CallArgs<'_>) -> Result<u8, CliError> {
    let Some((id, version)) = args.contract.rsplit_once('@') else {
        return Err(CliError::new(
            Code::InvalidRequest,
            format!("--contract {:?} is not ID@VERSION", args.contract),
        ));
    };
    let settings = match args.settings {
        None => Value::Null,
        Some(text) => dispatch::json(text.as_bytes()).map_err(|e| {
            CliError::new(
                Code::InvalidSettings,
                format!("--settings is not JSON/1: {e}"),
            )
        })?,
    };
    let kind = kind_of(args.file)?;
    let grants = parse_grants(args.grants, kind)?;
    let provider = load(args.file, kind, settings, grants)?;
    // The digest is the served descriptor's; an unserved ID@VERSION is
    // left to the loader's own check, which answers UNAVAILABLE.
    let digest = provider
        .contracts()
        .iter()
        .find(|c| c.identity.id == id && c.identity.version == version)
        .map(|c| c.identity.digest.clone())
        .unwrap_or_default();
    let now = dispatch::now_unix_ms();
    let ctx = CallContext {
        contract: ContractIdentity {
            id: id.to_owned(),
            version: version.to_owned(),
            digest,
        },
        operation_id: format!("jig-provider-call-{now}"),
        deadline_unix_ms: now + args.timeout.as_millis() as u64,
    };
    // The host enforces the deadline around the blocking call too (native
    // code cannot be interrupted); so does this command.
    let (sender, receiver) = std::sync::mpsc::channel();
    let method = args.method.to_owned();
    let input = args.input;
    std::thread::spawn(move || {
        let outcome = provider.call(&ctx, &method, &input, Arc::new(jig_provider_api::NoPorts));
        let _ = sender.send(outcome);
    });
    let outcome = receiver
        .recv_timeout(args.timeout)
        .unwrap_or_else(|_| Err(dispatch::deadline_exceeded()));
    match outcome {
        Ok(value) => {
            outln!("{}", flow::json::canonical_string(&value));
            Ok(0)
        }
        Err(CallError::Application { name, data }) => {
            let error = json!({"error": {"name": name, "data": data}});
            outln!("{}", flow::json::canonical_string(&error));
            Ok(1)
        }
        Err(CallError::Operational {
            code,
            message,
            details,
        }) => {
            let message = match details {
                Some(details) => format!("{message} (details {details})"),
                None => message,
            };
            Err(CliError::Answered { code, message })
        }
    }
}
