use flow::json::{self, JsonErrorKind};

#[test]
fn canonical_bytes_sort_keys_by_utf16() {
    let v = json::parse(
        "{\"\\u20ac\":1,\"\\r\":2,\"\\ufb33\":3,\"1\":4,\"\\ud83d\\ude00\":5,\"\\u0080\":6,\"\\u00f6\":7}"
            .as_bytes(),
    )
    .unwrap();
    assert_eq!(
        json::canonical_string(&v),
        "{\"\\r\":2,\"1\":4,\"\u{80}\":6,\"\u{f6}\":7,\"\u{20ac}\":1,\"\u{1f600}\":5,\"\u{fb33}\":3}"
    );
}

#[test]
fn strict_parse_reports_kinds() {
    assert_eq!(
        json::parse(br#"{"a":1,"a":1}"#).unwrap_err().kind,
        JsonErrorKind::DuplicateMember
    );
}
