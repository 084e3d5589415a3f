//! Guest-side helpers for writing a `jig` capability provider in Rust.
//!
//! A provider author implements [`Provider`] once and invokes
//! [`export_provider!`]; [`typed_methods!`] maps method names to functions
//! over serde types ([`typed`]). Compiled for `wasm32-wasip2` the macro exports the
//! `jig:provider/provider` interface of `providers/wit/provider.wit` (a
//! component); compiled natively as a `cdylib` it exports the
//! `jig_provider_*` C ABI described in [`native`].
//!
//! This crate owns only the guest side of the two boundaries. It must never
//! decide policy the host owns (contract validation, deadlines, schema
//! checks), and on the native side it must never let a panic unwind into
//! the host.

use std::collections::BTreeMap;

pub use serde;
pub use serde_json::{self, Value};

// The ABI's constants and host table are one file shared with the host
// loader (jig-provider-native), so guest and host cannot disagree on them.
#[path = "../../native/src/abi.rs"]
mod abi;
mod channels;
#[cfg(target_arch = "wasm32")]
mod component_link;
mod host_table;
pub mod native;
mod port;
pub mod typed;
#[cfg(target_arch = "wasm32")]
pub mod wasm;
#[cfg(target_arch = "wasm32")]
#[doc(hidden)]
pub mod wit;

pub use channels::Channels;
pub use port::{Direction, Item, Port};

/// What the host says about one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Context {
    /// The exact contract the caller's slot is bound to.
    pub contract_id: String,
    pub contract_version: String,
    pub contract_digest: String,
    /// The Run-scoped operation identity; usable as an idempotency key.
    pub operation_id: String,
    /// The Run's deadline, Unix milliseconds.
    pub deadline_unix_ms: u64,
}

/// The operator's configuration for this provider, delivered with every call.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Config {
    /// The provider's settings object from the host configuration.
    pub settings: Value,
    /// Secret name → the exact contents of the configured file.
    pub secrets: BTreeMap<String, String>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("settings", &self.settings)
            .field("secrets", &self.secrets.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Why a call produced no value.
#[derive(Clone, Debug, PartialEq)]
pub enum CallError {
    /// A named error the contract method declares, with its data.
    Application { name: String, data: Value },
    /// A Run/1 operational failure (`UNAVAILABLE`, `INVALID_INPUT`, ...).
    Operational {
        code: String,
        message: String,
        details: Option<Value>,
    },
}

impl CallError {
    pub fn application(name: &str, data: Value) -> CallError {
        CallError::Application {
            name: name.to_owned(),
            data,
        }
    }

    pub fn operational(code: &str, message: impl Into<String>) -> CallError {
        CallError::Operational {
            code: code.to_owned(),
            message: message.into(),
            details: None,
        }
    }

    /// The answer for a method this provider does not implement.
    pub fn unknown_method(method: &str) -> CallError {
        CallError::operational("UNAVAILABLE", format!("no method {method:?}"))
    }
}

/// A capability provider. Every call is independent: a WASM provider runs
/// in a fresh instance per call, so keep no state between calls.
pub trait Provider {
    /// The complete Capability Contract/1 descriptors served, as JSON text
    /// (typically `include_str!` of the `.capability.json` file). The host
    /// validates them and computes their digests.
    fn contracts() -> Vec<&'static str>;

    /// Handles one call of `method` with `input`. `channels` reaches the
    /// channel ports of the method the caller connected (none for most
    /// calls); a send port not closed here is sealed by the host when the
    /// call succeeds and failed when it fails.
    fn call(
        ctx: &Context,
        method: &str,
        input: Value,
        config: &Config,
        channels: &Channels,
    ) -> Result<Value, CallError>;
}

/// Exports `$provider` (a type implementing [`Provider`]) as a WASM
/// component on `wasm32`, and as the `jig_provider_*` C ABI elsewhere.
#[macro_export]
macro_rules! export_provider {
    ($provider:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct JigProviderComponent;

            impl $crate::wasm::Guest for JigProviderComponent {
                fn contracts() -> ::std::vec::Vec<::std::string::String> {
                    $crate::wasm::contracts::<$provider>()
                }

                fn call(
                    ctx: $crate::wasm::CallContext,
                    method: ::std::string::String,
                    input: ::std::string::String,
                    config: $crate::wasm::ProviderConfig,
                ) -> ::std::result::Result<::std::string::String, $crate::wasm::CallError> {
                    $crate::wasm::call::<$provider>(ctx, method, input, config)
                }
            }

            $crate::wasm::export_capability_provider!(
                JigProviderComponent with_types_in $crate::wit
            );
        };

        #[cfg(not(target_arch = "wasm32"))]
        const _: () = {
            #[unsafe(no_mangle)]
            pub extern "C" fn jig_provider_abi_version() -> u32 {
                $crate::native::ABI_VERSION
            }

            /// # Safety
            /// `out_ptr` and `out_len` must be valid for writes.
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn jig_provider_contracts(
                out_ptr: *mut *mut u8,
                out_len: *mut usize,
            ) -> i32 {
                unsafe { $crate::native::contracts::<$provider>(out_ptr, out_len) }
            }

            /// # Safety
            /// `req_ptr` must point to `req_len` readable bytes; `host` must
            /// be null or a live host table for this call; `out_ptr` and
            /// `out_len` must be valid for writes.
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn jig_provider_call(
                req_ptr: *const u8,
                req_len: usize,
                host: *const $crate::native::HostTable,
                out_ptr: *mut *mut u8,
                out_len: *mut usize,
            ) -> i32 {
                unsafe {
                    $crate::native::call::<$provider>(req_ptr, req_len, host, out_ptr, out_len)
                }
            }

            /// # Safety
            /// `ptr`/`len` must be a buffer this library returned, freed once.
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn jig_provider_free(ptr: *mut u8, len: usize) {
                unsafe { $crate::native::free(ptr, len) }
            }
        };
    };
}
