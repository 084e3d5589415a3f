//! `jig doctor`: what this host can run, and how contained.

use std::path::Path;

use jig_engine::config::HostConfig;
use jig_engine::envelope;

/// Recipes a host must be able to run for `jig doctor` to pass; the
/// JavaScript runtimes are optional host support.
const REQUIRED: [&str; 3] = ["flow.py", "flow.wasm", "flow.bin"];

pub fn doctor(config: &HostConfig, base: &Path) -> u8 {
    let mut ok = true;
    outln!("jig {}", env!("CARGO_PKG_VERSION"));
    if let Some(source) = &config.source {
        outln!("configuration: {}", source.display());
    } else {
        outln!("configuration: defaults (no host.toml)");
    }
    let verifier = jig_verify::current();
    outln!(
        "installation verification: {} ({})",
        verifier.policy().as_str(),
        match (verifier.policy(), jig_verify::cache_dir(false)) {
            (jig_verify::Policy::Strict, _) => "hashes every time, no cache".to_string(),
            (_, Some(dir)) => format!("cache {}", dir.display()),
            (_, None) => "no usable cache yet; hashes afresh".to_string(),
        }
    );
    // `jig run` and `jig exec` choose the envelope before anything starts
    // and refuse the whole Run tree without it (a tree may reach every
    // recipe through its children), so without an envelope no recipe is
    // runnable, `flow.wasm` included.
    let report = envelope::report(&config.containment);
    let envelope = &report.envelope;
    outln!("recipes:");
    let mut line = |entry: &str, state: Result<String, String>| {
        let state = match &envelope {
            Ok(_) => state,
            Err(_) => Err("no execution envelope on this host (see containment)".to_string()),
        };
        match &state {
            Ok(how) => outln!("  {entry:<10} runnable: {how}"),
            Err(why) => outln!("  {entry:<10} unavailable: {why}"),
        }
        if state.is_err() && REQUIRED.contains(&entry) {
            ok = false;
        }
    };
    // A runtime is runnable only when its minimal view can be proved, as
    // a Run proves it before the Flow starts (seed 002 §9).
    let runtime = |name: &str| {
        let path = config
            .runtime(name)
            .ok_or_else(|| format!("no {name} configured or installed"))?;
        envelope::runtime_view(name, &path)?;
        Ok(path.display().to_string())
    };
    line("flow.py", runtime("python3"));
    line(
        "flow.wasm",
        jig_engine::exec::wasm::engine()
            .map(|_| "in-process wasmtime (WASI preview 1 and 2)".to_string()),
    );
    line("flow.bin", Ok("native executable".into()));
    line("flow.ts", runtime("bun").or_else(|_| runtime("deno")));
    line(
        "flow.js",
        runtime("bun")
            .or_else(|_| runtime("deno"))
            .or_else(|_| runtime("node")),
    );

    outln!("containment:");
    match &report.bwrap {
        Ok((path, version)) => outln!(
            "  bubblewrap: {version} at {} (jig needs >= {}; note: the reference host asks for >= {})",
            path.display(),
            report.bwrap_min,
            report.bwrap_reference,
        ),
        Err(why) => outln!("  bubblewrap: unavailable: {why}"),
    }
    match &report.user_namespaces {
        Ok(()) => outln!("  user namespaces: available"),
        Err(why) => outln!("  user namespaces: unavailable: {why}"),
    }
    match &report.cgroup {
        Some((version, controllers)) => {
            outln!(
                "  cgroup: {version}, controllers: {}",
                controllers.join(" ")
            )
        }
        None => outln!("  cgroup: none found"),
    }
    match envelope {
        Ok(envelope) => outln!("  envelope in use: {envelope}"),
        Err(why) => {
            outln!("  envelope in use: none; jig run and jig exec refuse every Run: {why}");
            ok = false;
        }
    }
    disk(config, base);
    agent(config);
    for provider in &config.providers {
        let path = provider.path.as_deref().unwrap_or(Path::new("(builtin)"));
        outln!(
            "provider {}: {} {}",
            provider.name,
            kind(&provider.kind),
            path.display()
        );
    }
    if ok {
        0
    } else {
        1
    }
}

/// What the project `jig doctor` runs in (or below) keeps under `.jig/`,
/// and the retention that bounds it (nothing is read but sizes and names).
fn disk(config: &HostConfig, base: &Path) {
    let Ok(root) = super::project_root(base) else {
        return;
    };
    let used = jig_engine::state::retention::usage(&root);
    outln!("disk (this project's .jig):");
    outln!(
        "  runs: {} ({} bytes with keys and checkpoints)",
        used.runs.count,
        used.runs.bytes
    );
    outln!(
        "  packets: {} ({} bytes)",
        used.packets.count,
        used.packets.bytes
    );
    outln!(
        "  store: {} artifacts ({} bytes)",
        used.store.count,
        used.store.bytes
    );
    match config.retention_policy() {
        Ok(Some(policy)) => {
            let limit = |d: Option<std::time::Duration>| {
                d.map_or("none".to_string(), |d| format!("{} s", d.as_secs()))
            };
            outln!(
                "  retention: max-age {}, max-runs {}, packets-max-age {}, key-window {} s",
                limit(policy.max_age),
                policy
                    .max_runs
                    .map_or("none".to_string(), |n| n.to_string()),
                limit(policy.packets_max_age),
                policy.key_window.as_secs()
            );
        }
        Ok(None) => outln!("  retention: none ([retention] not set; nothing is removed)"),
        Err(why) => outln!("  retention: invalid: {why}"),
    }
}

/// The Agent Run endpoint: the non-secret identity review pins, where the
/// configuration and the key come from, and whether it is valid. Sends no
/// request and reads no key. An Agent is optional host support, so an
/// invalid configuration does not fail `jig doctor`.
fn agent(config: &HostConfig) {
    outln!("agent:");
    agent_endpoint(config);
    // The installed worker of the native ACP clients (providers/acp).
    let worker = jig_provider_builtin::agent::acp::WORKER_PROGRAM;
    match jig_verify::installed(worker) {
        Ok(path) => outln!("  acp worker: {worker} at {}", path.display()),
        Err(why) => {
            outln!("  acp worker: unavailable: {why} (native ACP clients are refused at review)")
        }
    }
}

fn agent_endpoint(config: &HostConfig) {
    use jig_provider_builtin::agent::endpoint::Source;
    use jig_provider_builtin::agent::values::KeySource;
    let endpoint = match config.agent.endpoint() {
        Ok(endpoint) => endpoint,
        Err(why) => {
            outln!("  configuration: invalid: {why}");
            outln!("  Agent-using targets are refused at review (PROJECT_AGENT_UNAVAILABLE)");
            return;
        }
    };
    let identity = endpoint.identity();
    outln!("  client: {}", identity.client);
    outln!("  api: {}", identity.api);
    outln!("  endpoint: {}", identity.endpoint);
    if let Some(native) = &endpoint.native {
        // A native ACP client: the executable is the endpoint; credentials
        // are named, never shown.
        if identity.model.is_empty() {
            outln!("  model: (the client's default)");
        } else {
            outln!("  model: {}", identity.model);
        }
        let names: Vec<&str> = native.env.iter().map(|(k, _)| k.as_str()).collect();
        outln!(
            "  credentials: {} (passed to the ACP client only)",
            names.join(" ")
        );
        outln!("  configuration: valid (from the environment; the client was not started)");
        return;
    }
    outln!("  model: {}", identity.model);
    let key = match &endpoint.key {
        KeySource::Env(_) if endpoint.base_url.contains("openrouter.ai") => {
            "OPENROUTER_API_KEY (environment)"
        }
        KeySource::Env(_) => "OPENAI_API_KEY (environment)",
        KeySource::File(_) => "[agent] api-key-file (read by the Agent worker only)",
    };
    outln!("  key: {key}");
    let source = match endpoint.source {
        Source::Environment => "the environment",
        Source::Table => "the [agent] table of host.toml",
    };
    let key_file_ok = match &endpoint.key {
        KeySource::File(path) => std::fs::metadata(path).is_ok_and(|m| m.is_file()),
        KeySource::Env(_) => true,
    };
    if key_file_ok {
        outln!("  configuration: valid (from {source}; no request was sent)");
    } else {
        outln!("  configuration: invalid: [agent] api-key-file is not a regular file");
    }
    if !endpoint.ignored_env.is_empty() {
        outln!(
            "  ignored (the complete [agent] table wins): {}",
            endpoint.ignored_env.join(" ")
        );
    }
}

fn kind(kind: &jig_provider_api::ProviderKind) -> &'static str {
    match kind {
        jig_provider_api::ProviderKind::Wasm => "wasm",
        jig_provider_api::ProviderKind::Native => "native",
        jig_provider_api::ProviderKind::Builtin => "builtin",
    }
}
