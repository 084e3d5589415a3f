//! Example WASM provider.
