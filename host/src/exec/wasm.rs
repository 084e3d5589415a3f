//! The `flow.wasm` recipe: a WASI command run in-process by wasmtime.
//!
//! The guest gets the protocol pipes as stdin/stdout, a bounded stderr, its
//! scratch and attachments as preopened directories with their access modes,
//! no environment, no sockets, no name lookup, a memory ceiling, and epoch
//! yields. Dropping the returned task stops the guest at its next epoch
//! tick, which is how cancellation and the hard deadline take effect.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use wasmtime::component::{Component, Linker as ComponentLinker, ResourceTable};
use wasmtime::{Config, Engine, Linker, Module, Store, StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::cli::{AsyncStdinStream, AsyncStdoutStream};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

/// Memory ceiling of one guest, matching the Flow envelope of HOST-FACTS §5.
pub const WASM_MEMORY_LIMIT: usize = 256 * 1024 * 1024;
/// How often the engine epoch advances; the granularity of deadlines.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);
/// Bytes a guest may have in flight to one output pipe.
const PIPE_BUDGET: usize = 1024 * 1024;

pub struct Preopen {
    pub host: PathBuf,
    pub guest: String,
    pub writable: bool,
}

pub struct WasmLaunch {
    pub bytes: Vec<u8>,
    pub preopens: Vec<Preopen>,
}

/// The process-wide engine: one epoch ticker, compiled code shared. This
/// is the engine of a command that only asks whether guests can run
/// (`jig doctor`): it touches no cache. A command that runs guests builds
/// it through [`run`], with the compiled-module cache.
pub fn engine() -> Result<&'static Engine, String> {
    shared_engine(false)
}

fn shared_engine(cached: bool) -> Result<&'static Engine, String> {
    static ENGINE: OnceLock<Result<Engine, String>> = OnceLock::new();
    ENGINE
        .get_or_init(|| {
            let mut config = Config::new();
            config.epoch_interruption(true);
            config.wasm_component_model(true);
            // Compiled code is reused across Runs from wasmtime's cache,
            // keyed by the module's bytes, the compiler, its flags and this
            // engine's configuration. Without a private cache directory
            // every Run compiles, as before.
            if let Some(cache) = cached.then(module_cache).flatten() {
                config.cache(Some(cache));
            }
            let engine = Engine::new(&config).map_err(|e| e.to_string())?;
            let ticker = engine.weak();
            std::thread::Builder::new()
                .name("jig-wasm-epoch".into())
                .spawn(move || loop {
                    std::thread::sleep(EPOCH_TICK);
                    match ticker.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => return,
                    }
                })
                .map_err(|e| e.to_string())?;
            Ok(engine)
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The compiled-module cache below the user's jig cache directory.
pub const MODULE_CACHE_DIR: &str = "wasm-modules";

/// wasmtime's cache in `<jig cache>/wasm-modules`: deserialised compiled
/// code is trusted, so only a directory of this user's that nobody else can
/// write (the route [`crate::verify::cache_dir`] checks) is used, and only
/// when it is a real private directory itself.
fn module_cache() -> Option<wasmtime::Cache> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let jig = crate::verify::cache_dir(true)?.parent()?.to_path_buf();
    let dir = jig.join(MODULE_CACHE_DIR);
    if std::fs::symlink_metadata(&dir).is_err() {
        std::fs::DirBuilder::new().mode(0o700).create(&dir).ok()?;
    }
    let meta = std::fs::symlink_metadata(&dir).ok()?;
    let uid = nix::unistd::geteuid().as_raw();
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return None;
    }
    let mut config = wasmtime::CacheConfig::new();
    config.with_directory(dir);
    wasmtime::Cache::new(config).ok()
}

struct P1Host {
    wasi: WasiP1Ctx,
    limits: StoreLimits,
}

struct P2Host {
    wasi: WasiCtx,
    table: ResourceTable,
    limits: StoreLimits,
}

impl WasiView for P2Host {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

fn wasi_builder<R, W, E>(
    stdin: R,
    stdout: W,
    stderr: E,
    preopens: &[Preopen],
) -> Result<WasiCtxBuilder, String>
where
    R: AsyncRead + Send + Sync + 'static,
    W: AsyncWrite + Send + Sync + 'static,
    E: AsyncWrite + Send + Sync + 'static,
{
    let mut builder = WasiCtxBuilder::new();
    builder
        .stdin(AsyncStdinStream::new(stdin))
        .stdout(AsyncStdoutStream::new(PIPE_BUDGET, stdout))
        .stderr(AsyncStdoutStream::new(PIPE_BUDGET, stderr))
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .arg("flow.wasm");
    for preopen in preopens {
        let perms = if preopen.writable {
            FsPerms::ReadWrite
        } else {
            FsPerms::ReadOnly
        };
        builder
            .preopened_dir(&preopen.host, &preopen.guest, perms)
            .map_err(|e| format!("cannot grant {}: {e}", preopen.guest))?;
    }
    Ok(builder)
}

fn limits() -> StoreLimits {
    StoreLimitsBuilder::new()
        .memory_size(WASM_MEMORY_LIMIT)
        .instances(16)
        .build()
}

/// Run a WASI command to completion and return its exit status. A core
/// module is run under WASI preview 1, a component under WASI preview 2.
pub async fn run<R, W, E>(launch: WasmLaunch, stdin: R, stdout: W, stderr: E) -> Result<i32, String>
where
    R: AsyncRead + Send + Sync + 'static,
    W: AsyncWrite + Send + Sync + 'static,
    E: AsyncWrite + Send + Sync + 'static,
{
    let engine = shared_engine(true)?;
    let builder = wasi_builder(stdin, stdout, stderr, &launch.preopens)?;
    let outcome = if is_component(&launch.bytes) {
        run_component(engine, builder, &launch.bytes).await
    } else {
        run_module(engine, builder, &launch.bytes).await
    };
    match outcome {
        Ok(()) => Ok(0),
        Err(error) => match error.downcast_ref::<wasmtime_wasi::I32Exit>() {
            Some(exit) => Ok(exit.0),
            None => Err(format!("the guest failed: {error:#}")),
        },
    }
}

async fn run_module(
    engine: &Engine,
    mut builder: WasiCtxBuilder,
    bytes: &[u8],
) -> wasmtime::Result<()> {
    let module = Module::new(engine, bytes)?;
    let mut linker: Linker<P1Host> = Linker::new(engine);
    wasmtime_wasi::p1::add_to_linker_async(&mut linker, |h| &mut h.wasi)?;
    let mut store = Store::new(
        engine,
        P1Host {
            wasi: builder.build_p1(),
            limits: limits(),
        },
    );
    store.limiter(|h| &mut h.limits);
    // Yield to the executor every tick: the deadline and cancellation are
    // enforced by dropping this future, which takes effect at the next yield.
    store.epoch_deadline_async_yield_and_update(1);
    let instance = linker.instantiate_async(&mut store, &module).await?;
    let start = instance.get_typed_func::<(), ()>(&mut store, "_start")?;
    start.call_async(&mut store, ()).await
}

async fn run_component(
    engine: &Engine,
    mut builder: WasiCtxBuilder,
    bytes: &[u8],
) -> wasmtime::Result<()> {
    let component = Component::new(engine, bytes)?;
    let mut linker: ComponentLinker<P2Host> = ComponentLinker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    let host = P2Host {
        wasi: builder.build(),
        table: ResourceTable::new(),
        limits: limits(),
    };
    let mut store = Store::new(engine, host);
    store.limiter(|h| &mut h.limits);
    // Yield to the executor every tick: the deadline and cancellation are
    // enforced by dropping this future, which takes effect at the next yield.
    store.epoch_deadline_async_yield_and_update(1);
    let command =
        wasmtime_wasi::p2::bindings::Command::instantiate_async(&mut store, &component, &linker)
            .await?;
    match command.wasi_cli_run().call_run(&mut store).await? {
        Ok(()) => Ok(()),
        Err(()) => Err(wasmtime_wasi::I32Exit(1).into()),
    }
}

/// A component's preamble carries layer 1; a core module's carries layer 0.
fn is_component(bytes: &[u8]) -> bool {
    bytes.len() >= 8 && bytes[..4] == *b"\0asm" && bytes[6..8] == [1, 0]
}
