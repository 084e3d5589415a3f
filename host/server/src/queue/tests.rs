use super::*;

/// A CA file is read up to [`MAX_CA_FILE_BYTES`] and refused one byte
/// past it; one that holds no certificate is refused as such.
#[test]
fn a_ca_file_is_bounded_and_must_hold_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ca.pem");
    let url = "postgresql://jig@db/jig";
    std::fs::write(&file, vec![b'\n'; MAX_CA_FILE_BYTES as usize]).unwrap();
    let at = connect_config(url, None, Some(&file))
        .unwrap_err()
        .to_string();
    assert!(at.contains("holds no PEM CERTIFICATE block"), "{at}");
    std::fs::write(&file, vec![b'\n'; MAX_CA_FILE_BYTES as usize + 1]).unwrap();
    let past = connect_config(url, None, Some(&file)).unwrap_err();
    assert_eq!(past.code(), URL_INVALID);
    assert!(past.to_string().contains("larger than"), "{past}");
}

#[test]
fn a_password_in_the_url_is_refused_and_one_from_a_file_is_used() {
    let e = connect_config("postgresql://jig:secret@db/jig", None, None).unwrap_err();
    assert_eq!(e.code(), URL_INVALID);
    assert!(!e.to_string().contains("secret"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("password");
    std::fs::write(&file, "s3cret\n").unwrap();
    let database = connect_config("postgresql://jig@db/jig", Some(&file), None).unwrap();
    assert_eq!(database.config.get_password(), Some(&b"s3cret"[..]));
    let missing = connect_config(
        "postgresql://jig@db/jig",
        Some(&dir.path().join("no")),
        None,
    );
    assert_eq!(missing.unwrap_err().code(), URL_INVALID);
    assert_eq!(
        connect_config("not a url", None, None).unwrap_err().code(),
        URL_INVALID
    );
}

#[test]
fn every_package_and_layout_a_plan_can_execute_is_published() {
    let plan = json!({
        "lock": {"packages": {"flows/a": {"digest": "sha256:aa"}, "flows/b": {"digest": "sha256:bb"}}},
        "execution": {
            "flows/a": {"prepared": {"digest": "sha256:cc"}},
            "flows/b": {},
            "flows/c": {"prepared": {"digest": "sha256:dd", "layout": "sha256:ee"}},
            "flows/d": {"prepared": {"digest": "sha256:ff", "layout": "sha256:ee"}},
        },
    });
    assert_eq!(
        blobs::plan_packages(&plan),
        [
            "sha256:aa",
            "sha256:bb",
            "sha256:cc",
            "sha256:dd",
            "sha256:ff"
        ]
    );
    // A workspace preparation's layout travels with its package, once.
    assert_eq!(blobs::plan_layouts(&plan), ["sha256:ee"]);
}
