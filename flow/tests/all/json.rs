use flow::json::{
    self, JsonErrorKind, Value, MAX_ARRAY_ITEMS, MAX_DEPTH, MAX_DOCUMENT_BYTES,
    MAX_MEMBER_NAME_BYTES, MAX_NODES, MAX_NUMBER_TOKEN_BYTES, MAX_OBJECT_MEMBERS, MAX_STRING_BYTES,
};
use serde_json::json;

fn kind(bytes: &[u8]) -> JsonErrorKind {
    json::parse(bytes).unwrap_err().kind
}

/// RFC 8785 Appendix B: IEEE 754 bit patterns and their canonical text.
const RFC8785_NUMBERS: [(u64, &str); 23] = [
    (0x0000000000000000, "0"),
    (0x8000000000000000, "0"),
    (0x0000000000000001, "5e-324"),
    (0x8000000000000001, "-5e-324"),
    (0x7fefffffffffffff, "1.7976931348623157e+308"),
    (0xffefffffffffffff, "-1.7976931348623157e+308"),
    (0x4340000000000000, "9007199254740992"),
    (0xc340000000000000, "-9007199254740992"),
    (0x4430000000000000, "295147905179352830000"),
    (0x44b52d02c7e14af5, "9.999999999999997e+22"),
    (0x44b52d02c7e14af6, "1e+23"),
    (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
    (0x444b1ae4d6e2ef4e, "999999999999999700000"),
    (0x444b1ae4d6e2ef4f, "999999999999999900000"),
    (0x444b1ae4d6e2ef50, "1e+21"),
    (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
    (0x3eb0c6f7a0b5ed8d, "0.000001"),
    (0x41b3de4355555553, "333333333.3333332"),
    (0x41b3de4355555554, "333333333.33333325"),
    (0x41b3de4355555555, "333333333.3333333"),
    (0x41b3de4355555556, "333333333.3333334"),
    (0x41b3de4355555557, "333333333.33333343"),
    (0xbecbf647612f3696, "-0.0000033333333333333333"),
];

#[test]
fn rfc8785_number_serialization() {
    for (bits, text) in RFC8785_NUMBERS {
        assert_eq!(
            json::format_number(f64::from_bits(bits)),
            text,
            "{bits:#018x}"
        );
    }
    assert_eq!(
        json::format_number(f64::from_bits(0x43143ff3c1cb0959)),
        "1424953923781206.2"
    );
    for (value, text) in [
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-7, "1e-7"),
        (1e-6, "0.000001"),
        (4.5, "4.5"),
        (0.1, "0.1"),
        (-1.5e-10, "-1.5e-10"),
        (123456789.0, "123456789"),
    ] {
        assert_eq!(json::format_number(value), text);
    }
}

#[test]
fn canonical_numbers_from_parsed_text() {
    for (input, canonical) in [
        ("1.0", "1"),
        ("-0", "0"),
        ("-0.0e5", "0"),
        ("1E2", "100"),
        ("0.000001", "0.000001"),
        ("1e-7", "1e-7"),
        ("333333333.33333329", "333333333.3333333"),
        ("9007199254740991", "9007199254740991"),
        ("1e-400", "0"),
    ] {
        let v = json::parse(input.as_bytes()).unwrap();
        assert_eq!(json::canonical_string(&v), canonical, "{input}");
    }
}

#[test]
fn canonical_bytes_sort_keys_by_utf16() {
    // RFC 8785 §3.2.3 sorting example.
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
fn canonical_string_escapes() {
    let v = json!(["\u{1}\u{1f}\"\\/\u{8}\u{c}\n\r\t\u{7f}\u{2028}é"]);
    assert_eq!(
        json::canonical_string(&v),
        "[\"\\u0001\\u001f\\\"\\\\/\\b\\f\\n\\r\\t\u{7f}\u{2028}é\"]"
    );
    assert_eq!(json::canonical(&v), json::canonical_string(&v).into_bytes());
}

#[test]
fn equality_is_json1_equality() {
    assert!(json::equal(
        &json!({"a": [1, -0.0]}),
        &json!({"a": [1.0, 0]})
    ));
    assert!(!json::equal(&json!([1, 2]), &json!([2, 1])));
    assert!(!json::equal(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
    assert!(!json::equal(&json!("1"), &json!(1)));
    assert!(json::equal(&json!(0.5), &json::parse(b"5e-1").unwrap()));
}

#[test]
fn encoding_and_syntax_failures() {
    assert_eq!(kind(b"\xEF\xBB\xBF1"), JsonErrorKind::Bom);
    assert_eq!(kind(b"[\"\xC3\x28\"]"), JsonErrorKind::InvalidUtf8);
    // A literal surrogate encoded in UTF-8 (CESU) is invalid UTF-8.
    assert_eq!(kind(b"\"\xED\xA0\x80\""), JsonErrorKind::InvalidUtf8);
    for bad in [
        &b"NaN"[..],
        b"Infinity",
        b"-Infinity",
        b"+1",
        b".5",
        b"1.",
        b"1e",
        b"0x10",
        b"'a'",
        b"[1 2]",
        b"{\"a\" 1}",
        b"{a:1}",
        b"\"\\x\"",
        b"\"\\u12\"",
        b"tru",
        b"nul",
        b"[",
        b"//c\n1",
        b"\x0c1",
    ] {
        assert_eq!(
            kind(bad),
            JsonErrorKind::Syntax,
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
    let e = json::parse(b"[1, x]").unwrap_err();
    assert_eq!(e.offset, Some(4));
}

#[test]
fn duplicates_and_surrogates() {
    assert_eq!(
        kind(br#"{"a":1,"b":{"c":1,"c":2}}"#),
        JsonErrorKind::DuplicateMember
    );
    // Escaped and literal spellings of one name are duplicates too.
    assert_eq!(
        kind(br#"{"a":1,"\u0061":2}"#),
        JsonErrorKind::DuplicateMember
    );
    assert_eq!(kind(br#"{"\ud800":1}"#), JsonErrorKind::LoneSurrogate);
    assert_eq!(kind(br#""\udfff""#), JsonErrorKind::LoneSurrogate);
    assert_eq!(kind(br#""\ud83d\ud83d""#), JsonErrorKind::LoneSurrogate);
    assert!(json::parse(br#""\ud83d\ude00""#).is_ok());
}

#[test]
fn number_domain() {
    for bad in [
        "1e300",
        "-1e300",
        "9007199254740992",
        "-9007199254740993",
        "1e400",
        "1e16",
        "18446744073709551616",
    ] {
        assert_eq!(
            kind(bad.as_bytes()),
            JsonErrorKind::NumberOutOfDomain,
            "{bad}"
        );
    }
    for good in [
        "9007199254740991",
        "-9007199254740991",
        "9007199254740991.0",
        "1.5e-300",
        "0.1",
    ] {
        assert!(json::parse(good.as_bytes()).is_ok(), "{good}");
    }
    // In-memory values are checked the same way.
    assert_eq!(
        json::check(&json!(9007199254740992u64)).unwrap_err().kind,
        JsonErrorKind::NumberOutOfDomain
    );
    assert_eq!(
        json::check(&json!(1e300)).unwrap_err().kind,
        JsonErrorKind::NumberOutOfDomain
    );
    assert!(json::check(&json!(-9007199254740991i64)).is_ok());
    assert!(json::check(&json!(2.5)).is_ok());
}

#[test]
fn number_token_limit() {
    let at = format!("0.{}", "1".repeat(MAX_NUMBER_TOKEN_BYTES - 2));
    assert_eq!(at.len(), MAX_NUMBER_TOKEN_BYTES);
    assert!(json::parse(at.as_bytes()).is_ok());
    let past = format!("{at}1");
    assert_eq!(kind(past.as_bytes()), JsonErrorKind::LimitExceeded);
}

fn nested_arrays(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

#[test]
fn depth_limit() {
    assert!(json::parse(nested_arrays(MAX_DEPTH).as_bytes()).is_ok());
    assert_eq!(
        kind(nested_arrays(MAX_DEPTH + 1).as_bytes()),
        JsonErrorKind::LimitExceeded
    );
    let mut v = json!(1);
    for _ in 1..MAX_DEPTH {
        v = json!([v]);
    }
    assert!(json::check(&v).is_ok());
    assert_eq!(
        json::check(&json!([v])).unwrap_err().kind,
        JsonErrorKind::LimitExceeded
    );
}

fn array_of(n: usize) -> String {
    let mut s = String::with_capacity(n * 2 + 2);
    s.push('[');
    for i in 0..n {
        if i > 0 {
            s.push(',');
        }
        s.push('0');
    }
    s.push(']');
    s
}

#[test]
fn item_and_member_limits() {
    assert!(json::parse(array_of(MAX_ARRAY_ITEMS).as_bytes()).is_ok());
    assert_eq!(
        kind(array_of(MAX_ARRAY_ITEMS + 1).as_bytes()),
        JsonErrorKind::LimitExceeded
    );

    let object = |n: usize| {
        let members: Vec<String> = (0..n).map(|i| format!("\"{i}\":0")).collect();
        format!("{{{}}}", members.join(","))
    };
    assert!(json::parse(object(MAX_OBJECT_MEMBERS).as_bytes()).is_ok());
    assert_eq!(
        kind(object(MAX_OBJECT_MEMBERS + 1).as_bytes()),
        JsonErrorKind::LimitExceeded
    );
}

#[test]
fn node_limit() {
    // Root + 4 arrays + leaves: 65,535 * 3 + 65,534 = 262,139 leaves.
    let build = |last: usize| {
        format!(
            "[{},{},{},{}]",
            array_of(65_535),
            array_of(65_535),
            array_of(65_535),
            array_of(last)
        )
    };
    let at = build(65_534);
    let v = json::parse(at.as_bytes()).unwrap();
    assert!(json::check(&v).is_ok());
    let past = build(65_535);
    assert_eq!(kind(past.as_bytes()), JsonErrorKind::LimitExceeded);
    assert_eq!(MAX_NODES, 1 + 4 + 65_535 * 3 + 65_534);
    let mut big = v;
    big.as_array_mut().unwrap()[3]
        .as_array_mut()
        .unwrap()
        .push(json!(0));
    assert_eq!(
        json::check(&big).unwrap_err().kind,
        JsonErrorKind::LimitExceeded
    );
}

#[test]
fn string_and_name_limits() {
    let s = |n: usize| format!("\"{}\"", "a".repeat(n));
    assert!(json::parse(s(MAX_STRING_BYTES).as_bytes()).is_ok());
    assert_eq!(
        kind(s(MAX_STRING_BYTES + 1).as_bytes()),
        JsonErrorKind::LimitExceeded
    );
    // Escapes count by their decoded UTF-8 bytes: é is two.
    let escaped = format!("\"{}\\u00e9\"", "a".repeat(MAX_STRING_BYTES - 2));
    assert!(json::parse(escaped.as_bytes()).is_ok());
    let escaped = format!("\"{}\\u00e9\"", "a".repeat(MAX_STRING_BYTES - 1));
    assert_eq!(kind(escaped.as_bytes()), JsonErrorKind::LimitExceeded);

    let name = |n: usize| format!("{{\"{}\":1}}", "k".repeat(n));
    assert!(json::parse(name(MAX_MEMBER_NAME_BYTES).as_bytes()).is_ok());
    assert_eq!(
        kind(name(MAX_MEMBER_NAME_BYTES + 1).as_bytes()),
        JsonErrorKind::LimitExceeded
    );
    let v = json!({ "k".repeat(MAX_MEMBER_NAME_BYTES + 1): 1 });
    assert_eq!(
        json::check(&v).unwrap_err().kind,
        JsonErrorKind::LimitExceeded
    );
}

#[test]
fn document_byte_limit() {
    // A string padded by whitespace to exactly the limit.
    let body = format!("\"{}\"", "a".repeat(MAX_STRING_BYTES));
    let mut at = body.clone().into_bytes();
    at.resize(MAX_DOCUMENT_BYTES, b' ');
    assert!(json::parse(&at).is_ok());
    at.push(b' ');
    assert_eq!(
        json::parse(&at).unwrap_err().kind,
        JsonErrorKind::LimitExceeded
    );
    // A seam may lower the limit.
    assert!(json::parse_with_limit(b"[1]", 3).is_ok());
    assert_eq!(
        json::parse_with_limit(b"[1] ", 3).unwrap_err().kind,
        JsonErrorKind::LimitExceeded
    );
}

#[test]
fn check_measures_the_encoded_size() {
    // Two strings just under the string limit exceed the document limit.
    let big = "a".repeat(MAX_STRING_BYTES);
    let v = json!([big.clone(), big]);
    assert_eq!(
        json::check(&v).unwrap_err().kind,
        JsonErrorKind::LimitExceeded
    );
}

/// A small deterministic generator so the property test needs no crate.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn random_and_mutated_bytes_never_panic_and_agree_with_serde() {
    let seeds: [&[u8]; 4] = [
        br#"{"a":[1,2.5,-0,"x\u00e9\ud83d\ude00"],"b":{"c":null,"d":true}}"#,
        b"[1e5, 0.1, -12, \"\\n\\t\", []]",
        br#"{"k":"v","n":{"m":[{"o":false}]}}"#,
        b"123.456e-7",
    ];
    let alphabet = b"{}[]\",:0123456789-+.eE\\u tfnrl\xff\xc3\xa9";
    let mut rng = XorShift(0x9e3779b97f4a7c15);
    for round in 0..20_000 {
        let mut bytes = seeds[round % seeds.len()].to_vec();
        let edits = 1 + rng.next() % 4;
        for _ in 0..edits {
            let pos = (rng.next() as usize) % (bytes.len() + 1);
            let b = alphabet[(rng.next() as usize) % alphabet.len()];
            match rng.next() % 3 {
                0 if pos < bytes.len() => bytes[pos] = b,
                1 if pos < bytes.len() => {
                    bytes.remove(pos);
                }
                _ => bytes.insert(pos, b),
            }
        }
        let ours = json::parse(&bytes);
        // Whatever we accept, serde_json accepts with an equal value.
        if let Ok(v) = &ours {
            let theirs: Value =
                serde_json::from_slice(&bytes).expect("serde accepts what we accept");
            assert!(
                json::equal(v, &theirs),
                "{}",
                String::from_utf8_lossy(&bytes)
            );
            let again = json::parse(&json::canonical(v)).unwrap();
            assert_eq!(&again, v);
        }
    }
    for _ in 0..2_000 {
        let len = (rng.next() % 64) as usize;
        let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        let _ = json::parse(&bytes);
    }
}

/// Bit patterns with the text Node.js's `String(x)` printed for them
/// (generated once into `tests/data/es-numbers.txt`).
#[test]
fn number_text_matches_ecmascript_corpus() {
    let corpus = String::from_utf8(crate::data("es-numbers.txt")).unwrap();
    let mut checked = 0;
    for line in corpus.lines() {
        let (bits, text) = line.split_once(' ').unwrap();
        let value = f64::from_bits(u64::from_str_radix(bits, 16).unwrap());
        assert_eq!(json::format_number(value), text, "{bits}");
        checked += 1;
    }
    assert!(checked > 2_900);
}

#[test]
fn deepest_documents_fit_a_small_stack() {
    let outcome = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(|| {
            // 63 array/object pairs, then [1]: depth exactly 128.
            let deepest = format!("{}[1]{}", "[{\"a\":".repeat(63), "}]".repeat(63));
            let v = json::parse(deepest.as_bytes()).unwrap();
            json::check(&v).unwrap();
            let bytes = json::canonical(&v);
            (json::equal(&v, &v), bytes.len())
        })
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(outcome, (true, 63 * 8 + 3));
}
