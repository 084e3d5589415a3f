//! `jig.lock`: canonical JSON/1 of the lock value and exactly one LF.

use flow::json::Value;

pub(crate) const LOCK_FILE: &str = "jig.lock";

pub(crate) fn lock_bytes(lock: &Value) -> Vec<u8> {
    let mut bytes = flow::json::canonical(lock);
    bytes.push(b'\n');
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greeting_lock_has_the_reference_spelling() {
        let lock = serde_json::json!({
            "packages": {"flows/hello": {"uses": {}, "directRun": true, "digest": "sha256:00"}},
            "bindings": {},
        });
        assert_eq!(
            String::from_utf8(lock_bytes(&lock)).unwrap(),
            "{\"bindings\":{},\"packages\":{\"flows/hello\":{\"digest\":\"sha256:00\",\"directRun\":true,\"uses\":{}}}}\n"
        );
    }
}
