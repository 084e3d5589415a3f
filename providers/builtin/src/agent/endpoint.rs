//! Where the Agent worker sends its one request: the endpoint configuration
//! of docs/src/agents.md, from the host environment variables of the reference
//! (`OPENAI_*`, `OPENROUTER_*`, `JIG_AGENT_CLIENT`) or from the host
//! configuration's `[agent]` table (which the NixOS module writes).
//!
//! Which one wins: a non-empty `[agent]` table is the whole configuration.
//! It must be complete on its own (`model` and `api-key-file`; `api` and
//! `base-url` have defaults) and never borrows a missing field from the
//! environment, so a partial table next to Agent environment variables is
//! refused as ambiguous rather than mixed. A complete table wins over the
//! environment, which is then ignored (and `jig doctor` says so). Without a
//! table the environment is read as the reference reads it.
//!
//! This module only parses and validates: it reads no key file (the Agent
//! worker alone does) and keeps an environment key only to hand it to the
//! worker. [`Endpoint::identity`] is the non-secret allowlist (client, API,
//! endpoint, model) that review shows and the Plan pins; the key and the
//! key file's path are never part of it.

use std::path::PathBuf;

use super::values::{check_base_url, check_key, check_model, Api, EndpointError, KeySource};

/// The endpoint when `OPENAI_BASE_URL` / `base-url` is absent.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// The endpoint `OPENROUTER_API_KEY` + `OPENROUTER_MODEL` select.
pub const OPENROUTER_BASE_URL: &str = "https://openrouter.ai/api/v1";
/// The environment variables this module reads, so a caller can collect
/// exactly these and nothing else.
pub const ENV_VARS: [&str; 7] = [
    "JIG_AGENT_CLIENT",
    "OPENAI_API_KEY",
    "OPENAI_MODEL",
    "OPENAI_BASE_URL",
    "OPENAI_API",
    "OPENROUTER_API_KEY",
    "OPENROUTER_MODEL",
];

/// Where the configuration came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Environment,
    Table,
}

/// One valid endpoint configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub api: Api,
    /// The base URL, without a trailing `/`.
    pub base_url: String,
    pub model: String,
    pub key: KeySource,
    pub source: Source,
    /// Agent environment variables present but ignored because a complete
    /// `[agent]` table wins.
    pub ignored_env: Vec<&'static str>,
    /// A native ACP client (`JIG_AGENT_CLIENT`), which replaces the HTTP
    /// endpoint: then `api`, `base_url` and `key` are unused.
    pub native: Option<super::acp::Native>,
}

/// The client of this build: the direct OpenAI-compatible HTTP client.
pub const CLIENT: &str = "openai-compatible";

impl Endpoint {
    /// The non-secret identity review shows and the Plan pins: client,
    /// API, endpoint, model. A change of any of them is a changed execution
    /// environment; the key is not part of it.
    pub fn identity(&self) -> Identity {
        if let Some(native) = &self.native {
            // A native client: its name, the ACP "API", the executable as
            // the endpoint, and the model when one is configured.
            return Identity {
                client: native.client.as_str().to_string(),
                api: "acp".to_string(),
                endpoint: native.program.to_string_lossy().into_owned(),
                model: native.model.clone().unwrap_or_default(),
            };
        }
        Identity {
            client: CLIENT.to_string(),
            api: self.api.as_str().to_string(),
            endpoint: self.base_url.clone(),
            model: self.model.clone(),
        }
    }

    /// The URL of the one request.
    pub fn url(&self) -> String {
        format!("{}{}", self.base_url, self.api.path())
    }
}

/// The reviewed, non-secret execution identity of the Agent client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub client: String,
    pub api: String,
    pub endpoint: String,
    pub model: String,
}

/// The `[agent]` table as the host configuration holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    pub api: Option<String>,
    pub base_url: Option<String>,
    pub model: Option<String>,
    pub api_key_file: Option<PathBuf>,
}

impl Table {
    fn is_empty(&self) -> bool {
        self.api.is_none()
            && self.base_url.is_none()
            && self.model.is_none()
            && self.api_key_file.is_none()
    }
}

/// Resolve the endpoint from the environment (`env` answers one variable)
/// and the `[agent]` table, by the rules of this module's documentation.
pub fn resolve(
    env: &dyn Fn(&str) -> Option<String>,
    table: &Table,
) -> Result<Endpoint, EndpointError> {
    let present: Vec<&'static str> = ENV_VARS
        .iter()
        .copied()
        .filter(|name| env(name).is_some())
        .collect();
    if !table.is_empty() {
        if present.contains(&"JIG_AGENT_CLIENT") {
            return Err(EndpointError::ClientWithTable);
        }
        return from_table(table, present);
    }
    if let Some(client) = env("JIG_AGENT_CLIENT") {
        let client = super::acp::Client::parse(&client).ok_or(EndpointError::Invalid(
            "JIG_AGENT_CLIENT",
            "it must be codex, claude or pi",
        ))?;
        let native = super::acp::resolve(client, env)?;
        return Ok(Endpoint {
            api: Api::Responses,
            base_url: native.program.to_string_lossy().into_owned(),
            model: native.model.clone().unwrap_or_default(),
            key: KeySource::Env(String::new()),
            source: Source::Environment,
            ignored_env: Vec::new(),
            native: Some(native),
        });
    }
    let openrouter = env("OPENROUTER_API_KEY").is_some() || env("OPENROUTER_MODEL").is_some();
    let openai = [
        "OPENAI_API_KEY",
        "OPENAI_MODEL",
        "OPENAI_BASE_URL",
        "OPENAI_API",
    ]
    .iter()
    .any(|name| env(name).is_some());
    match (openrouter, openai) {
        (true, true) => Err(EndpointError::Mixed),
        (true, false) => {
            let key =
                env("OPENROUTER_API_KEY").ok_or(EndpointError::Required("OPENROUTER_API_KEY"))?;
            let model =
                env("OPENROUTER_MODEL").ok_or(EndpointError::Required("OPENROUTER_MODEL"))?;
            Ok(Endpoint {
                api: Api::ChatCompletions,
                base_url: OPENROUTER_BASE_URL.to_string(),
                model: check_model("OPENROUTER_MODEL", &model)?,
                key: KeySource::Env(check_key("OPENROUTER_API_KEY", &key)?),
                source: Source::Environment,
                ignored_env: Vec::new(),
                native: None,
            })
        }
        (false, true) => {
            let key = env("OPENAI_API_KEY").ok_or(EndpointError::Required("OPENAI_API_KEY"))?;
            let model = env("OPENAI_MODEL").ok_or(EndpointError::Required("OPENAI_MODEL"))?;
            let api = match env("OPENAI_API") {
                None => Api::Responses,
                Some(text) => Api::parse(&text).ok_or(EndpointError::Invalid(
                    "OPENAI_API",
                    "it must be responses or chat-completions",
                ))?,
            };
            let base_url = match env("OPENAI_BASE_URL") {
                None => DEFAULT_BASE_URL.to_string(),
                Some(url) => check_base_url("OPENAI_BASE_URL", &url)?,
            };
            Ok(Endpoint {
                api,
                base_url,
                model: check_model("OPENAI_MODEL", &model)?,
                key: KeySource::Env(check_key("OPENAI_API_KEY", &key)?),
                source: Source::Environment,
                ignored_env: Vec::new(),
                native: None,
            })
        }
        (false, false) => Err(EndpointError::Missing),
    }
}

fn from_table(table: &Table, present: Vec<&'static str>) -> Result<Endpoint, EndpointError> {
    let incomplete = |field: &'static str| {
        if present.is_empty() {
            EndpointError::Required(field)
        } else {
            EndpointError::Ambiguous(field)
        }
    };
    let model = table
        .model
        .as_deref()
        .ok_or_else(|| incomplete("[agent] model"))?;
    let key_file = table
        .api_key_file
        .as_ref()
        .ok_or_else(|| incomplete("[agent] api-key-file"))?;
    if !key_file.is_absolute() {
        return Err(EndpointError::Invalid(
            "[agent] api-key-file",
            "it must be an absolute path",
        ));
    }
    let api = match table.api.as_deref() {
        None => Api::Responses,
        Some(text) => Api::parse(text).ok_or(EndpointError::Invalid(
            "[agent] api",
            "it must be responses or chat-completions",
        ))?,
    };
    let base_url = match table.base_url.as_deref() {
        None => DEFAULT_BASE_URL.to_string(),
        Some(url) => check_base_url("[agent] base-url", url)?,
    };
    Ok(Endpoint {
        api,
        base_url,
        model: check_model("[agent] model", model)?,
        key: KeySource::File(key_file.clone()),
        source: Source::Table,
        ignored_env: present,
        native: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::values::{MAX_BASE_URL_CHARS, MAX_KEY_BYTES, MAX_MODEL_CHARS};
    use std::collections::BTreeMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name: &str| map.get(name).cloned()
    }

    fn from_env(pairs: &[(&str, &str)]) -> Result<Endpoint, EndpointError> {
        resolve(&env(pairs), &Table::default())
    }

    fn table() -> Table {
        Table {
            api: Some("chat-completions".into()),
            base_url: Some("http://127.0.0.1:8080/v1/".into()),
            model: Some("local-model".into()),
            api_key_file: Some("/run/credentials/jig/agent-key".into()),
        }
    }

    #[test]
    fn nothing_configured_is_missing() {
        assert_eq!(from_env(&[]), Err(EndpointError::Missing));
    }

    #[test]
    fn openai_defaults_to_responses_at_the_openai_endpoint() {
        let e = from_env(&[("OPENAI_API_KEY", "sk-1"), ("OPENAI_MODEL", "gpt-x")]).unwrap();
        assert_eq!(e.api, Api::Responses);
        assert_eq!(e.base_url, DEFAULT_BASE_URL);
        assert_eq!(e.url(), "https://api.openai.com/v1/responses");
        assert_eq!(e.key, KeySource::Env("sk-1".into()));
        assert_eq!(
            e.identity(),
            Identity {
                client: CLIENT.into(),
                api: "responses".into(),
                endpoint: DEFAULT_BASE_URL.into(),
                model: "gpt-x".into()
            }
        );
    }

    #[test]
    fn key_and_model_are_required() {
        assert_eq!(
            from_env(&[("OPENAI_MODEL", "m")]),
            Err(EndpointError::Required("OPENAI_API_KEY"))
        );
        assert_eq!(
            from_env(&[("OPENAI_API_KEY", "k")]),
            Err(EndpointError::Required("OPENAI_MODEL"))
        );
    }

    #[test]
    fn the_key_is_bounded_non_blank_and_nul_free() {
        let at = "k".repeat(MAX_KEY_BYTES);
        let past = "k".repeat(MAX_KEY_BYTES + 1);
        assert!(from_env(&[("OPENAI_API_KEY", &at), ("OPENAI_MODEL", "m")]).is_ok());
        assert!(matches!(
            from_env(&[("OPENAI_API_KEY", &past), ("OPENAI_MODEL", "m")]),
            Err(EndpointError::Invalid("OPENAI_API_KEY", _))
        ));
        assert!(matches!(
            from_env(&[("OPENAI_API_KEY", " \t"), ("OPENAI_MODEL", "m")]),
            Err(EndpointError::Invalid("OPENAI_API_KEY", _))
        ));
        assert!(check_key("K", "a\0b").is_err());
        // The error never carries the value.
        let e = from_env(&[("OPENAI_API_KEY", &past), ("OPENAI_MODEL", "m")]).unwrap_err();
        assert!(!e.to_string().contains("kkkk"));
        assert!(!format!("{:?}", KeySource::Env("sk-secret".into())).contains("sk-secret"));
    }

    #[test]
    fn the_model_follows_the_pattern_and_length() {
        let at = format!("a{}", "b".repeat(MAX_MODEL_CHARS - 1));
        let past = format!("a{}", "b".repeat(MAX_MODEL_CHARS));
        assert!(check_model("M", &at).is_ok());
        assert!(check_model("M", &past).is_err());
        assert!(check_model("M", "org/model-1.5:free").is_ok());
        for bad in ["", "-lead", ".lead", "has space", "ünicode", "a?b"] {
            assert!(check_model("M", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_api_is_responses_or_chat_completions() {
        let base = [("OPENAI_API_KEY", "k"), ("OPENAI_MODEL", "m")];
        let with = |api: &str| {
            let mut pairs = base.to_vec();
            pairs.push(("OPENAI_API", api));
            from_env(&pairs)
        };
        assert_eq!(with("chat-completions").unwrap().api, Api::ChatCompletions);
        assert_eq!(
            with("chat-completions").unwrap().url(),
            "https://api.openai.com/v1/chat/completions"
        );
        assert_eq!(with("responses").unwrap().api, Api::Responses);
        assert!(matches!(
            with("chat"),
            Err(EndpointError::Invalid("OPENAI_API", _))
        ));
    }

    #[test]
    fn base_urls_are_https_or_loopback_http() {
        assert_eq!(
            check_base_url("U", "https://api.example.org/v1/").unwrap(),
            "https://api.example.org/v1"
        );
        for ok in [
            "http://127.0.0.1:8080/v1",
            "http://127.1.2.3/v1",
            "http://[::1]:11434/v1",
            "http://localhost:11434/v1",
        ] {
            assert!(check_base_url("U", ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://example.org/v1",
            "http://10.0.0.1/v1",
            "ftp://example.org/",
            "https://user:pw@example.org/v1",
            "https://user@example.org/v1",
            "https://example.org/v1?x=1",
            "https://example.org/v1?",
            "https://example.org/v1#f",
            "relative/v1",
            "",
        ] {
            assert!(check_base_url("U", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_base_url_is_at_most_4096_characters() {
        let prefix = "https://example.org/";
        let at = format!("{prefix}{}", "a".repeat(MAX_BASE_URL_CHARS - prefix.len()));
        let past = format!("{at}a");
        assert!(check_base_url("U", &at).is_ok());
        assert!(check_base_url("U", &past).is_err());
    }

    #[test]
    fn openrouter_selects_its_endpoint_and_chat_completions() {
        let e = from_env(&[("OPENROUTER_API_KEY", "or"), ("OPENROUTER_MODEL", "a/b")]).unwrap();
        assert_eq!(e.api, Api::ChatCompletions);
        assert_eq!(e.base_url, OPENROUTER_BASE_URL);
        assert_eq!(
            from_env(&[("OPENROUTER_API_KEY", "or")]),
            Err(EndpointError::Required("OPENROUTER_MODEL"))
        );
    }

    #[test]
    fn mixing_openrouter_and_openai_is_refused() {
        assert_eq!(
            from_env(&[
                ("OPENROUTER_API_KEY", "or"),
                ("OPENROUTER_MODEL", "a/b"),
                ("OPENAI_BASE_URL", "https://x.example/v1")
            ]),
            Err(EndpointError::Mixed)
        );
    }

    #[test]
    fn an_acp_client_is_one_of_three_and_needs_its_executable() {
        assert!(matches!(
            from_env(&[("JIG_AGENT_CLIENT", "codex"), ("CODEX_PATH", "relative")]),
            Err(EndpointError::Invalid("CODEX_PATH", _))
        ));
        assert!(matches!(
            from_env(&[("JIG_AGENT_CLIENT", "gemini")]),
            Err(EndpointError::Invalid("JIG_AGENT_CLIENT", _))
        ));
    }

    #[test]
    fn a_complete_table_wins_over_the_environment() {
        let e = resolve(
            &env(&[("OPENAI_API_KEY", "k"), ("OPENAI_MODEL", "env-model")]),
            &table(),
        )
        .unwrap();
        assert_eq!(e.source, Source::Table);
        assert_eq!(e.model, "local-model");
        assert_eq!(e.base_url, "http://127.0.0.1:8080/v1");
        assert_eq!(e.api, Api::ChatCompletions);
        assert_eq!(
            e.key,
            KeySource::File("/run/credentials/jig/agent-key".into())
        );
        assert_eq!(e.ignored_env, vec!["OPENAI_API_KEY", "OPENAI_MODEL"]);
    }

    #[test]
    fn a_table_defaults_api_and_base_url() {
        let t = Table {
            api: None,
            base_url: None,
            ..table()
        };
        let e = resolve(&env(&[]), &t).unwrap();
        assert_eq!(e.api, Api::Responses);
        assert_eq!(e.base_url, DEFAULT_BASE_URL);
        assert!(e.ignored_env.is_empty());
    }

    #[test]
    fn a_partial_table_is_incomplete_alone_and_ambiguous_with_the_environment() {
        let partial = Table {
            api_key_file: None,
            ..table()
        };
        assert_eq!(
            resolve(&env(&[]), &partial),
            Err(EndpointError::Required("[agent] api-key-file"))
        );
        assert_eq!(
            resolve(&env(&[("OPENAI_API_KEY", "k")]), &partial),
            Err(EndpointError::Ambiguous("[agent] api-key-file"))
        );
        let no_model = Table {
            model: None,
            ..table()
        };
        assert_eq!(
            resolve(&env(&[("OPENAI_MODEL", "m")]), &no_model),
            Err(EndpointError::Ambiguous("[agent] model"))
        );
    }

    #[test]
    fn a_table_with_an_acp_client_is_refused() {
        assert_eq!(
            resolve(&env(&[("JIG_AGENT_CLIENT", "claude")]), &table()),
            Err(EndpointError::ClientWithTable)
        );
    }

    #[test]
    fn table_fields_are_validated() {
        let rel = Table {
            api_key_file: Some("agent-key".into()),
            ..table()
        };
        assert!(matches!(
            resolve(&env(&[]), &rel),
            Err(EndpointError::Invalid("[agent] api-key-file", _))
        ));
        let api = Table {
            api: Some("completions".into()),
            ..table()
        };
        assert!(matches!(
            resolve(&env(&[]), &api),
            Err(EndpointError::Invalid("[agent] api", _))
        ));
        let url = Table {
            base_url: Some("http://192.168.1.2/v1".into()),
            ..table()
        };
        assert!(matches!(
            resolve(&env(&[]), &url),
            Err(EndpointError::Invalid("[agent] base-url", _))
        ));
    }
}
