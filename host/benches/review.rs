//! Reviewing a large project: capture of `jig.ts`, staging of every Flow as a
//! Package/1 tree, linking and planning, for projects of 50 and 500 Flows.
//! The 50-Flow run is the baseline the 500-Flow figure is read against.
//! Peak resident memory of the whole bench process is printed at the end.

use std::path::Path;

use jig_engine::config::HostConfig;
use jig_engine::plan;
use jig_engine::providers::ProviderSet;

fn main() {
    divan::main();
    let mut usage = std::mem::MaybeUninit::<libc_rusage::Rusage>::zeroed();
    // SAFETY: getrusage writes a complete rusage into the buffer we own.
    let usage = unsafe {
        libc_rusage::getrusage(0, usage.as_mut_ptr());
        usage.assume_init()
    };
    eprintln!("peak resident memory: {} MiB", usage.ru_maxrss / 1024);
}

mod libc_rusage {
    #[repr(C)]
    pub struct Rusage {
        pub ru_utime: [i64; 2],
        pub ru_stime: [i64; 2],
        pub ru_maxrss: i64,
        pub rest: [i64; 13],
    }
    extern "C" {
        pub fn getrusage(who: i32, usage: *mut Rusage) -> i32;
    }
}

fn make_project(flows: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("jig.ts"),
        "import { defineJig, discover } from \"@jigging/jig\";\nexport default defineJig({ flows: discover(\"./flows\"), bindings: discover(\"./bindings\") });\n",
    )
    .unwrap();
    for i in 0..flows {
        let flow = dir.path().join(format!("flows/f{i:04}"));
        std::fs::create_dir_all(&flow).unwrap();
        std::fs::write(
            flow.join("FLOW.md"),
            format!("---\nname: f{i:04}\ndescription: Flow number {i}.\n---\n\nBody.\n"),
        )
        .unwrap();
        std::fs::write(flow.join("flow.wasm"), [0u8, 97, 115, 109, 1, 0, 0, 0]).unwrap();
        std::fs::write(flow.join("notes.txt"), "x".repeat(2048)).unwrap();
    }
    dir
}

fn review(root: &Path) -> serde_json::Value {
    let config = HostConfig::default();
    let declarations = jig_project::capture(root).unwrap();
    let candidate = plan::stage(root, declarations).unwrap();
    let providers = ProviderSet::new(Vec::new());
    plan::plan(&candidate, &config, &providers, None).unwrap()
}

#[divan::bench(args = [50, 500], sample_count = 5)]
fn review_project(bencher: divan::Bencher, flows: usize) {
    let project = make_project(flows);
    bencher.bench(|| review(project.path()));
}

/// What `jig run` adds to say whether the live source differs from the
/// admitted bytes (`state::Sources::changed`): the target's Flow and the
/// project's modules, by metadata, in projects of 50 and 500 Flows (the
/// 50-Flow figure is the baseline: the check should not grow with the
/// project).
#[divan::bench(args = [50, 500], sample_count = 20)]
fn source_check(bencher: divan::Bencher, flows: usize) {
    let project = make_project(flows);
    let root = project.path();
    let candidate = plan::stage(root, jig_project::capture(root).unwrap()).unwrap();
    let sources = jig_engine::state::Sources::seen(root, &candidate);
    let target = jig_engine::exec::TargetRef::Flow("flows/f0007".into());
    bencher.bench(|| {
        let changed = sources.changed(root, &target);
        assert!(changed.is_empty(), "{changed:?}");
    });
}
