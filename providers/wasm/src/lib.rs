//! WASM provider loader.
