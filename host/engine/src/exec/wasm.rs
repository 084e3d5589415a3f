//! The `flow.wasm` recipe: a WASI command run in-process by wasmtime.
//!
//! The guest gets the protocol pipes as stdin/stdout, a bounded stderr, its
//! scratch and attachments as preopened directories with their access modes,
//! no environment, no sockets, no name lookup, a memory ceiling, and epoch
//! yields. Dropping the returned task stops the guest at its next epoch
//! tick, which is how cancellation and the hard deadline take effect.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use wasmtime::component::{Component, Linker as ComponentLinker, ResourceTable};
use wasmtime::{Config, Engine, Linker, Module, Store, StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::cli::{AsyncStdinStream, AsyncStdoutStream};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

/// Memory ceiling of one guest, matching a Flow's ceiling in docs/src/containment.md.
pub(crate) const WASM_MEMORY_LIMIT: usize = 256 * 1024 * 1024;
/// How often the engine epoch advances; the granularity of deadlines.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(10);
/// Bytes a guest may have in flight to one output pipe.
const PIPE_BUDGET: usize = 1024 * 1024;

pub struct Preopen {
    pub host: PathBuf,
    pub guest: String,
    pub writable: bool,
}

pub struct WasmLaunch {
    /// The verified package; its Package/1 digest names the compiled code.
    pub package: Arc<flow::package::Package>,
    pub entrypoint: String,
    pub preopens: Vec<Preopen>,
}

/// The process-wide engine: one epoch ticker, compiled code shared. It
/// touches no cache itself: [`run`] looks compiled code up by the
/// package digest (see [`CompiledCache`]).
pub fn engine() -> Result<&'static Engine, String> {
    static ENGINE: OnceLock<Result<Engine, String>> = OnceLock::new();
    ENGINE
        .get_or_init(|| {
            let mut config = Config::new();
            config.epoch_interruption(true);
            config.wasm_component_model(true);
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
pub(crate) const MODULE_CACHE_DIR: &str = "wasm-modules";
/// Below it, one directory per engine compatibility (wasmtime version,
/// compiler, its flags, this engine's configuration, the CPU features).
const MODULES: &str = "compiled";
/// At most this many compiled modules are kept per engine: keeping one
/// more removes the oldest kept, so the cache does not grow with every
/// revision of every `flow.wasm` this user ever ran.
pub(crate) const MAX_COMPILED_MODULES: usize = 64;

/// Compiled `flow.wasm` code, one uncompressed file per package digest,
/// in `<jig cache>/wasm-modules/compiled/<engine>/<digest>`: a Run of a
/// package compiled before maps that file (one `mmap`, no decompression,
/// no copy) instead of compiling. wasmtime's own cache hashed the module
/// bytes again, decompressed a copy and rewrote a statistics file on
/// every Run. Mapped code is trusted, so only a directory of this user's
/// that nobody else can write (the route [`jig_verify::cache_dir`]
/// checks) is used, each level a real owner-private directory; a file is
/// written whole, synced and renamed into place, never changed after.
struct CompiledCache {
    dir: PathBuf,
}

impl CompiledCache {
    fn open(engine: &Engine) -> Option<CompiledCache> {
        use std::hash::{Hash, Hasher};
        let jig = jig_verify::cache_dir(true)?.parent()?.to_path_buf();
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let mut dir = jig.join(MODULE_CACHE_DIR);
        private_dir(&dir)?;
        for level in [MODULES.to_string(), format!("{:016x}", hasher.finish())] {
            dir.push(level);
            private_dir(&dir)?;
        }
        Some(CompiledCache { dir })
    }

    fn path(&self, digest: &str) -> PathBuf {
        self.dir
            .join(digest.strip_prefix("sha256:").unwrap_or(digest))
    }

    /// Keep `compiled` for the next Run; failing to is not the Run's error.
    fn keep(&self, digest: &str, compiled: &[u8]) {
        use std::io::Write;
        let Ok(mut temp) = tempfile::Builder::new()
            .prefix(".jig-module-")
            .tempfile_in(&self.dir)
        else {
            return;
        };
        if temp.write_all(compiled).is_ok() && temp.as_file().sync_all().is_ok() {
            let kept = self.path(digest);
            if temp.persist(&kept).is_ok() {
                // A Run that has a removed module mapped keeps its pages; it
                // is compiled again when it is next run.
                jig_verify::keep_newest(&self.dir, MAX_COMPILED_MODULES, &kept);
            }
        }
    }
}

/// `dir` as an owner-private directory of this user (made so if absent).
fn private_dir(dir: &Path) -> Option<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    if std::fs::symlink_metadata(dir).is_err() {
        std::fs::DirBuilder::new().mode(0o700).create(dir).ok()?;
    }
    let meta = std::fs::symlink_metadata(dir).ok()?;
    let uid = nix::unistd::geteuid().as_raw();
    (meta.is_dir() && meta.uid() == uid && meta.mode() & 0o077 == 0).then_some(())
}

/// The guest's compiled code: mapped from the cache when this package was
/// compiled by a compatible engine before, else compiled (and kept).
fn load<T>(
    engine: &Engine,
    digest: &str,
    bytes: &[u8],
    compile: impl Fn(&Engine, &[u8]) -> wasmtime::Result<T>,
    map: impl Fn(&Engine, &Path) -> wasmtime::Result<T>,
    serialize: impl Fn(&T) -> wasmtime::Result<Vec<u8>>,
) -> wasmtime::Result<T> {
    let Some(cache) = CompiledCache::open(engine) else {
        return compile(engine, bytes);
    };
    let path = cache.path(digest);
    if let Ok(compiled) = map(engine, &path) {
        return Ok(compiled);
    }
    let compiled = compile(engine, bytes)?;
    if let Ok(serialized) = serialize(&compiled) {
        cache.keep(digest, &serialized);
    }
    Ok(compiled)
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
    let engine = engine()?;
    let builder = wasi_builder(stdin, stdout, stderr, &launch.preopens)?;
    let Some(bytes) = launch.package.files().get(&launch.entrypoint) else {
        return Err(format!("the package has no {}", launch.entrypoint));
    };
    let digest = launch.package.digest();
    let outcome = if is_component(bytes) {
        run_component(engine, builder, digest, bytes).await
    } else {
        run_module(engine, builder, digest, bytes).await
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
    digest: &str,
    bytes: &[u8],
) -> wasmtime::Result<()> {
    let module = load(
        engine,
        digest,
        bytes,
        |e, b| Module::new(e, b),
        // SAFETY: the file is one this user's jig wrote whole from
        // `Module::serialize` into an owner-private directory and never
        // changes (see `CompiledCache`); wasmtime checks it was made by a
        // compatible engine.
        |e, p| unsafe { Module::deserialize_file(e, p) },
        Module::serialize,
    )?;
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
    digest: &str,
    bytes: &[u8],
) -> wasmtime::Result<()> {
    let component = load(
        engine,
        digest,
        bytes,
        |e, b| Component::new(e, b),
        // SAFETY: as for a module in `run_module`.
        |e, p| unsafe { Component::deserialize_file(e, p) },
        Component::serialize,
    )?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A cache holding `n` modules, the oldest first.
    fn cache_with(n: usize) -> (tempfile::TempDir, CompiledCache) {
        let dir = tempfile::tempdir().unwrap();
        let cache = CompiledCache {
            dir: dir.path().to_path_buf(),
        };
        let start = std::time::SystemTime::now() - Duration::from_secs(10_000);
        for i in 0..n {
            let path = cache.path(&format!("sha256:{i:064}"));
            std::fs::write(&path, b"code").unwrap();
            let file = std::fs::File::options().write(true).open(&path).unwrap();
            file.set_modified(start + Duration::from_secs(i as u64))
                .unwrap();
        }
        (dir, cache)
    }

    fn count(dir: &Path) -> usize {
        std::fs::read_dir(dir).unwrap().count()
    }

    #[test]
    fn the_compiled_module_cache_keeps_at_most_its_bound() {
        // Up to the bound, keeping one more removes nothing.
        let (dir, cache) = cache_with(MAX_COMPILED_MODULES - 1);
        cache.keep("sha256:new", b"code");
        assert_eq!(count(dir.path()), MAX_COMPILED_MODULES);
        // One past it: the oldest goes, the one just kept stays.
        let (dir, cache) = cache_with(MAX_COMPILED_MODULES);
        cache.keep("sha256:new", b"code");
        assert_eq!(count(dir.path()), MAX_COMPILED_MODULES);
        assert!(!cache.path(&format!("sha256:{:064}", 0)).exists());
        assert!(cache.path(&format!("sha256:{:064}", 1)).exists());
        assert!(cache.path("sha256:new").exists());
    }
}
