//! Commands authors and operators use to check their work before review:
//! `jig package inspect|digest`, `jig contract digest`, `jig schema
//! check|validate`. Each reads only the files it is given, runs no package
//! code, and exits 0 when valid, 1 when the input is invalid (`CODE:
//! message` on stderr), 2 on usage errors.

use std::path::Path;

use flow::json::Value;
use flow::package::{Access, Package, Use};
use flow::schema::{Invalid, Schema};
use serde_json::json;

use super::{CliError, Code};

fn read(path: &Path) -> Result<Vec<u8>, CliError> {
    std::fs::read(path).map_err(|e| {
        CliError::new(
            Code::InvalidRequest,
            format!("cannot read {}: {e}", path.display()),
        )
    })
}

fn emit(value: &Value, json_output: bool, text: impl FnOnce() -> String) {
    if json_output {
        outln!("{}", flow::json::canonical_string(value));
    } else {
        out!("{}", text());
    }
}

fn stage(dir: &Path) -> Result<Package, CliError> {
    Package::stage_dir(dir).map_err(|e| {
        let mut message = e.message.clone();
        if let Some(path) = &e.path {
            message.push_str(&format!(" at {}", flow::json::ascii_quote(path)));
        }
        if let Some(pointer) = &e.pointer {
            message.push_str(&format!(" pointer {}", flow::json::ascii_quote(pointer)));
        }
        if e.code == flow::package::codes::PACKAGE_IO {
            CliError::ArtifactUnreadable {
                code: e.code,
                message,
            }
        } else {
            CliError::Artifact {
                code: e.code,
                message,
            }
        }
    })
}

/// The inert description of a staged package.
pub fn describe(package: &Package) -> Value {
    let meta = package.metadata();
    let uses: serde_json::Map<String, Value> = meta
        .uses
        .iter()
        .map(|(slot, use_)| {
            let value = match (use_, package.contract(slot)) {
                (Use::Local, _) => json!({ "local": true }),
                (Use::Contract { path }, Some(c)) => {
                    json!({ "contract": path, "id": c.id, "version": c.version, "digest": c.digest })
                }
                (Use::Contract { path }, None) => json!({ "contract": path }),
            };
            (slot.clone(), value)
        })
        .collect();
    let attachments: serde_json::Map<String, Value> = meta
        .attachments
        .iter()
        .map(|(name, access)| {
            let access = match access {
                Access::Read => "read",
                Access::ReadWrite => "read-write",
            };
            (name.clone(), json!(access))
        })
        .collect();
    let schemas: Vec<&str> = [
        ("input.schema.json", package.input_schema().is_some()),
        ("settings.schema.json", package.settings_schema().is_some()),
        ("result.schema.json", package.result_schema().is_some()),
    ]
    .into_iter()
    .filter_map(|(name, present)| present.then_some(name))
    .collect();
    json!({
        "name": meta.name,
        "description": meta.description,
        "entrypoint": package.entrypoint().map(|e| json!({ "path": e.path, "selector": e.selector })),
        "schemas": schemas,
        "uses": Value::Object(uses),
        "attachments": Value::Object(attachments),
        "outcomes": meta.outcomes,
        "files": package.files().len(),
        "bytes": package.total_bytes(),
        "digest": package.digest(),
    })
}

pub fn package_inspect(dir: &Path, json_output: bool) -> Result<u8, CliError> {
    let package = stage(dir)?;
    let value = describe(&package);
    emit(&value, json_output, || {
        let mut out = String::new();
        out.push_str(&format!("name: {}\n", value["name"].as_str().unwrap_or("")));
        out.push_str(&format!(
            "description: {}\n",
            flow::json::ascii_quote(value["description"].as_str().unwrap_or(""))
        ));
        match value["entrypoint"]["path"].as_str() {
            Some(path) => out.push_str(&format!("entrypoint: {path}\n")),
            None => out.push_str("entrypoint: none (instructions only)\n"),
        }
        for schema in value["schemas"].as_array().into_iter().flatten() {
            out.push_str(&format!("schema: {}\n", schema.as_str().unwrap_or("")));
        }
        for (slot, use_) in value["uses"].as_object().into_iter().flatten() {
            match use_.get("id") {
                Some(id) => out.push_str(&format!(
                    "uses {slot}: {} {} {}\n",
                    id.as_str().unwrap_or(""),
                    use_["version"].as_str().unwrap_or(""),
                    use_["digest"].as_str().unwrap_or("")
                )),
                None => out.push_str(&format!("uses {slot}: local\n")),
            }
        }
        for (name, access) in value["attachments"].as_object().into_iter().flatten() {
            out.push_str(&format!(
                "attachment {name}: {}\n",
                access.as_str().unwrap_or("")
            ));
        }
        for (name, text) in value["outcomes"].as_object().into_iter().flatten() {
            out.push_str(&format!(
                "outcome {name}: {}\n",
                flow::json::ascii_quote(text.as_str().unwrap_or(""))
            ));
        }
        out.push_str(&format!(
            "files: {} ({} bytes)\n",
            value["files"], value["bytes"]
        ));
        out.push_str(&format!(
            "digest: {}\n",
            value["digest"].as_str().unwrap_or("")
        ));
        out
    });
    Ok(0)
}

pub fn package_digest(dir: &Path, json_output: bool) -> Result<u8, CliError> {
    let package = stage(dir)?;
    let value = json!({ "digest": package.digest() });
    emit(&value, json_output, || format!("{}\n", package.digest()));
    Ok(0)
}

/// Digest a Capability Contract/1 or (with `--channel`, or by its
/// `$schema`) Channel Contract/1 descriptor.
pub fn contract_digest(file: &Path, channel: bool, json_output: bool) -> Result<u8, CliError> {
    let bytes = read(file)?;
    let declared_channel = flow::json::parse(&bytes)
        .ok()
        .and_then(|v| v.get("$schema").and_then(Value::as_str).map(str::to_string))
        .is_some_and(|s| s == flow::contract::CHANNEL_SCHEMA_URI);
    let invalid = |e: flow::contract::ContractError| located(e.code, &e.message, &e.pointer);
    let (kind, id, version, digest) = if channel || declared_channel {
        let c = flow::contract::ChannelContract::parse(&bytes).map_err(invalid)?;
        ("channel", c.id, c.version, c.digest)
    } else {
        let c = flow::contract::Contract::parse(&bytes).map_err(invalid)?;
        ("capability", c.id, c.version, c.digest)
    };
    let value = json!({ "kind": kind, "id": id, "version": version, "digest": digest });
    emit(&value, json_output, || format!("{digest}\n"));
    Ok(0)
}

fn compile(file: &Path) -> Result<Schema, CliError> {
    let bytes = read(file)?;
    Schema::compile_file(&bytes).map_err(|e| located(e.code, &e.message, &e.pointer))
}

/// A document error with the JSON pointer it was found at.
fn located(code: &'static str, message: &str, pointer: &str) -> CliError {
    CliError::Artifact {
        code,
        message: format!("{message} (at {})", flow::json::ascii_quote(pointer)),
    }
}

pub fn schema_check(file: &Path, json_output: bool) -> Result<u8, CliError> {
    compile(file)?;
    emit(&json!({ "valid": true }), json_output, || "valid\n".into());
    Ok(0)
}

/// Validate an instance; prints the first diagnostic and the work spent.
pub fn schema_validate(file: &Path, instance: &Path, json_output: bool) -> Result<u8, CliError> {
    let schema = compile(file)?;
    let bytes = read(instance)?;
    let value = flow::json::parse(&bytes).map_err(|e| {
        CliError::new(
            Code::InvalidInput,
            format!("the instance is not JSON/1: {e}"),
        )
    })?;
    let (outcome, units) = schema.validate_metered(&value);
    let report = match &outcome {
        Ok(()) => json!({ "valid": true, "workUnits": units }),
        Err(Invalid::Diagnostic(d)) => json!({
            "valid": false,
            "code": "INVALID_INPUT",
            "instancePointer": d.instance_pointer,
            "schemaPointer": d.schema_pointer,
            "keyword": d.keyword,
            "message": d.message,
            "workUnits": units,
        }),
        Err(Invalid::LimitExceeded) => {
            json!({ "valid": false, "code": "SCHEMA_LIMIT_EXCEEDED", "workUnits": units })
        }
        Err(Invalid::Json(e)) => {
            json!({ "valid": false, "code": "INVALID_INPUT", "message": e.to_string(), "workUnits": units })
        }
    };
    // An exhausted work meter is no verdict on the instance (Schema/1 §4):
    // it is reported as its code on stderr, never as "invalid".
    if matches!(outcome, Err(Invalid::LimitExceeded)) && !json_output {
        return Err(CliError::new(
            Code::SchemaLimitExceeded,
            format!("{} ({units} work units spent)", Invalid::LimitExceeded),
        ));
    }
    emit(&report, json_output, || match &outcome {
        Ok(()) => format!("valid ({units} work units)\n"),
        Err(e) => format!("invalid: {e} ({units} work units)\n"),
    });
    Ok(if outcome.is_ok() { 0 } else { 1 })
}
