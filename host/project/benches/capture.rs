//! One complete capture of the `jig init` greeting project: reading `jig.ts`,
//! parsing and stripping it, a fresh QuickJS runtime, evaluation, snapshot,
//! re-validation, discovery and the re-read that confirms nothing changed.
//! Also the same with a Binding, which adds a second evaluated module.

use std::fs;

fn main() {
    divan::main();
}

#[divan::bench(sample_count = 200)]
fn capture_greeting(bencher: divan::Bencher) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("project");
    jig_project::init(&root, jig_project::Template::Python).unwrap();
    bencher.bench(|| jig_project::capture(divan::black_box(&root)).unwrap());
}

#[divan::bench(sample_count = 200)]
fn capture_greeting_with_binding(bencher: divan::Bencher) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("project");
    jig_project::init(&root, jig_project::Template::Python).unwrap();
    fs::write(
        root.join("bindings/greeter.ts"),
        "import { defineBinding } from \"@jigging/jig\";\nexport default defineBinding({ package: \"./flows/hello\", slots: { again: \"flow:flows/hello\" } });\n",
    )
    .unwrap();
    bencher.bench(|| jig_project::capture(divan::black_box(&root)).unwrap());
}
