use super::*;

fn kind(bytes: &[u8]) -> JsonErrorKind {
    parse(bytes).unwrap_err().kind
}

#[test]
fn ascii_quote_is_a_json_string_in_ascii() {
    assert_eq!(ascii_quote("flows/a b"), r#""flows/a b""#);
    assert_eq!(ascii_quote(r#"a"b\c"#), r#""a\"b\\c""#);
    assert_eq!(
        ascii_quote("\u{1b}[2J\n\u{7f}"),
        r#""\u001b[2J\u000a\u007f""#
    );
    assert_eq!(ascii_quote("é\u{202e}😀"), r#""\u00e9\u202e\ud83d\ude00""#);
    for text in ["", "x", "a\"\\\u{0}é😀\u{202e}"] {
        let quoted = ascii_quote(text);
        assert!(quoted.is_ascii());
        assert_eq!(
            parse(quoted.as_bytes()).unwrap(),
            Value::String(text.into())
        );
    }
}

#[test]
fn parses_ordinary_documents() {
    let v = parse(br#" {"a": [1, 2.5, "x\u00e9", true, null], "b": {}} "#).unwrap();
    assert_eq!(
        canonical_string(&v),
        r#"{"a":[1,2.5,"xé",true,null],"b":{}}"#
    );
}

#[test]
fn one_and_one_point_zero_are_the_same_value() {
    assert_eq!(parse(b"1").unwrap(), parse(b"1.0").unwrap());
    assert_eq!(parse(b"-0").unwrap(), parse(b"0").unwrap());
    assert_eq!(canonical_string(&parse(b"-0.0").unwrap()), "0");
    assert!(equal(&serde_json::json!(1), &serde_json::json!(1.0)));
}

#[test]
fn rejects_what_json1_forbids() {
    assert_eq!(kind(b"\xEF\xBB\xBF{}"), JsonErrorKind::Bom);
    assert_eq!(kind(b"\"\xFF\""), JsonErrorKind::InvalidUtf8);
    assert_eq!(kind(br#"{"a":1,"a":2}"#), JsonErrorKind::DuplicateMember);
    assert_eq!(kind(br#""\ud800""#), JsonErrorKind::LoneSurrogate);
    assert_eq!(kind(br#""\udc00x""#), JsonErrorKind::LoneSurrogate);
    assert_eq!(kind(br#""\ud800\u0041""#), JsonErrorKind::LoneSurrogate);
    assert_eq!(kind(b"NaN"), JsonErrorKind::Syntax);
    assert_eq!(kind(b"1e400"), JsonErrorKind::NumberOutOfDomain);
    assert_eq!(kind(b"1e300"), JsonErrorKind::NumberOutOfDomain);
    assert_eq!(kind(b"9007199254740993"), JsonErrorKind::NumberOutOfDomain);
    assert_eq!(kind(b"9007199254740992"), JsonErrorKind::NumberOutOfDomain);
    assert!(parse(b"9007199254740991").is_ok());
    assert!(parse(b"-9007199254740991").is_ok());
    assert_eq!(kind(b"01"), JsonErrorKind::Syntax);
    assert_eq!(kind(b"[1,]"), JsonErrorKind::Syntax);
    assert_eq!(kind(b"\"a\tb\""), JsonErrorKind::Syntax);
    assert_eq!(kind(b""), JsonErrorKind::Syntax);
    assert_eq!(kind(b"{} x"), JsonErrorKind::Syntax);
}

#[test]
fn a_syntax_error_names_its_line_and_column() {
    let error = parse(b"{\n  \"type\": \"object\",\n  \"required\": [\"a\",]\n}").unwrap_err();
    assert_eq!(error.kind, JsonErrorKind::Syntax);
    assert_eq!(
        error.position,
        Some(Position {
            line: 3,
            column: 20
        })
    );
    assert!(
        error.to_string().ends_with(" at line 3, column 20"),
        "{error}"
    );
    // Columns count characters, not bytes; the first byte is line 1, column 1.
    let error = parse("[\"é\", x]".as_bytes()).unwrap_err();
    assert_eq!(error.position, Some(Position { line: 1, column: 7 }));
    let error = parse(b"\xEF\xBB\xBF{}").unwrap_err();
    assert_eq!(error.position, Some(Position { line: 1, column: 1 }));
}

#[test]
fn surrogate_pairs_decode() {
    let v = parse(br#""\ud83d\ude00""#).unwrap();
    assert_eq!(v, Value::String("😀".into()));
}
