//! Property tests: RFC 8785 bytes round-trip through the JSON/1 parser,
//! JSON/1 equality obeys its laws and agrees with canonical bytes, and a
//! staged package's digest depends on paths and bytes only — not on the
//! order files were created in, their modes or their timestamps.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;

use flow::json::{self, Value};
use flow::package::{digest_files, Package};
use proptest::prelude::*;

/// Arbitrary JSON/1 values: safe integers, finite doubles, Unicode strings
/// (including surrogate-pair characters), nested arrays and objects.
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-9_007_199_254_740_991i64..=9_007_199_254_740_991).prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_filter_map("JSON/1 number", |f| json::number_from_f64(f)
                .ok()
                .map(Value::Number)),
        "\\PC{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("\\PC{0,6}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn canonical_bytes_round_trip(v in value()) {
        let bytes = json::canonical(&v);
        let parsed = json::parse(&bytes).expect("canonical bytes are JSON/1");
        prop_assert!(json::equal(&parsed, &v));
        prop_assert_eq!(json::canonical(&parsed), bytes);
    }

    #[test]
    fn equality_laws(a in value(), b in value()) {
        prop_assert!(json::equal(&a, &a));
        prop_assert_eq!(json::equal(&a, &b), json::equal(&b, &a));
        prop_assert_eq!(json::equal(&a, &b), json::canonical(&a) == json::canonical(&b));
    }

    #[test]
    fn digest_ignores_creation_order_modes_and_timestamps(
        contents in prop::collection::btree_map("[a-z]{1,6}(/[a-z]{1,6}){0,2}", prop::collection::vec(any::<u8>(), 0..64), 1..8),
        modes in prop::collection::vec(prop_oneof![Just(0o644u32), Just(0o600), Just(0o755), Just(0o444)], 8),
        seconds in prop::collection::vec(0u64..2_000_000_000, 8),
    ) {
        // File names that are also directories of other files cannot coexist.
        let names: Vec<&String> = contents.keys().collect();
        prop_assume!(!names.iter().any(|a| names.iter().any(|b| b.starts_with(&format!("{a}/")))));
        let mut tree: BTreeMap<String, Vec<u8>> = contents.clone();
        tree.insert("FLOW.md".into(), b"---\nname: p\ndescription: A generated package.\n---\n".to_vec());
        let write = |dir: &std::path::Path, order: &[(&String, &Vec<u8>)], vary: bool| {
            for (i, (path, bytes)) in order.iter().enumerate() {
                let target = dir.join(path.as_str());
                std::fs::create_dir_all(target.parent().unwrap()).unwrap();
                std::fs::write(&target, bytes).unwrap();
                if vary {
                    let file = std::fs::File::options().write(true).open(&target).unwrap();
                    let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(seconds[i % seconds.len()]);
                    file.set_modified(when).unwrap();
                    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(modes[i % modes.len()])).unwrap();
                }
            }
        };
        let forward: Vec<(&String, &Vec<u8>)> = tree.iter().collect();
        let backward: Vec<(&String, &Vec<u8>)> = tree.iter().rev().collect();
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        write(a.path(), &forward, false);
        write(b.path(), &backward, true);
        let staged_a = Package::stage_dir(a.path()).expect("stages");
        let staged_b = Package::stage_dir(b.path()).expect("stages");
        prop_assert_eq!(staged_a.digest(), staged_b.digest());
        let expected = digest_files(&tree);
        prop_assert_eq!(staged_a.digest(), expected.as_str());
    }
}
