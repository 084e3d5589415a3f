//! The operator's declaration of one provider (`[[providers]]` in the host
//! configuration) and the configuration a provider receives from it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

use crate::LoadError;

/// Upper bound on one secret file. Secrets are tokens and keys, not data;
/// the bound keeps a misconfigured path (a log, a disk image) from being
/// read into every call.
pub const MAX_SECRET_BYTES: u64 = 64 * 1024;

/// How a provider is implemented.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// A WASM component exporting the `jig:provider` world.
    Wasm,
    /// A native library exporting the `jig_provider_*` C ABI.
    Native,
    /// Built into the host.
    Builtin,
}

/// One `[[providers]]` table of the host configuration.
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderDecl {
    pub name: String,
    pub kind: ProviderKind,
    /// The component (`.wasm`) or library (`.so`) file; absent for builtins.
    pub path: Option<PathBuf>,
    /// The provider's operator settings; must be a JSON/1 object.
    #[serde(default)]
    pub settings: Value,
    /// Secret name → file whose contents the loader reads at load time.
    #[serde(default)]
    pub secrets: BTreeMap<String, PathBuf>,
    /// What the operator grants a WASM provider beyond nothing; all off by
    /// default ([`crate::grants`]).
    #[serde(default)]
    pub grants: crate::Grants,
}

/// Secret values read at load time. `Debug` shows names only.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secrets(BTreeMap<String, String>);

impl Secrets {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// Name/value pairs sorted by name, for handing across a provider boundary.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

/// What a provider receives from its declaration: validated settings and the
/// secrets' contents.
#[derive(Clone, Debug, PartialEq)]
pub struct ProviderConfig {
    /// A JSON/1 object (`{}` when the declaration has none).
    pub settings: Value,
    pub secrets: Secrets,
}

impl ProviderConfig {
    /// The settings rendered once as JSON text, for boundaries that carry text.
    pub fn settings_text(&self) -> String {
        self.settings.to_string()
    }
}

impl ProviderDecl {
    /// The artifact path a loader of `kind` needs, or a configuration error.
    pub fn artifact(&self, kind: ProviderKind) -> Result<&std::path::Path, LoadError> {
        if self.kind != kind {
            return Err(LoadError::ConfigInvalid {
                provider: self.name.clone(),
                reason: format!("kind is {:?}, this loader loads {:?}", self.kind, kind),
            });
        }
        self.path
            .as_deref()
            .ok_or_else(|| LoadError::ConfigInvalid {
                provider: self.name.clone(),
                reason: "path is required".to_owned(),
            })
    }

    /// Validates the settings and reads every secret file.
    pub fn config(&self) -> Result<ProviderConfig, LoadError> {
        let settings = self.validated_settings()?;
        let mut secrets = BTreeMap::new();
        for (name, path) in &self.secrets {
            secrets.insert(name.clone(), self.read_secret(name, path)?);
        }
        Ok(ProviderConfig {
            settings,
            secrets: Secrets(secrets),
        })
    }

    fn validated_settings(&self) -> Result<Value, LoadError> {
        let invalid = |reason: String| LoadError::ConfigInvalid {
            provider: self.name.clone(),
            reason,
        };
        let settings = match &self.settings {
            Value::Null => return Ok(Value::Object(Default::default())),
            Value::Object(_) => &self.settings,
            _ => return Err(invalid("settings must be an object".to_owned())),
        };
        // Settings arrive from TOML, whose integers and sizes JSON/1 bounds.
        flow::json::check(settings)
            .map_err(|e| invalid(format!("settings are not JSON/1: {e}")))?;
        Ok(settings.clone())
    }

    fn read_secret(&self, name: &str, path: &std::path::Path) -> Result<String, LoadError> {
        use std::io::Read;
        let unreadable = |reason: String| LoadError::SecretUnreadable {
            provider: self.name.clone(),
            secret: name.to_owned(),
            reason,
        };
        if name.is_empty() {
            return Err(unreadable("secret name is empty".to_owned()));
        }
        let file = std::fs::File::open(path).map_err(|e| unreadable(e.kind().to_string()))?;
        let mut bytes = Vec::new();
        file.take(MAX_SECRET_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| unreadable(e.kind().to_string()))?;
        if bytes.len() as u64 > MAX_SECRET_BYTES {
            return Err(unreadable(format!("file exceeds {MAX_SECRET_BYTES} bytes")));
        }
        String::from_utf8(bytes).map_err(|_| unreadable("file is not UTF-8".to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decl(settings: Value, secrets: &[(&str, PathBuf)]) -> ProviderDecl {
        ProviderDecl {
            name: "kv".to_owned(),
            kind: ProviderKind::Wasm,
            path: Some(PathBuf::from("/nowhere/kv.wasm")),
            settings,
            secrets: secrets
                .iter()
                .map(|(n, p)| (n.to_string(), p.clone()))
                .collect(),
            grants: Default::default(),
        }
    }

    #[test]
    fn absent_settings_become_an_empty_object() {
        let config = decl(Value::Null, &[]).config().unwrap();
        assert_eq!(config.settings, serde_json::json!({}));
        assert_eq!(config.settings_text(), "{}");
    }

    #[test]
    fn non_object_settings_are_rejected() {
        let err = decl(serde_json::json!([1]), &[]).config().unwrap_err();
        assert_eq!(err.code(), "PROVIDER_CONFIG_INVALID");
    }

    #[test]
    fn settings_outside_json1_number_domain_are_rejected() {
        let err = decl(serde_json::json!({"n": 9007199254740993u64}), &[])
            .config()
            .unwrap_err();
        assert_eq!(err.code(), "PROVIDER_CONFIG_INVALID");
    }

    #[test]
    fn secret_at_limit_is_read_and_one_past_is_refused_without_its_contents() {
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().join("at");
        let past = dir.path().join("past");
        std::fs::write(&at, "s".repeat(MAX_SECRET_BYTES as usize)).unwrap();
        std::fs::write(&past, "s".repeat(MAX_SECRET_BYTES as usize + 1)).unwrap();

        let config = decl(Value::Null, &[("token", at)]).config().unwrap();
        assert_eq!(
            config.secrets.get("token").unwrap().len() as u64,
            MAX_SECRET_BYTES
        );
        assert_eq!(format!("{:?}", config.secrets), r#"{"token"}"#);

        let err = decl(Value::Null, &[("token", past)]).config().unwrap_err();
        assert_eq!(err.code(), "PROVIDER_SECRET_UNREADABLE");
        assert!(!err.to_string().contains("sss"));
    }

    #[test]
    fn missing_or_binary_secret_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let binary = dir.path().join("bin");
        std::fs::write(&binary, [0xff, 0xfe]).unwrap();
        for path in [dir.path().join("absent"), binary] {
            let err = decl(Value::Null, &[("token", path)]).config().unwrap_err();
            assert_eq!(err.code(), "PROVIDER_SECRET_UNREADABLE");
        }
    }

    #[test]
    fn artifact_requires_matching_kind_and_a_path() {
        let mut d = decl(Value::Null, &[]);
        assert!(d.artifact(ProviderKind::Wasm).is_ok());
        assert_eq!(
            d.artifact(ProviderKind::Native).unwrap_err().code(),
            "PROVIDER_CONFIG_INVALID"
        );
        d.path = None;
        assert_eq!(
            d.artifact(ProviderKind::Wasm).unwrap_err().code(),
            "PROVIDER_CONFIG_INVALID"
        );
    }

    #[test]
    fn declaration_parses_from_toml_shape() {
        let d: ProviderDecl = serde_json::from_value(serde_json::json!({
            "name": "kv", "kind": "native", "path": "/lib/kv.so",
            "settings": {"entries": {"a": "1"}}, "secrets": {"token": "/run/t"}
        }))
        .unwrap();
        assert_eq!(d.kind, ProviderKind::Native);
        assert!(serde_json::from_value::<ProviderDecl>(serde_json::json!({
            "name": "kv", "kind": "python"
        }))
        .is_err());
    }
}
