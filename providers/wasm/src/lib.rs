//! Loads capability providers built as WASM components exporting the
//! `jig:provider` world (`providers/wit/provider.wit`) and calls them.
//!
//! Each provider is compiled once into an [`InstancePre`]; every call gets a
//! fresh store and instance from the shared pooling allocator, a memory
//! ceiling, and an epoch deadline taken from the Run's deadline. The guest
//! gets a WASI context with nothing granted: no filesystem, no network, no
//! environment, no arguments, closed stdin, and stdout/stderr discarded.
//! Epoch interruption stops guest code, not a host call the guest is
//! blocked in (a WASI clock wait); the host's deadline around
//! [`Provider::call`] covers that case. The imported `channels` interface
//! reaches the call's [`ChannelPorts`], whose blocking operations observe
//! the deadline and cancellation themselves.
//!
//! An operator may grant a provider more in its declaration (`grants`,
//! [`jig_provider_api::grants`]): outbound HTTP through wasmtime's
//! `wasi:http`, linked only then and checked against an origin allowlist
//! on every request; a private directory preopened at `/data`; and other
//! memory, per-call time and concurrency limits.
//!
//! This crate must never grant a guest more than that, and never let a
//! guest failure (trap, exhaustion, garbage output) escape as anything but a
//! [`CallError`].
//!
//! [`InstancePre`]: wasmtime::component::InstancePre

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use jig_provider_api::dispatch::{self, Admitted, ContractSet};
use jig_provider_api::grants::{self, DATA_DIR_GUEST};
use jig_provider_api::{
    CallContext, CallError, ChannelPorts, CheckedGrants, LoadError, Origin, PortDirection,
    Provider, ProviderDecl, ProviderKind, ServedContract,
};
use serde_json::Value;
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, Trap};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks, WasiHttpView};

mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "capability-provider",
    });
}

use bindings::exports::jig::provider::provider as wit;
use bindings::jig::provider::channels as wit_channels;
use bindings::{CapabilityProvider, CapabilityProviderPre};

/// Default ceiling on each linear memory of one call's instance
/// (`grants.limits.memory` sets another, up to
/// [`grants::MAX_MEMORY_BYTES`]).
pub const MEMORY_CEILING_BYTES: usize = grants::DEFAULT_MEMORY_BYTES as usize;
/// Ceiling on the elements of each table of one call's instance.
pub const TABLE_CEILING_ELEMENTS: usize = 100_000;
/// How many provider calls may hold an instance at the same time, across
/// all WASM providers of this process. A call beyond it is refused with
/// `RESOURCE_EXHAUSTED` rather than queued.
pub const MAX_CONCURRENT_INSTANCES: u32 = grants::MAX_CONCURRENCY;
/// Period of the epoch ticker; deadlines are enforced to this granularity.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);
/// Time a provider gets to answer `contracts` at load time.
pub const LOAD_DEADLINE: Duration = Duration::from_secs(10);

/// A loaded WASM component provider.
pub struct WasmProvider {
    name: String,
    contracts: ContractSet,
    pre: CapabilityProviderPre<GuestState>,
    settings: String,
    secrets: Vec<wit::Secret>,
    artifact_digest: String,
    grants: CheckedGrants,
    /// Calls of this provider in flight, at most `grants.concurrency`.
    in_flight: Slots,
}

impl WasmProvider {
    /// Reads, compiles and pre-links the component named by `decl`, reads
    /// its secrets, and asks it which contracts it serves.
    pub fn load(decl: &ProviderDecl) -> Result<Arc<dyn Provider>, LoadError> {
        WasmProvider::load_concrete(decl).map(|p| Arc::new(p) as Arc<dyn Provider>)
    }

    fn load_concrete(decl: &ProviderDecl) -> Result<WasmProvider, LoadError> {
        let path = decl.artifact(ProviderKind::Wasm)?;
        let config = decl.config()?;
        let failed = |reason: String| LoadError::LoadFailed {
            provider: decl.name.clone(),
            path: path.to_owned(),
            reason,
        };
        let engine = engine().map_err(|e| failed(e.clone()))?;
        let grants = decl
            .grants
            .check()
            .map_err(|reason| LoadError::ConfigInvalid {
                provider: decl.name.clone(),
                reason,
            })?;
        if let Some(dir) = &grants.directory {
            private_directory(dir).map_err(|reason| LoadError::ConfigInvalid {
                provider: decl.name.clone(),
                reason: format!("grants.directory {}: {reason}", dir.display()),
            })?;
        }
        let bytes = std::fs::read(path).map_err(|e| failed(e.to_string()))?;
        let artifact_digest = jig_provider_api::artifact_digest(&bytes);
        let component = compile(engine, &bytes, &artifact_digest).map_err(failed)?;
        let mut linker = Linker::new(engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(|e| failed(e.to_string()))?;
        if grants.http.is_some() {
            wasmtime_wasi_http::p2::add_only_http_to_linker_sync(&mut linker)
                .map_err(|e| failed(e.to_string()))?;
        } else if let Some(import) = component
            .component_type()
            .imports(engine)
            .map(|(name, _)| name)
            .find(|name| name.starts_with("wasi:http/"))
        {
            return Err(failed(format!(
                "it imports {import} but its declaration grants no outbound HTTP (grants.http)"
            )));
        }
        CapabilityProvider::add_to_linker::<_, HasSelf<GuestState>>(&mut linker, |s| s)
            .map_err(|e| failed(e.to_string()))?;
        let pre = linker
            .instantiate_pre(&component)
            .map_err(|e| failed(format!("imports cannot be satisfied: {e}")))?;
        let pre = CapabilityProviderPre::new(pre)
            .map_err(|e| failed(format!("does not export jig:provider/provider@0.1.0: {e}")))?;

        let deadline = dispatch::now_unix_ms() + LOAD_DEADLINE.as_millis() as u64;
        let mut store = new_store(
            engine,
            deadline,
            Arc::new(jig_provider_api::NoPorts),
            &grants,
        )
        .map_err(|e| failed(e.to_string()))?;
        let descriptors = pre
            .instantiate(&mut store)
            .and_then(|instance| instance.jig_provider_provider().call_contracts(&mut store))
            .map_err(|e| failed(format!("contracts failed: {e}")))?;
        let contracts =
            ContractSet::from_descriptors(&decl.name, descriptors.iter().map(|d| d.as_bytes()))?;

        Ok(WasmProvider {
            name: decl.name.clone(),
            contracts,
            pre,
            artifact_digest,
            in_flight: Slots::new(grants.concurrency),
            grants,
            settings: config.settings_text(),
            secrets: config
                .secrets
                .iter()
                .map(|(name, value)| wit::Secret {
                    name: name.to_owned(),
                    value: value.to_owned(),
                })
                .collect(),
        })
    }

    fn run(
        &self,
        admitted: &Admitted<'_>,
        ctx: &CallContext,
        method: &str,
        input: &Value,
        ports: Arc<dyn ChannelPorts>,
    ) -> Result<Value, CallError> {
        let engine = self.pre.engine();
        let granted = ports
            .ports()
            .iter()
            .map(|p| wit::GrantedPort {
                name: p.name.clone(),
                direction: match p.direction {
                    PortDirection::Send => wit::PortDirection::Send,
                    PortDirection::Receive => wit::PortDirection::Receive,
                },
            })
            .collect();
        let deadline = call_deadline(
            ctx.deadline_unix_ms,
            dispatch::now_unix_ms(),
            self.grants.call_timeout,
        );
        let _slot = self.in_flight.acquire(&self.name)?;
        let mut store = new_store(engine, deadline, ports, &self.grants).map_err(|e| {
            CallError::operational("EXECUTION_FAILED", format!("provider store: {e}"))
        })?;
        let outcome = self.pre.instantiate(&mut store).and_then(|instance| {
            let call_ctx = wit::CallContext {
                contract_id: ctx.contract.id.clone(),
                contract_version: ctx.contract.version.clone(),
                contract_digest: ctx.contract.digest.clone(),
                operation_id: ctx.operation_id.clone(),
                deadline_unix_ms: deadline,
                ports: granted,
            };
            let config = wit::ProviderConfig {
                settings: self.settings.clone(),
                secrets: self.secrets.clone(),
            };
            instance.jig_provider_provider().call_call(
                &mut store,
                &call_ctx,
                method,
                &input.to_string(),
                &config,
            )
        });
        match outcome {
            Ok(Ok(value)) => admitted.output(dispatch::json(value.as_bytes())?),
            Ok(Err(wit::CallError::Application(e))) => {
                let data = dispatch::json(e.data.as_bytes())?;
                Err(admitted.application(&e.name, data))
            }
            Ok(Err(wit::CallError::Operational(e))) => {
                let details = e
                    .details
                    .map(|d| dispatch::json(d.as_bytes()))
                    .transpose()?;
                Err(admitted.operational(&e.code, e.message, details))
            }
            Err(error) => Err(classify_failure(&error, &store.data().ceiling)),
        }
    }
}

impl Provider for WasmProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn contracts(&self) -> &[ServedContract] {
        self.contracts.served()
    }

    fn call(
        &self,
        ctx: &CallContext,
        method: &str,
        input: &Value,
        ports: Arc<dyn ChannelPorts>,
    ) -> Result<Value, CallError> {
        let admitted = self.contracts.admit(ctx, method, input)?;
        self.run(&admitted, ctx, method, input, ports)
    }

    fn artifact_digest(&self) -> Option<&str> {
        Some(&self.artifact_digest)
    }
}

/// The world this loader links a provider against.
pub const WORLD: &str = "jig:provider/capability-provider@0.1.0";

/// What a component file declares, read without instantiating it: the
/// interfaces it imports (what it asks the host for) and those it exports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComponentShape {
    pub imports: Vec<String>,
    pub exports: Vec<String>,
}

/// Compiles `bytes` as a component and lists its imports and exports,
/// sorted; runs no guest code.
pub fn component_shape(bytes: &[u8]) -> Result<ComponentShape, String> {
    let engine = engine().map_err(Clone::clone)?;
    let component = compile(engine, bytes, &jig_provider_api::artifact_digest(bytes))?;
    let ty = component.component_type();
    let mut imports: Vec<String> = ty.imports(engine).map(|(n, _)| n.to_owned()).collect();
    let mut exports: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_owned()).collect();
    imports.sort();
    exports.sort();
    Ok(ComponentShape { imports, exports })
}

/// Overrides where compiled components are kept between processes; empty
/// turns the cache off. Default: `$XDG_CACHE_HOME/jig/wasm`, else
/// `$HOME/.cache/jig/wasm`.
pub const CACHE_DIR_VARIABLE: &str = "JIG_WASM_CACHE_DIR";

fn cache_dir() -> Option<std::path::PathBuf> {
    use std::path::PathBuf;
    if let Some(dir) = std::env::var_os(CACHE_DIR_VARIABLE) {
        return (!dir.is_empty()).then(|| PathBuf::from(dir));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("jig/wasm"))
}

/// Compiles a component, or loads the machine code this host compiled
/// for the same bytes before. A component built by componentize-py or jco
/// carries a whole interpreter (10–20 MB) and takes a debug host tens of
/// seconds to compile; every `jig` process would otherwise pay that again.
/// The entry is named by the artifact digest and the engine's
/// compatibility hash, so changed bytes or another wasmtime never match.
fn compile(engine: &Engine, bytes: &[u8], digest: &str) -> Result<Component, String> {
    use std::hash::{Hash, Hasher};
    let fresh = || Component::new(engine, bytes).map_err(|e| format!("not a component: {e}"));
    let Some(dir) = cache_dir() else {
        return fresh();
    };
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    let entry = dir.join(format!("{hex}-{:016x}.cwasm", hasher.finish()));
    if entry.is_file() {
        // SAFETY: the entry is machine code this host serialized for these
        // exact bytes into the user's own cache directory (created 0700);
        // whoever can write there can already run code as this user.
        // wasmtime still checks the entry's engine compatibility.
        if let Ok(component) = unsafe { Component::deserialize_file(engine, &entry) } {
            return Ok(component);
        }
    }
    let component = fresh()?;
    // A cache that cannot be written only costs the next process a compile.
    if let Ok(serialized) = component.serialize() {
        let _ = store_entry(&dir, &entry, &serialized);
    }
    Ok(component)
}

fn store_entry(
    dir: &std::path::Path,
    entry: &std::path::Path,
    bytes: &[u8],
) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    // Written aside and renamed, so a reader never sees half an entry.
    let partial = entry.with_extension(format!("partial-{}", std::process::id()));
    std::fs::write(&partial, bytes)?;
    std::fs::rename(&partial, entry)
}

/// Maps a failed instantiation or call to the Run/1 code a caller sees.
fn classify_failure(error: &wasmtime::Error, ceiling: &Ceiling) -> CallError {
    if error.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
        return dispatch::deadline_exceeded();
    }
    if ceiling.hit {
        return CallError::operational(
            "RESOURCE_EXHAUSTED",
            format!(
                "provider exceeded its memory ceiling of {} bytes",
                ceiling.memory_bytes
            ),
        );
    }
    if error
        .downcast_ref::<wasmtime::PoolConcurrencyLimitError>()
        .is_some()
    {
        return CallError::operational(
            "RESOURCE_EXHAUSTED",
            format!("more than {MAX_CONCURRENT_INSTANCES} provider calls in flight"),
        );
    }
    match error.downcast_ref::<Trap>() {
        Some(trap) => {
            CallError::operational("EXECUTION_FAILED", format!("provider trapped: {trap}"))
        }
        None => CallError::operational("EXECUTION_FAILED", format!("provider failed: {error}")),
    }
}

/// How many WASM provider calls hold an instance right now, across all
/// providers of this process (at most [`MAX_CONCURRENT_INSTANCES`]).
pub fn instances_in_flight() -> u64 {
    match ENGINE.get() {
        Some(Ok(engine)) => engine
            .pooling_allocator_metrics()
            .map_or(0, |m| m.component_instances()),
        _ => 0,
    }
}

static ENGINE: OnceLock<Result<Engine, String>> = OnceLock::new();

/// The process-wide engine: one pooling allocator shared by every WASM
/// provider, and one ticker thread advancing its epoch.
fn engine() -> Result<&'static Engine, &'static String> {
    ENGINE
        .get_or_init(|| {
            let mut pool = PoolingAllocationConfig::default();
            pool.total_component_instances(MAX_CONCURRENT_INSTANCES)
                .total_core_instances(MAX_CONCURRENT_INSTANCES * 8)
                .total_memories(MAX_CONCURRENT_INSTANCES * 2)
                .total_tables(MAX_CONCURRENT_INSTANCES * 8)
                .max_memory_size(grants::MAX_MEMORY_BYTES as usize);
            let mut config = Config::new();
            config
                .wasm_component_model(true)
                .epoch_interruption(true)
                .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
            let engine = Engine::new(&config).map_err(|e| format!("wasmtime engine: {e}"))?;
            let ticker = engine.clone();
            std::thread::Builder::new()
                .name("jig-wasm-epoch".to_owned())
                .spawn(move || loop {
                    std::thread::sleep(EPOCH_TICK);
                    ticker.increment_epoch();
                })
                .map_err(|e| format!("epoch ticker: {e}"))?;
            Ok(engine)
        })
        .as_ref()
}

/// Per-call guest state: a WASI context with the granted directory only,
/// the `wasi:http` state (reachable only when linked), the resource
/// ceiling, and the call's channel ports.
struct GuestState {
    wasi: WasiCtx,
    table: ResourceTable,
    http: WasiHttpCtx,
    allowlist: Allowlist,
    ceiling: Ceiling,
    ports: Arc<dyn ChannelPorts>,
}

/// The `channels` import: JSON text in and out, checked with the strict
/// JSON/1 parser before it reaches a channel.
impl wit_channels::Host for GuestState {
    fn send(&mut self, port: String, value: String) -> Result<(), wit_channels::ChannelFailure> {
        let item = dispatch::json(value.as_bytes()).map_err(|e| wit_channels::ChannelFailure {
            code: "INVALID_INPUT".to_owned(),
            message: format!("the item is not JSON/1: {e}"),
        })?;
        self.ports.send(&port, item).map_err(failure)
    }

    fn next(
        &mut self,
        port: String,
    ) -> Result<Option<wit_channels::Item>, wit_channels::ChannelFailure> {
        let item = self.ports.next(&port).map_err(failure)?;
        Ok(item.map(|item| wit_channels::Item {
            sequence: item.sequence,
            value: item.value.to_string(),
        }))
    }

    fn close(&mut self, port: String) -> Result<(), wit_channels::ChannelFailure> {
        self.ports.close(&port).map_err(failure)
    }
}

/// A channel failure as the guest sees it; an application error cannot
/// come from a channel, so it is reported as `EXECUTION_FAILED`.
fn failure(error: CallError) -> wit_channels::ChannelFailure {
    match error {
        CallError::Operational { code, message, .. } => {
            wit_channels::ChannelFailure { code, message }
        }
        CallError::Application { name, .. } => wit_channels::ChannelFailure {
            code: "EXECUTION_FAILED".to_owned(),
            message: format!("channel failed with {name}"),
        },
    }
}

impl WasiView for GuestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for GuestState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.allowlist,
        }
    }
}

/// The `wasi:http` send hook: a request goes out only to an origin of the
/// operator's allowlist, and waits no longer than the call's deadline.
/// Redirects are the guest's to follow, so each hop comes through here.
struct Allowlist {
    origins: Arc<[Origin]>,
    deadline_unix_ms: u64,
}

impl Allowlist {
    fn allows(&self, uri: &http::Uri) -> bool {
        let scheme = uri.scheme_str().unwrap_or_default();
        let port = uri.port_u16().or(match scheme {
            "http" => Some(80),
            "https" => Some(443),
            _ => None,
        });
        match (uri.host(), port) {
            (Some(host), Some(port)) => {
                Origin::new(scheme, host, port).is_some_and(|o| self.origins.contains(&o))
            }
            _ => false,
        }
    }
}

type SendFuture = Box<
    dyn std::future::Future<
            Output = wasmtime_wasi_http::Result<(
                http::Response<wasmtime_wasi_http::WasiBody>,
                Box<dyn std::future::Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
            )>,
        > + Send,
>;

impl WasiHttpHooks for Allowlist {
    fn send_request(
        &mut self,
        request: http::Request<wasmtime_wasi_http::WasiBody>,
        options: Option<wasmtime_wasi_http::RequestOptions>,
        _response_done: Box<
            dyn std::future::Future<Output = wasmtime_wasi_http::Result<()>> + Send,
        >,
    ) -> SendFuture {
        if !self.allows(request.uri()) {
            return Box::new(async { Err(wasmtime_wasi_http::Error::HttpRequestDenied) });
        }
        let left = Duration::from_millis(
            self.deadline_unix_ms
                .saturating_sub(dispatch::now_unix_ms())
                .max(1),
        );
        let bound = |asked: Option<Duration>| Some(asked.map_or(left, |a| a.min(left)));
        let options = options.unwrap_or_default();
        let options = wasmtime_wasi_http::RequestOptions {
            connect_timeout: bound(options.connect_timeout),
            first_byte_timeout: bound(options.first_byte_timeout),
            between_bytes_timeout: bound(options.between_bytes_timeout),
        };
        Box::new(async move {
            let (response, io) =
                wasmtime_wasi_http::default_send_request(request, Some(options)).await?;
            Ok((
                response.map(http_body_util::BodyExt::boxed_unsync),
                Box::new(io) as Box<dyn std::future::Future<Output = _> + Send>,
            ))
        })
    }
}

/// Refuses growth past the ceilings and remembers that it did, so a trap
/// that follows can be reported as exhaustion rather than a crash.
struct Ceiling {
    memory_bytes: usize,
    hit: bool,
}

impl Default for Ceiling {
    fn default() -> Ceiling {
        Ceiling {
            memory_bytes: MEMORY_CEILING_BYTES,
            hit: false,
        }
    }
}

impl wasmtime::ResourceLimiter for Ceiling {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = desired <= self.memory_bytes;
        self.hit |= !allowed;
        Ok(allowed)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = desired <= TABLE_CEILING_ELEMENTS;
        self.hit |= !allowed;
        Ok(allowed)
    }
}

/// A store with nothing granted but `ports`, `grants`, the ceilings, and
/// an epoch deadline at `deadline_unix_ms` (rounded up to the next tick).
fn new_store(
    engine: &Engine,
    deadline_unix_ms: u64,
    ports: Arc<dyn ChannelPorts>,
    grants: &CheckedGrants,
) -> wasmtime::Result<Store<GuestState>> {
    let mut wasi = WasiCtx::builder();
    wasi.allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    if let Some(dir) = &grants.directory {
        wasi.preopened_dir(dir, DATA_DIR_GUEST, FsPerms::ReadWrite)?;
    }
    let mut store = Store::new(
        engine,
        GuestState {
            wasi: wasi.build(),
            table: ResourceTable::new(),
            http: WasiHttpCtx::new(),
            allowlist: Allowlist {
                origins: grants.http.clone().unwrap_or_default().into(),
                deadline_unix_ms,
            },
            ceiling: Ceiling {
                memory_bytes: grants.memory_bytes as usize,
                hit: false,
            },
            ports,
        },
    );
    store.limiter(|state| &mut state.ceiling);
    store.set_epoch_deadline(epoch_ticks_until(deadline_unix_ms, dispatch::now_unix_ms()));
    Ok(store)
}

/// The deadline of one call: the Run's, or sooner when the operator set a
/// per-call timeout.
fn call_deadline(run_deadline_unix_ms: u64, now_unix_ms: u64, timeout: Option<Duration>) -> u64 {
    match timeout {
        None => run_deadline_unix_ms,
        Some(t) => run_deadline_unix_ms.min(now_unix_ms.saturating_add(t.as_millis() as u64)),
    }
}

/// Makes the granted directory if it is missing (mode 0700) and refuses
/// one that is not a directory owned by this user and private to it.
fn private_directory(dir: &std::path::Path) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot be created: {e}"))?;
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|e| e.to_string())?;
    if !meta.is_dir() {
        return Err("is not a directory".to_owned());
    }
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err("is not owned by the user running jig".to_owned());
    }
    if meta.permissions().mode() & 0o077 != 0 {
        return Err("is reachable by other users (make it mode 0700)".to_owned());
    }
    Ok(())
}

/// A counting semaphore on one provider's calls. A call past the limit is
/// refused with `RESOURCE_EXHAUSTED` rather than queued, as the
/// process-wide pool refuses one: the caller owns retry policy.
struct Slots {
    limit: u32,
    taken: Mutex<u32>,
}

struct Slot<'a>(&'a Slots);

impl Slots {
    fn new(limit: u32) -> Slots {
        Slots {
            limit,
            taken: Mutex::new(0),
        }
    }

    fn acquire(&self, provider: &str) -> Result<Slot<'_>, CallError> {
        let mut taken = self.taken.lock().unwrap_or_else(|e| e.into_inner());
        if *taken >= self.limit {
            return Err(CallError::operational(
                "RESOURCE_EXHAUSTED",
                format!(
                    "more than {} calls of provider {provider:?} in flight (grants.limits.concurrency)",
                    self.limit
                ),
            ));
        }
        *taken += 1;
        Ok(Slot(self))
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        *self.0.taken.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
    }
}

/// Epoch ticks from `now` until `deadline`: at least one, rounded up, plus
/// one because the first tick may land immediately after the store starts.
fn epoch_ticks_until(deadline_unix_ms: u64, now_unix_ms: u64) -> u64 {
    let tick_ms = EPOCH_TICK.as_millis() as u64;
    deadline_unix_ms
        .saturating_sub(now_unix_ms)
        .div_ceil(tick_ms)
        .max(1)
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_ticks_round_up_and_never_reach_zero() {
        assert_eq!(epoch_ticks_until(1_000, 1_000), 2);
        assert_eq!(epoch_ticks_until(1_001, 1_000), 2);
        assert_eq!(epoch_ticks_until(1_000 + 5, 1_000), 2);
        assert_eq!(epoch_ticks_until(1_000 + 6, 1_000), 3);
        assert_eq!(epoch_ticks_until(0, 1_000), 2);
    }

    #[test]
    fn a_providers_slots_allow_the_limit_and_refuse_one_past() {
        let slots = Slots::new(2);
        let first = slots.acquire("p").unwrap();
        let _second = slots.acquire("p").unwrap();
        let Err(refused) = slots.acquire("p") else {
            panic!("a third call got a slot");
        };
        assert_eq!(refused.code(), Some("RESOURCE_EXHAUSTED"));
        drop(first);
        assert!(slots.acquire("p").is_ok());
    }

    #[test]
    fn a_call_timeout_only_ever_brings_the_deadline_closer() {
        let second = Some(Duration::from_secs(1));
        assert_eq!(call_deadline(10_000, 1_000, None), 10_000);
        assert_eq!(call_deadline(10_000, 1_000, second), 2_000);
        assert_eq!(call_deadline(1_500, 1_000, second), 1_500);
    }

    #[test]
    fn the_allowlist_matches_scheme_host_and_port_exactly() {
        let allow = Allowlist {
            origins: vec![
                Origin::parse("http://127.0.0.1:8080").unwrap(),
                Origin::parse("https://api.example.com").unwrap(),
            ]
            .into(),
            deadline_unix_ms: 0,
        };
        let uri = |text: &str| text.parse::<http::Uri>().unwrap();
        assert!(allow.allows(&uri("http://127.0.0.1:8080/x")));
        assert!(allow.allows(&uri("https://API.example.com/v1?q")));
        assert!(allow.allows(&uri("https://api.example.com:443/")));
        assert!(!allow.allows(&uri("http://127.0.0.1:8081/x")));
        assert!(!allow.allows(&uri("https://127.0.0.1:8080/x")));
        assert!(!allow.allows(&uri("http://api.example.com/")));
        assert!(!allow.allows(&uri("https://api.example.com.evil.test/")));
    }

    #[test]
    fn ceiling_allows_the_limit_and_refuses_one_past() {
        use wasmtime::ResourceLimiter;
        let mut ceiling = Ceiling::default();
        assert!(ceiling
            .memory_growing(0, MEMORY_CEILING_BYTES, None)
            .unwrap());
        assert!(!ceiling.hit);
        assert!(!ceiling
            .memory_growing(0, MEMORY_CEILING_BYTES + 1, None)
            .unwrap());
        assert!(ceiling.hit);
        let mut ceiling = Ceiling::default();
        assert!(ceiling
            .table_growing(0, TABLE_CEILING_ELEMENTS, None)
            .unwrap());
        assert!(!ceiling
            .table_growing(0, TABLE_CEILING_ELEMENTS + 1, None)
            .unwrap());
        assert!(ceiling.hit);
    }
}
