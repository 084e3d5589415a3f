//! Installation verification at review (seed 002 §9): `jig review --yes` of
//! an unchanged project of 500 one-file `flow.py` Flows, under `cached`
//! (digests reused from the private cache) and `strict` (every runtime file
//! hashed again). Both run the real release binary in the same bench run,
//! so their ratio is what the cache saves; the `cached` median is also read
//! against a 0.5 s target.

use std::process::Command;
use std::sync::OnceLock;

const FLOWS: usize = 500;

fn main() {
    fixture();
    divan::main();
}

struct Fixture {
    project: tempfile::TempDir,
    cache_home: tempfile::TempDir,
}

fn fixture() -> &'static Fixture {
    static CELL: OnceLock<Fixture> = OnceLock::new();
    CELL.get_or_init(|| {
        let project = tempfile::tempdir().unwrap();
        let root = project.path();
        std::fs::write(
            root.join("jig.ts"),
            "import { defineJig, discover } from \"@jigging/jig\";\nexport default defineJig({ flows: discover(\"./flows\") });\n",
        )
        .unwrap();
        for i in 0..FLOWS {
            let flow = root.join(format!("flows/f{i:04}"));
            std::fs::create_dir_all(&flow).unwrap();
            std::fs::write(
                flow.join("FLOW.md"),
                format!("---\nname: f{i:04}\ndescription: Flow {i}.\n---\n"),
            )
            .unwrap();
            std::fs::write(
                flow.join("flow.py"),
                "from jiggy.flow import handle\n\nasync def run(ctx):\n    return {\"outcome\": \"done\", \"output\": ctx.input}\n\nhandle(run)\n",
            )
            .unwrap();
        }
        let cache_home = tempfile::tempdir().unwrap();
        let fixture = Fixture {
            project,
            cache_home,
        };
        // The first review admits everything; later ones find it unchanged.
        review(&fixture, "cached");
        fixture
    })
}

fn review(fixture: &Fixture, policy: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_jig"))
        .current_dir(fixture.project.path())
        .env_remove("JIG_CONFIG")
        .env("XDG_CONFIG_HOME", fixture.project.path().join(".config"))
        .env("XDG_CACHE_HOME", fixture.cache_home.path())
        .args(["review", "--yes", "--verification", policy])
        .output()
        .expect("jig runs");
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).ends_with("project is ready\n"));
}

#[divan::bench(args = ["cached", "strict"], sample_count = 10)]
fn review_unchanged_500_flows(policy: &str) {
    review(fixture(), policy);
}
