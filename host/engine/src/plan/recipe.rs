//! Recipes: how an entrypoint runs on this host, chosen by its suffix and
//! shebang selector. A package whose entrypoint has no recipe here is
//! unavailable, never run another way.

use std::path::PathBuf;

use flow::json::Value;
use flow::package::Entrypoint;
use serde_json::json;

use crate::config::HostConfig;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RecipeKind {
    /// `flow.py` under CPython ≥ 3.11 with the bundled Python SDK.
    Python,
    /// `flow.wasm`, a WASI command run in-process by wasmtime.
    Wasm,
    /// `flow.bin`, a native executable.
    Native,
    /// `flow.ts` / `flow.js` under Bun.
    Bun,
    /// `flow.ts` / `flow.js` under Deno.
    Deno,
    /// `flow.js` under Node.
    Node,
}

impl RecipeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RecipeKind::Python => "python",
            RecipeKind::Wasm => "wasm",
            RecipeKind::Native => "native",
            RecipeKind::Bun => "bun",
            RecipeKind::Deno => "deno",
            RecipeKind::Node => "node",
        }
    }

    fn parse(text: &str) -> Option<RecipeKind> {
        [
            Self::Python,
            Self::Wasm,
            Self::Native,
            Self::Bun,
            Self::Deno,
            Self::Node,
        ]
        .into_iter()
        .find(|k| k.as_str() == text)
    }

    /// The runtime executable name looked up in the host configuration.
    fn runtime_name(self) -> Option<&'static str> {
        match self {
            RecipeKind::Python => Some("python3"),
            RecipeKind::Bun => Some("bun"),
            RecipeKind::Deno => Some("deno"),
            RecipeKind::Node => Some("node"),
            RecipeKind::Wasm | RecipeKind::Native => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Recipe {
    pub kind: RecipeKind,
    pub entrypoint: String,
    /// The interpreter, when the recipe has one.
    pub runtime: Option<PathBuf>,
    /// SHA-256 of the interpreter's bytes at review: the host observation a
    /// Run must reproduce, else `REVIEW_REQUIRED`.
    pub runtime_digest: Option<String>,
}

impl Recipe {
    pub fn select(entry: &Entrypoint, config: &HostConfig) -> Result<Recipe, String> {
        let candidates: &[RecipeKind] = match entry.suffix.as_str() {
            "py" => &[RecipeKind::Python],
            "wasm" => &[RecipeKind::Wasm],
            "bin" => &[RecipeKind::Native],
            "ts" => &[RecipeKind::Bun, RecipeKind::Deno],
            "js" => &[RecipeKind::Bun, RecipeKind::Deno, RecipeKind::Node],
            other => return Err(format!("no recipe on this host runs flow.{other}")),
        };
        let candidates: Vec<RecipeKind> = match &entry.selector {
            None => candidates.to_vec(),
            Some(selector) => {
                let wanted = match selector.as_str() {
                    "python3" | "python" => Some(RecipeKind::Python),
                    "bun" => Some(RecipeKind::Bun),
                    "deno" => Some(RecipeKind::Deno),
                    "node" => Some(RecipeKind::Node),
                    _ => None,
                };
                match wanted.filter(|k| candidates.contains(k)) {
                    Some(kind) => vec![kind],
                    None => {
                        return Err(format!(
                            "no recipe on this host runs selector {selector:?} for {}",
                            entry.path
                        ))
                    }
                }
            }
        };
        for kind in &candidates {
            let Some(name) = kind.runtime_name() else {
                return Ok(Recipe {
                    kind: *kind,
                    entrypoint: entry.path.clone(),
                    runtime: None,
                    runtime_digest: None,
                });
            };
            if let Some(path) = config.runtime(name) {
                let digest = file_digest(&path)
                    .map_err(|e| format!("cannot read runtime {}: {e}", path.display()))?;
                return Ok(Recipe {
                    kind: *kind,
                    entrypoint: entry.path.clone(),
                    runtime: Some(path),
                    runtime_digest: Some(digest),
                });
            }
        }
        let names: Vec<&str> = candidates.iter().filter_map(|k| k.runtime_name()).collect();
        Err(format!(
            "{} needs {} and this host has none configured or installed",
            entry.path,
            names.join(" or ")
        ))
    }

    pub fn to_value(&self) -> Value {
        json!({
            "kind": self.kind.as_str(),
            "entrypoint": self.entrypoint,
            "runtime": self.runtime.as_ref().map(|p| p.to_string_lossy().to_string()),
            "runtimeDigest": self.runtime_digest,
        })
    }

    pub fn from_value(value: &Value) -> Option<Recipe> {
        Some(Recipe {
            kind: RecipeKind::parse(value.get("kind")?.as_str()?)?,
            entrypoint: value.get("entrypoint")?.as_str()?.to_string(),
            runtime: value
                .get("runtime")
                .and_then(Value::as_str)
                .map(PathBuf::from),
            runtime_digest: value
                .get("runtimeDigest")
                .and_then(Value::as_str)
                .map(str::to_string),
        })
    }

    /// Does this host still reproduce the reviewed recipe? `Err` carries the
    /// reason the admitted execution environment changed.
    pub fn verify(&self) -> Result<(), String> {
        match (&self.runtime, &self.runtime_digest) {
            (Some(path), Some(digest)) => match file_digest(path) {
                Ok(now) if &now == digest => Ok(()),
                Ok(_) => Err(format!("runtime {} changed since review", path.display())),
                Err(e) => Err(format!("runtime {} is unavailable: {e}", path.display())),
            },
            _ => Ok(()),
        }
    }
}

/// An installed runtime's digest, under this command's installation
/// verification policy (seed 002 §9).
fn file_digest(path: &std::path::Path) -> std::io::Result<String> {
    jig_verify::current().digest(path)
}
