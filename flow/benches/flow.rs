//! JSON/1 parsing against `serde_json` on the same ~1 MiB document, and the
//! Package/1 digest against plain SHA-256 of the same content bytes.

use std::collections::BTreeMap;

use divan::{black_box, Bencher};
use sha2::{Digest, Sha256};

fn main() {
    divan::main();
}

/// A ~1 MiB document with the usual mix: objects, arrays, strings with
/// escapes and non-ASCII text, integers and fractions.
fn document() -> Vec<u8> {
    let mut items = Vec::new();
    let mut size = 0;
    let mut i: u64 = 0;
    while size < 1 << 20 {
        let item = format!(
            r#"{{"id":{i},"name":"item-{i} caf\u00e9 \"quoted\"","score":{}.{},"tags":["a","b\n","ünï"],"nested":{{"ok":true,"n":null,"ratio":{}e-3}}}}"#,
            i * 7919 % 100_000,
            i % 997,
            i % 123 + 1
        );
        size += item.len() + 1;
        items.push(item);
        i += 1;
    }
    format!("[{}]", items.join(",")).into_bytes()
}

#[divan::bench]
fn json1_parse(bencher: Bencher) {
    let doc = document();
    bencher
        .counter(divan::counter::BytesCount::of_slice(&doc))
        .bench(|| flow::json::parse(black_box(&doc)).unwrap());
}

#[divan::bench]
fn serde_json_from_slice(bencher: Bencher) {
    let doc = document();
    bencher
        .counter(divan::counter::BytesCount::of_slice(&doc))
        .bench(|| serde_json::from_slice::<serde_json::Value>(black_box(&doc)).unwrap());
}

#[divan::bench]
fn json1_canonical(bencher: Bencher) {
    let value = flow::json::parse(&document()).unwrap();
    bencher.bench(|| flow::json::canonical(black_box(&value)));
}

/// 256 files of 4 KiB under a few directories: 1 MiB of content.
fn tree() -> BTreeMap<String, Vec<u8>> {
    (0..256u32)
        .map(|i| {
            let content: Vec<u8> = (0..4096u32).map(|j| (i * 31 + j) as u8).collect();
            (format!("dir{}/file-{i}.txt", i % 8), content)
        })
        .collect()
}

#[divan::bench]
fn package_digest(bencher: Bencher) {
    let files = tree();
    bencher.bench(|| flow::package::digest_files(black_box(&files)));
}

#[divan::bench]
fn plain_sha256_of_contents(bencher: Bencher) {
    let files = tree();
    bencher.bench(|| {
        let mut h = Sha256::new();
        for content in black_box(&files).values() {
            h.update(content);
        }
        h.finalize()
    });
}
