//! The one integration-test binary of `flow`: one module per format.

mod contract;
mod json;
mod package;
mod properties;
mod schema;

/// Bytes of a file under `tests/data`.
pub fn data(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Compiled values are shared across a host's threads.
#[test]
fn compiled_values_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<flow::package::Package>();
    assert_send_sync::<flow::schema::Schema>();
    assert_send_sync::<flow::contract::Contract>();
    assert_send_sync::<flow::contract::ChannelContract>();
    assert_send_sync::<flow::package::PackageError>();
}
