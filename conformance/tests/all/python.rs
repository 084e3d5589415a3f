//! The same corpus against the bundled Python SDK's components: two
//! independent SDKs, one runner. Request-lifetime is left to the Python
//! suite's batched test (65,537 sequential round trips take seconds there).

use flow_conformance::{Component, Target, CASES};

fn python(component: &str) -> Component {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../host/python");
    Component {
        argv: vec![
            "/usr/bin/env".into(),
            format!("PYTHONPATH={root}"),
            "PYTHONDONTWRITEBYTECODE=1".into(),
            "python3".into(),
            format!("{root}/tests/components/{component}.py"),
        ],
    }
}

#[test]
fn python_components_pass_the_corpus() {
    let mut failures = Vec::new();
    let mut ran = 0;
    for case in CASES {
        let component = match case.target {
            Target::Standard => python("standard"),
            Target::Matrix => python("matrix"),
            Target::Channels => python("channels"),
            Target::Broadcast => python("broadcast"),
            Target::ChannelWiring => python("channel_wiring"),
        };
        if case.name == "request-lifetime-ceiling" {
            continue;
        }
        ran += 1;
        if let Err(reason) = (case.run)(&component) {
            failures.push(format!("{}: {reason}", case.name));
        }
    }
    assert!(ran >= 20, "only {ran} cases ran");
    assert!(failures.is_empty(), "{failures:#?}");
}
