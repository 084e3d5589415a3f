use super::*;

#[test]
fn the_bundled_sdk_revision_is_the_bundled_package_version() {
    let manifest: Value =
        serde_json::from_str(include_str!("../../../../typescript/flow/package.json")).unwrap();
    assert_eq!(manifest["name"], BUNDLED_SDK);
    assert_eq!(manifest["version"], BUNDLED_SDK_VERSION);
}

#[test]
fn limits_match_the_seed() {
    assert_eq!(PREPARATION_DEADLINE, Duration::from_secs(60));
    assert_eq!(PLANNING_DEADLINE, Duration::from_secs(180));
    assert_eq!(MAX_PREPARATIONS, 16);
    assert_eq!(MAX_PREPARED_TOTAL_BYTES, 268_435_456);
    assert_eq!((MAX_SOURCE_FILES, MAX_SOURCE_BYTES), (4096, 16_777_216));
    assert_eq!((MAX_PREPARED_FILES, MAX_PREPARED_BYTES), (4096, 33_554_432));
    assert_eq!((MAX_MANIFEST_BYTES, MAX_LOCK_BYTES), (1_048_576, 2_097_152));
}

#[test]
fn the_aggregate_prepared_content_is_256_mebibytes() {
    assert!(fits_aggregate(0, MAX_PREPARED_TOTAL_BYTES));
    assert!(fits_aggregate(MAX_PREPARED_TOTAL_BYTES - 1, 1));
    assert!(!fits_aggregate(MAX_PREPARED_TOTAL_BYTES, 1));
    assert!(!fits_aggregate(0, MAX_PREPARED_TOTAL_BYTES + 1));
}

#[test]
fn each_installer_gets_60_s_within_the_reviews_180_s() {
    let s = Duration::from_secs;
    assert_eq!(installer_deadline(s(0)), Some(s(60)));
    assert_eq!(installer_deadline(s(120)), Some(s(60)));
    assert_eq!(installer_deadline(s(150)), Some(s(30)));
    assert_eq!(
        installer_deadline(s(180) - Duration::from_millis(1)),
        Some(Duration::from_millis(1))
    );
    assert_eq!(installer_deadline(s(180)), None);
    assert_eq!(installer_deadline(s(181)), None);
}

#[test]
fn the_lock_limit_is_two_mebibytes() {
    let padding = |n: usize| {
        let head = "{\"lockfileVersion\":1,\"workspaces\":{\"\":{}},\"packages\":{}}";
        let mut text = head.to_string();
        text.push_str(&" ".repeat(n - head.len()));
        text.into_bytes()
    };
    assert!(parse_lock(&padding(MAX_LOCK_BYTES)).is_ok());
    assert_eq!(
        parse_lock(&padding(MAX_LOCK_BYTES + 1)),
        Err("is larger than 2 MiB")
    );
}

#[test]
fn bun_text_locks_parse_with_trailing_commas() {
    let text = "{\n  \"lockfileVersion\": 1,\n  \"workspaces\": { \"\": { \"dependencies\": { \"a\": \"^1.0.0\", }, }, },\n  \"packages\": { \"a\": [\"a@1.0.0\", \"\", {}, \"sha512-AAAA,]\"], },\n}\n";
    let lock = parse_lock(text.as_bytes()).unwrap();
    assert_eq!(lock["packages"]["a"][3], "sha512-AAAA,]");
    assert!(parse_lock(b"{\"lockfileVersion\":1}").is_err());
    assert!(parse_lock(b"not json").is_err());
}

#[test]
fn specifiers_are_classified_before_resolution() {
    for ok in ["^1.0.0", "1.2.3", "latest", ">=1 <2", "*", ""] {
        assert_eq!(unsupported_spec(ok), None, "{ok}");
    }
    for (spec, kind) in [
        ("git+https://example.org/a.git", "git"),
        ("github:owner/repo", "GitHub"),
        ("owner/repo", "GitHub"),
        ("https://example.org/a.tgz", "tarball"),
        ("file:../lib", "file"),
        ("./lib", "file"),
        ("workspace:*", "workspace"),
    ] {
        assert_eq!(unsupported_spec(spec), Some(kind), "{spec}");
    }
    assert_eq!(alias_range("greet-lib@^1.0.0"), "^1.0.0");
    assert_eq!(alias_range("@scope/lib@2"), "2");
    assert_eq!(alias_range("lib"), "");
}

#[test]
fn package_ids_and_versions() {
    assert_eq!(split_package_id("a@1.0.0"), Some(("a", "1.0.0")));
    assert_eq!(
        split_package_id("@s/a@github:o/r#x"),
        Some(("@s/a", "github:o/r#x"))
    );
    assert!(is_exact_version("1.0.0-beta.1+x"));
    assert!(!is_exact_version("^1.0.0"));
    assert!(is_sri("sha512-abc+/="));
    assert!(!is_sri("sha1-abc"));
}
