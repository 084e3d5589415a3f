//! `flow-wasm-run [--cache DIR] MODULE.wasm`
//!
//! Runs a `wasm32-wasip1` command module under wasmtime with this process's
//! stdin, stdout and stderr, no preopened directories, no environment and
//! no arguments beyond the module name, and exits with the guest's status.
//! With it the conformance runner drives an SDK component built for WASM
//! exactly as it drives a native one:
//! `flow-conformance component -- flow-wasm-run standard.wasm`.
//!
//! `--cache DIR` keeps compiled code in DIR (wasmtime's own cache), so a
//! corpus that starts the module dozens of times compiles it once.

use std::path::PathBuf;
use std::process::ExitCode;

use wasmtime::{Cache, CacheConfig, Config, Engine, Linker, Module, Store};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::{I32Exit, WasiCtxBuilder};

/// Status for a usage error or a module that cannot be loaded.
const EXIT_USAGE: u8 = 2;
/// Status when the guest traps (for example a panic, which aborts on wasm).
const EXIT_TRAP: u8 = 101;
const USAGE: &str = "usage: flow-wasm-run [--cache DIR] MODULE.wasm";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut cache = None;
    let mut module = None;
    while let Some(arg) = args.next() {
        match (arg.as_str(), &module) {
            ("--cache", None) => cache = args.next().map(PathBuf::from),
            (_, None) if !arg.starts_with('-') => module = Some(arg),
            _ => {
                eprintln!("{USAGE}");
                return ExitCode::from(EXIT_USAGE);
            }
        }
    }
    let Some(path) = module else {
        eprintln!("{USAGE}");
        return ExitCode::from(EXIT_USAGE);
    };
    match run(&path, cache) {
        Ok(status) => ExitCode::from(status),
        Err(Failure::Load(e)) => {
            eprintln!("flow-wasm-run: {path}: {e}");
            ExitCode::from(EXIT_USAGE)
        }
        Err(Failure::Trap(e)) => {
            eprintln!("flow-wasm-run: {path} trapped: {e:?}");
            ExitCode::from(EXIT_TRAP)
        }
    }
}

enum Failure {
    Load(wasmtime::Error),
    Trap(wasmtime::Error),
}

fn run(path: &str, cache: Option<PathBuf>) -> Result<u8, Failure> {
    let mut config = Config::new();
    if let Some(dir) = cache {
        let mut cache = CacheConfig::new();
        cache.with_directory(dir);
        config.cache(Some(Cache::new(cache).map_err(Failure::Load)?));
    }
    let engine = Engine::new(&config).map_err(Failure::Load)?;
    let module = Module::from_file(&engine, path).map_err(Failure::Load)?;
    let mut linker: Linker<WasiP1Ctx> = Linker::new(&engine);
    wasmtime_wasi::p1::add_to_linker_sync(&mut linker, |cx| cx).map_err(Failure::Load)?;
    let wasi = WasiCtxBuilder::new()
        .inherit_stdin()
        .inherit_stdout()
        .inherit_stderr()
        .arg(path)
        .build_p1();
    let mut store = Store::new(&engine, wasi);
    let instance = linker
        .instantiate(&mut store, &module)
        .map_err(Failure::Load)?;
    let start = instance
        .get_typed_func::<(), ()>(&mut store, "_start")
        .map_err(Failure::Load)?;
    match start.call(&mut store, ()) {
        Ok(()) => Ok(0),
        Err(e) => match e.downcast_ref::<I32Exit>() {
            // WASI exit statuses are 0..=255 on every host we run on.
            Some(I32Exit(code)) => Ok(u8::try_from(*code).unwrap_or(1)),
            None => Err(Failure::Trap(e)),
        },
    }
}
