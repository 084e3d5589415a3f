//! The one integration-test binary of `flow`: one module per format.

mod contract;
mod json;
mod package;
mod schema;

/// Bytes of a file under `tests/data`.
pub fn data(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
