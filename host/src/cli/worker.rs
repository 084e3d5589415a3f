//! `jig worker --database URL [--concurrency N]`: claim Runs queued in
//! PostgreSQL and execute them here (see [`jig_server::queue::worker`]).

use std::path::{Path, PathBuf};

use super::{duration_option, load_config, CliError, Code};
use jig_server::queue::{self, worker};

/// Shared by `jig worker` and `jig serve`: where the database is.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct DatabaseArgs {
    /// The PostgreSQL URL, without a password (default [database] url).
    #[arg(long, value_name = "URL")]
    pub database: Option<String>,
    /// The file holding the database password (default [database] password-file).
    #[arg(long, value_name = "PATH")]
    pub database_password_file: Option<PathBuf>,
    /// The CA certificates (PEM) the database's TLS certificate is checked
    /// against (default [database] ca-file; else the system's roots).
    #[arg(long, value_name = "PATH")]
    pub database_ca_file: Option<PathBuf>,
}

impl DatabaseArgs {
    /// The connection settings, if a database is named by flag or table.
    pub fn resolve(
        &self,
        table: &jig_engine::config::Database,
    ) -> Result<Option<queue::Database>, CliError> {
        let Some(url) = self.database.clone().or(table.url.clone()) else {
            return Ok(None);
        };
        let password = self
            .database_password_file
            .clone()
            .or(table.password_file.clone());
        let ca_file = self.database_ca_file.clone().or(table.ca_file.clone());
        queue::connect_config(&url, password.as_deref(), ca_file.as_deref())
            .map(Some)
            .map_err(CliError::from)
    }
}

#[derive(clap::Args, Debug)]
pub struct WorkerArgs {
    #[command(flatten)]
    database: DatabaseArgs,
    /// Runs executed at once (default 1).
    #[arg(long, value_name = "N", default_value_t = 1)]
    concurrency: usize,
    /// The lease a claim holds between heartbeats (default 10s).
    #[arg(long, value_name = "DURATION")]
    lease: Option<String>,
    /// After SIGTERM, how long dispatched Runs may finish before they are
    /// cancelled (default 30s, like `jig serve`).
    #[arg(long, value_name = "DURATION")]
    shutdown_grace: Option<String>,
    /// The owner-private cache of admitted bytes (default
    /// $XDG_CACHE_HOME/jig/worker, else ~/.cache/jig/worker).
    #[arg(long, value_name = "DIR")]
    cache: Option<PathBuf>,
    /// How often the cache is rid of what no current generation or Run
    /// executing here names (default 10m; also once at start).
    #[arg(long, value_name = "DURATION")]
    cache_interval: Option<String>,
}

pub fn worker(config: Option<&Path>, args: WorkerArgs) -> Result<u8, CliError> {
    let usage = |m: String| CliError::new(Code::Usage, m);
    let config = load_config(config)?;
    let Some(database) = args.database.resolve(&config.database)? else {
        return Err(usage(
            "jig worker needs --database URL (or [database] url in the host configuration)".into(),
        ));
    };
    if args.concurrency == 0 {
        return Err(usage("--concurrency must be at least 1".into()));
    }
    let lease = duration_option(args.lease, queue::DEFAULT_LEASE, "lease", "10s")?;
    let shutdown_grace = duration_option(
        args.shutdown_grace,
        jig_server::serve::DEFAULT_SHUTDOWN_GRACE,
        "shutdown grace",
        "30s or 2m",
    )?;
    let cache_interval = duration_option(
        args.cache_interval,
        queue::cache::CACHE_INTERVAL,
        "cache interval",
        "10m",
    )?;
    let cache = match args.cache {
        Some(dir) => dir,
        None => {
            let base = std::env::var_os("XDG_CACHE_HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
                .ok_or_else(|| usage("no --cache and no HOME".into()))?;
            base.join("jig").join("worker")
        }
    };
    super::logs::install("worker");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::new(Code::Internal, e.to_string()))?;
    runtime
        .block_on(async {
            let queue = queue::Queue::open(database).await?;
            worker::run(
                queue,
                worker::Options {
                    concurrency: args.concurrency,
                    lease,
                    cache,
                    config,
                    shutdown_grace,
                    cache_interval,
                },
            )
            .await
        })
        .map_err(CliError::from)?;
    Ok(0)
}
