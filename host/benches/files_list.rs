//! A hostile npm `files` entry, from the project under review: 12 `**`
//! against a path of 12 segments (the old backtracking matcher made 7.9
//! million calls and took about 70 ms here), and the longest entry the list
//! admits against a long file name. Both should take microseconds.

use divan::Bencher;
use jig_engine::plan::prepare::files_list::{FilesList, MAX_ENTRY_BYTES};
use serde_json::Value;

fn main() {
    divan::main();
}

fn list(entry: String) -> FilesList {
    FilesList::compile(&[Value::String(entry)], None, None).unwrap()
}

#[divan::bench(args = [12, 24])]
fn any_depth_run(bencher: Bencher, n: usize) {
    let files = list(format!("{}x", "**/".repeat(n)));
    let path = vec!["a"; n].join("/");
    bencher.bench(|| files.selects(divan::black_box(&path)));
}

#[divan::bench]
fn longest_entry(bencher: Bencher) {
    let files = list("*a".repeat(MAX_ENTRY_BYTES / 2));
    let path = "a".repeat(4096);
    bencher.bench(|| files.selects(divan::black_box(&path)));
}
