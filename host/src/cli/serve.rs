//! `jig serve`: resolve what to serve and how to listen from the flags and
//! the host configuration's `[serve]` and `[[projects]]`, then hand over to
//! the library's [`jig_server::serve`].

use std::path::{Path, PathBuf};

use super::{duration_option, load_config, CliError, Code};
use jig_server::serve::{self, listen, Limits, Options};

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// The Unix socket (default [serve] socket, else $XDG_RUNTIME_DIR/jig/jig.sock,
    /// else /run/jig/jig.sock). Ignored under systemd socket activation.
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Also listen on TCP ADDR (host:port); requires --token-file. Off
    /// loopback it requires --tls-cert and --tls-key, or
    /// --insecure-plain-http.
    #[arg(long, value_name = "ADDR")]
    tcp: Option<String>,
    /// The bearer token TCP clients must present: at least 32 bytes, in a
    /// file only its owner can read.
    #[arg(long, value_name = "PATH")]
    token_file: Option<PathBuf>,
    /// Serve TCP over TLS with this certificate chain (PEM, leaf first);
    /// requires --tls-key. Both are read again on SIGHUP.
    #[arg(long, value_name = "PEM")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert's certificate (PEM).
    #[arg(long, value_name = "PEM")]
    tls_key: Option<PathBuf>,
    /// Serve plain HTTP on a TCP address that is not loopback (the token
    /// and the console's cookie cross the network in clear).
    #[arg(long)]
    insecure_plain_http: bool,
    /// Write a new random bearer token to FILE (mode 0600; never replaces
    /// a file) and exit.
    #[arg(long, value_name = "FILE")]
    new_token: Option<PathBuf>,
    /// Runs executing at once (default [serve] max-active-runs, else the number of CPUs).
    #[arg(long, value_name = "N")]
    max_active_runs: Option<usize>,
    /// Runs waiting for a slot; past it RESOURCE_EXHAUSTED (default 64).
    #[arg(long, value_name = "N")]
    max_queued_runs: Option<usize>,
    /// For how many recently run targets the next Run's envelope is made
    /// ahead, held before its program runs (default [serve] envelopes-ahead,
    /// else 8; 0 makes none).
    #[arg(long, value_name = "N")]
    envelopes_ahead: Option<usize>,
    /// How long SIGTERM lets Runs finish before cancelling them (default 30s).
    #[arg(long, value_name = "DURATION")]
    shutdown_grace: Option<String>,
    /// Serve the web console on the TCP listener too (sign in with the
    /// bearer token); on the Unix socket it is reached through jig console.
    #[arg(long)]
    console: bool,
    /// TCP connections served at once; one more is answered 503 and closed
    /// (default [serve] max-connections, else 256).
    #[arg(long, value_name = "N")]
    max_connections: Option<usize>,
    /// How long a request's head may take, and an idle connection is kept
    /// (default [serve] header-timeout, else 10s).
    #[arg(long, value_name = "DURATION")]
    header_timeout: Option<String>,
    /// How long a request's body may take from its head; past it 408
    /// JIG_REQUEST_TIMEOUT (default [serve] body-timeout, else 60s).
    #[arg(long, value_name = "DURATION")]
    body_timeout: Option<String>,
    #[command(flatten)]
    database: super::worker::DatabaseArgs,
}

/// With `-C DIR` the one project in DIR, named by its directory's basename
/// (made a LocalName); else the configuration's `[[projects]]`.
pub fn serve(chdir: Option<&Path>, config: Option<&Path>, args: ServeArgs) -> Result<u8, CliError> {
    let usage = |m: String| CliError::new(Code::Usage, m);
    if let Some(path) = &args.new_token {
        serve::new_token(path).map_err(CliError::from)?;
        return Ok(0);
    }
    let config = load_config(config)?;
    let table = config.serve.clone();
    let projects = match chdir {
        Some(dir) => {
            let root = super::project_root(dir)?;
            vec![(local_name(&root), root)]
        }
        None => config
            .projects
            .iter()
            .map(|p| (p.name.clone(), p.path.clone()))
            .collect(),
    };
    if projects.is_empty() {
        return Err(usage(
            "nothing to serve: give -C DIR or declare [[projects]] in the host configuration"
                .into(),
        ));
    }
    let tcp = args.tcp.or(table.tcp);
    let token_file = args.token_file.or(table.token_file);
    let tcp = match (tcp, token_file) {
        (None, _) => None,
        (Some(address), Some(token)) => Some((address, token)),
        (Some(_), None) => return Err(usage("--tcp requires --token-file".into())),
    };
    let invalid = |m: &str| CliError::new(Code::ConfigInvalid, m);
    let tls = match (
        args.tls_cert.or(table.tls_cert),
        args.tls_key.or(table.tls_key),
    ) {
        (None, None) => None,
        (Some(cert), Some(key)) => Some(serve::tls::Files { cert, key }),
        (Some(_), None) => return Err(invalid("--tls-cert requires --tls-key")),
        (None, Some(_)) => return Err(invalid("--tls-key requires --tls-cert")),
    };
    let insecure_plain_http =
        args.insecure_plain_http || table.insecure_plain_http.unwrap_or(false);
    if tls.is_some() && tcp.is_none() {
        return Err(invalid(
            "--tls-cert and --tls-key serve the TCP listener: they require --tcp",
        ));
    }
    if tls.is_some() && insecure_plain_http {
        return Err(invalid(
            "--insecure-plain-http and --tls-cert contradict each other: give one",
        ));
    }
    let console = args.console || table.console.unwrap_or(false);
    if console && tcp.is_none() {
        return Err(usage(
            "--console serves the console on the TCP listener: it requires --tcp (on the Unix socket, use jig console)".into(),
        ));
    }
    let shutdown_grace = duration_option(
        args.shutdown_grace.or(table.shutdown_grace),
        serve::DEFAULT_SHUTDOWN_GRACE,
        "shutdown grace",
        "30s or 2m",
    )?;
    let max_active = args
        .max_active_runs
        .or(table.max_active_runs)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if max_active == 0 {
        return Err(usage("max-active-runs must be at least 1".into()));
    }
    let max_connections = args
        .max_connections
        .or(table.max_connections)
        .unwrap_or(listen::DEFAULT_MAX_CONNECTIONS);
    if max_connections == 0 {
        return Err(usage("max-connections must be at least 1".into()));
    }
    let connections = listen::Bounds {
        max_connections,
        header_timeout: duration_option(
            args.header_timeout.or(table.header_timeout),
            listen::DEFAULT_HEADER_TIMEOUT,
            "header timeout",
            "10s",
        )?,
        body_timeout: duration_option(
            args.body_timeout.or(table.body_timeout),
            listen::DEFAULT_BODY_TIMEOUT,
            "body timeout",
            "60s or 2m",
        )?,
    };
    let database = args.database.resolve(&config.database)?;
    let options = Options {
        database,
        projects,
        socket: args
            .socket
            .or(table.socket)
            .unwrap_or_else(serve::default_socket),
        tcp,
        limits: Limits {
            max_active,
            max_queued: args
                .max_queued_runs
                .or(table.max_queued_runs)
                .unwrap_or(serve::DEFAULT_MAX_QUEUED_RUNS),
            envelopes_ahead: args
                .envelopes_ahead
                .or(table.envelopes_ahead)
                .unwrap_or(serve::DEFAULT_ENVELOPES_AHEAD),
        },
        shutdown_grace,
        config,
        console,
        connections,
        tls,
        insecure_plain_http,
    };
    super::logs::install("serve");
    serve::serve(options).map_err(CliError::from)?;
    Ok(0)
}

/// A directory's basename as a LocalName: lowercased, each run of bytes
/// other than ASCII letters and digits becomes one `-`, cut to the
/// LocalName limit; an empty result is `project`.
pub(crate) fn local_name(root: &Path) -> String {
    let base = root
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let joined = base
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    let mut name: String = joined
        .chars()
        .take(flow::wire::MAX_LOCAL_NAME_BYTES)
        .collect();
    while name.ends_with('-') {
        name.pop();
    }
    if flow::wire::is_local_name(&name) {
        name
    } else {
        "project".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basenames_become_local_names() {
        assert_eq!(local_name(Path::new("/srv/site")), "site");
        assert_eq!(local_name(Path::new("/tmp/.tmpAb_9")), "tmpab-9");
        assert_eq!(local_name(Path::new("/tmp/__")), "project");
        assert_eq!(local_name(Path::new("/tmp/123")), "123");
        for name in ["site", "tmpab-9", "project"] {
            assert!(flow::wire::is_local_name(name));
        }
    }
}
