//! One kv `get` three ways: through a WASM component (fresh instance per
//! call), through the native C ABI, and as a direct Rust function call.
//!
//! `cargo bench -p jig-provider-wasm --bench get` (builds the release guests
//! into target/guests first).

#[path = "../../examples/artifacts.rs"]
#[allow(dead_code)]
mod artifacts;

use std::sync::{Arc, LazyLock};

use jig_provider_api::dispatch::now_unix_ms;
use jig_provider_api::{
    CallContext, ChannelPorts, ContractIdentity, NoPorts, Provider, ProviderDecl, ProviderKind,
};
use jig_provider_sdk::Provider as _;
use serde_json::{json, Value};

fn main() {
    divan::main();
}

fn settings() -> Value {
    json!({"entries": {"greeting": "hello"}})
}

fn decl(kind: ProviderKind, path: std::path::PathBuf) -> ProviderDecl {
    ProviderDecl {
        name: "kv".to_owned(),
        kind,
        path: Some(path),
        settings: settings(),
        secrets: Default::default(),
        grants: Default::default(),
    }
}

static WASM: LazyLock<Arc<dyn Provider>> = LazyLock::new(|| {
    let path = artifacts::wasm("kv-provider", artifacts::Profile::Release);
    jig_provider_wasm::WasmProvider::load(&decl(ProviderKind::Wasm, path)).unwrap()
});

static NATIVE: LazyLock<Arc<dyn Provider>> = LazyLock::new(|| {
    let path = artifacts::native("kv-provider", artifacts::Profile::Release);
    jig_provider_native::NativeProvider::load(&decl(ProviderKind::Native, path)).unwrap()
});

fn no_ports() -> Arc<dyn ChannelPorts> {
    Arc::new(NoPorts)
}

fn ctx(identity: &ContractIdentity) -> CallContext {
    CallContext {
        contract: identity.clone(),
        operation_id: "op:1".to_owned(),
        deadline_unix_ms: now_unix_ms() + 3_600_000,
    }
}

fn bench_provider(bencher: divan::Bencher, provider: &dyn Provider) {
    let ctx = ctx(&provider.contracts()[0].identity);
    let input = json!({"key": "greeting"});
    assert_eq!(
        provider.call(&ctx, "get", &input, no_ports()).unwrap(),
        json!("hello")
    );
    bencher.bench(|| provider.call(&ctx, "get", divan::black_box(&input), no_ports()));
}

#[divan::bench]
fn wasm_component(bencher: divan::Bencher) {
    bench_provider(bencher, &**WASM);
}

#[divan::bench]
fn native_library(bencher: divan::Bencher) {
    bench_provider(bencher, &**NATIVE);
}

#[divan::bench]
fn direct_rust_call(bencher: divan::Bencher) {
    let ctx = jig_provider_sdk::Context {
        contract_id: "https://example.org/contracts/kv".to_owned(),
        contract_version: "1.0.0".to_owned(),
        contract_digest: String::new(),
        operation_id: "op:1".to_owned(),
        deadline_unix_ms: u64::MAX,
    };
    let config = jig_provider_sdk::Config {
        settings: settings(),
        secrets: Default::default(),
    };
    let input = json!({"key": "greeting"});
    bencher.bench(|| {
        kv_provider::Kv::call(
            &ctx,
            "get",
            divan::black_box(input.clone()),
            &config,
            &jig_provider_sdk::Channels::none(),
        )
    });
}
