use super::*;

const HASH: &str = "44822b8d990ffe00df52184a788a0b691bfce2644e95a9a172889ef037bd69ce";

fn code(result: Result<Vec<Locked>, Refusal>) -> String {
    match result {
        Ok(_) => "ok".into(),
        Err(Refusal::Invalid(d) | Refusal::Unavailable(d)) => d.code,
    }
}

#[test]
fn hash_pinned_requirements_are_read_and_rewritten() {
    let text = format!(
        "# locked\nGreet_Lib==1.0.0 \\\n    --hash=sha256:{HASH}\nother==2.0 ; python_version >= \"3.8\" --hash=sha256:{HASH}  # why\n"
    );
    let locked = parse_requirements(text.as_bytes(), "r").unwrap_or_else(|_| panic!());
    assert_eq!(locked.len(), 2);
    assert_eq!(
        locked[0].line(),
        format!("greet-lib==1.0.0 --hash=sha256:{HASH}")
    );
    assert_eq!(
        locked[1].line(),
        format!("other==2.0 ; python_version >= \"3.8\" --hash=sha256:{HASH}")
    );
}

#[test]
fn each_invalid_requirement_kind_has_its_code() {
    for (text, expected) in [
        (format!("a>=1.0 --hash=sha256:{HASH}"), codes::LOCK_INVALID),
        (format!("a==1.* --hash=sha256:{HASH}"), codes::LOCK_INVALID),
        ("a==1.0".to_string(), codes::LOCK_INVALID),
        ("a==1.0 --hash=md5:abc".to_string(), codes::LOCK_INVALID),
        (
            format!("a[x]==1.0 --hash=sha256:{HASH}"),
            codes::LOCK_INVALID,
        ),
        (
            format!("a==1.0 --hash=sha256:{HASH}\nA==1.0 --hash=sha256:{HASH}"),
            codes::LOCK_INVALID,
        ),
        (
            "--index-url http://elsewhere/".to_string(),
            codes::SOURCE_UNSUPPORTED,
        ),
        ("-e ./lib".to_string(), codes::SOURCE_UNSUPPORTED),
        (
            format!("a @ https://elsewhere/a-1.0-py3-none-any.whl --hash=sha256:{HASH}"),
            codes::SOURCE_UNSUPPORTED,
        ),
    ] {
        assert_eq!(
            code(parse_requirements(text.as_bytes(), "r")),
            expected,
            "{text}"
        );
    }
}

fn pylock(wheel: &str) -> String {
    format!(
        "lock-version = \"1.0\"\ncreated-by = \"test\"\n\n[[packages]]\nname = \"greet-lib\"\nversion = \"1.0.0\"\n{wheel}"
    )
}

#[test]
fn pylock_wheels_on_the_index_host_are_accepted_and_others_refused() {
    let index = "http://127.0.0.1:8000/simple/";
    let ok = pylock(&format!(
        "wheels = [{{ url = \"http://127.0.0.1:8000/files/greet_lib-1.0.0-py3-none-any.whl\", hashes = {{ sha256 = \"{HASH}\" }} }}]\n"
    ));
    let locked = parse_pylock(ok.as_bytes(), index, "p").unwrap_or_else(|_| panic!());
    assert_eq!(
        locked[0].line(),
        format!("greet-lib==1.0.0 --hash=sha256:{HASH}")
    );
    for (text, expected) in [
        (
            pylock(&format!("wheels = [{{ url = \"http://127.0.0.2:8000/g-1.0.0-py3-none-any.whl\", hashes = {{ sha256 = \"{HASH}\" }} }}]\n")),
            codes::SOURCE_UNSUPPORTED,
        ),
        (
            pylock("wheels = [{ url = \"http://127.0.0.1:8000/g-1.0.0-py3-none-any.whl\", hashes = { md5 = \"x\" } }]\n"),
            codes::LOCK_INVALID,
        ),
        (
            pylock(&format!("sdist = {{ url = \"http://127.0.0.1:8000/g-1.0.0.tar.gz\", hashes = {{ sha256 = \"{HASH}\" }} }}\n")),
            codes::SOURCE_UNSUPPORTED,
        ),
        (
            pylock("vcs = { type = \"git\", url = \"https://example.org/g.git\", commit-id = \"abc\" }\n"),
            codes::SOURCE_UNSUPPORTED,
        ),
        ("lock-version = \"2.0\"\n".to_string(), codes::LOCK_INVALID),
        ("not toml [".to_string(), codes::LOCK_INVALID),
    ] {
        assert_eq!(code(parse_pylock(text.as_bytes(), index, "p")), expected, "{text}");
    }
}

#[test]
fn specifiers_decide_staleness() {
    for (version, spec, ok) in [
        ("1.0.0", "", true),
        ("1.0.0", ">=1.0", true),
        ("1.0.0", ">=1.0,<2", true),
        ("2.0.0", ">=1.0,<2", false),
        ("1.4.2", "~=1.4", true),
        ("2.0", "~=1.4", false),
        ("1.0.3", "==1.0.*", true),
        ("1.1.0", "==1.0.*", false),
        ("1.0", "==1.0.0", true),
        ("1.0.0", "!=1.0.0", false),
        ("1.0.0", "^1.0", false),
    ] {
        assert_eq!(satisfies(version, spec), ok, "{version} {spec}");
    }
}

#[test]
fn names_normalise_and_origins_compare() {
    assert_eq!(normalize("Greet__Lib.x"), "greet-lib-x");
    assert_eq!(
        url_origin("HTTP://127.0.0.1:80/simple/"),
        "http://127.0.0.1:80"
    );
    assert_eq!(url_origin("http://u@evil/"), "");
    assert_eq!(url_origin("file:///x"), "");
    assert_eq!(MAX_REQUIREMENTS, 4096);
}

#[test]
fn a_lock_holds_at_most_4096_packages() {
    let lines = |n: usize| {
        (0..n)
            .map(|i| format!("p{i}==1.0 --hash=sha256:{HASH}\n"))
            .collect::<String>()
    };
    assert_eq!(
        code(parse_requirements(lines(MAX_REQUIREMENTS).as_bytes(), "r")),
        "ok"
    );
    assert_eq!(
        code(parse_requirements(
            lines(MAX_REQUIREMENTS + 1).as_bytes(),
            "r"
        )),
        codes::LIMIT_EXCEEDED
    );
}
