//! The added cost per Run of the contained envelope (cgroup + bubblewrap)
//! against the process-group launch of the same component, both measured
//! in one run: spawn, wait for the leader, clean up (kill, wait empty,
//! remove the cgroups). The component is the smallest Python program the
//! Python recipe would start (`python3 -c pass`) and `/bin/true` as the
//! floor; the Run/1 exchange itself is the same in both envelopes and not
//! part of the difference. The `_with_output` pair adds the writable
//! attachment: the contained envelope mounts its bounded tmpfs and hands it
//! back by descriptor (bubblewrap `--info-fd`/`--block-fd`).

use std::path::PathBuf;
use std::sync::OnceLock;

use jig_sandbox::{Launch, ProcessGroup, Sandbox};

fn main() {
    divan::main();
}

struct Fixture {
    runtime: tokio::runtime::Runtime,
    contained: Box<dyn Sandbox>,
    dir: tempfile::TempDir,
}

fn fixture() -> &'static Fixture {
    static CELL: OnceLock<Fixture> = OnceLock::new();
    CELL.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("package")).unwrap();
        std::fs::create_dir_all(dir.path().join("scratch")).unwrap();
        std::fs::create_dir_all(dir.path().join("output")).unwrap();
        let contained = jig_sandbox::contained(&jig_sandbox::Containment::default())
            .expect("this machine supports the contained envelope");
        Fixture {
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap(),
            contained: Box::new(contained),
            dir,
        }
    })
}

fn launch(program: &str, args: &[&str]) -> Launch {
    let dir = fixture().dir.path();
    Launch {
        args: args.iter().map(Into::into).collect(),
        env: vec![("LANG".into(), "C.UTF-8".into())],
        // A Flow's scratch and /tmp, bounded tmpfs as the engine makes them.
        scratch_bytes: Some(jig_sandbox::DEFAULT_SCRATCH_BYTES),
        ..Launch::new(
            PathBuf::from(program),
            dir.join("package"),
            dir.join("scratch"),
        )
    }
}

/// The same launch with the writable attachment: a bounded tmpfs handed
/// back by descriptor (contained) or the host directory (process group).
fn with_output(mut launch: Launch) -> Launch {
    launch
        .attachments
        .push((fixture().dir.path().join("output"), true));
    launch
}

fn one_run(sandbox: &dyn Sandbox, launch: &Launch) {
    fixture().runtime.block_on(async {
        let mut contained = sandbox.spawn(launch).expect("spawns");
        let status = contained.child.wait().await.expect("waits");
        assert!(status.success());
        contained.cleanup().expect("cleans up");
        let outputs = contained.take_outputs();
        assert_eq!(outputs.len(), launch.attachments.len());
    });
}

#[divan::bench(sample_count = 40)]
fn true_process_group() {
    one_run(&ProcessGroup, &launch("/bin/true", &[]));
}

#[divan::bench(sample_count = 40)]
fn true_contained() {
    one_run(fixture().contained.as_ref(), &launch("/bin/true", &[]));
}

#[divan::bench(sample_count = 40)]
fn true_process_group_with_output() {
    one_run(&ProcessGroup, &with_output(launch("/bin/true", &[])));
}

#[divan::bench(sample_count = 40)]
fn true_contained_with_output() {
    one_run(
        fixture().contained.as_ref(),
        &with_output(launch("/bin/true", &[])),
    );
}

#[divan::bench(sample_count = 20)]
fn python_process_group() {
    one_run(&ProcessGroup, &launch("/usr/bin/python3", &["-c", "pass"]));
}

#[divan::bench(sample_count = 20)]
fn python_contained() {
    one_run(
        fixture().contained.as_ref(),
        &launch("/usr/bin/python3", &["-c", "pass"]),
    );
}
