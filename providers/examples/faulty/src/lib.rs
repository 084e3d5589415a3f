//! Test fixture: serves the kv contract but misbehaves according to the
//! requested key, so the loader tests can watch the host survive it.
//!
//! | key          | behaviour                                         |
//! |--------------|---------------------------------------------------|
//! | `panic`      | panics (a trap in WASM, caught in native)         |
//! | `spin`       | loops forever                                     |
//! | `nap`        | sleeps 3 s (blocked in the host), answers `nap`   |
//! | `grow`       | allocates 128 MiB                                 |
//! | `undeclared` | application error the contract does not declare   |
//! | `bad-code`   | operational error with a code outside Run/1       |
//! | `big-int`    | a value outside JSON/1's number domain            |
//! | `operational`| `RESOURCE_EXHAUSTED` with details                 |
//! | `escape`     | tries files, env, args, network; reports each     |
//! | `config`     | `<settings.marker>:<secret token>`                |
//! | `relay`      | copies port `in` to port `out` as `{seq, value}`, closes `out`, answers `relayed <n>` |
//! | `wait`       | blocks in `next("in")`; answers its failure       |
//! | `send-other` | sends on port `other`; answers its failure        |
//! | anything else| the key itself                                    |
//!
//! The channel keys ignore that the kv contract declares no ports: the
//! loaders hand whatever ports the test supplies, the host is what checks
//! declarations.

use jig_provider_sdk::{serde_json::json, CallError, Channels, Config, Context, Provider, Value};

pub struct Faulty;

impl Provider for Faulty {
    fn contracts() -> Vec<&'static str> {
        vec![include_str!("../../contracts/kv.capability.json")]
    }

    fn call(
        _: &Context,
        _: &str,
        input: Value,
        config: &Config,
        channels: &Channels,
    ) -> Result<Value, CallError> {
        let key = input.get("key").and_then(Value::as_str).unwrap_or_default();
        match key {
            "panic" => panic!("faulty provider panics on purpose"),
            "spin" => spin(),
            "nap" => {
                std::thread::sleep(std::time::Duration::from_millis(3000));
                Ok(json!("nap"))
            }
            "grow" => {
                let block = vec![1u8; 128 << 20];
                Ok(json!(block.iter().map(|&b| b as u64).sum::<u64>()))
            }
            "undeclared" => Err(CallError::application("gone", json!(null))),
            "bad-code" => Err(CallError::operational("NOT_A_CODE", "made up")),
            "big-int" => Ok(json!(9_007_199_254_740_993u64)),
            "operational" => Err(CallError::Operational {
                code: "RESOURCE_EXHAUSTED".to_owned(),
                message: "quota".to_owned(),
                details: Some(json!({"limit": 3})),
            }),
            "escape" => Ok(json!(escape())),
            "config" => {
                let marker = config.settings.get("marker").and_then(Value::as_str);
                let token = config.secrets.get("token");
                Ok(json!(format!(
                    "{}:{}",
                    marker.unwrap_or("-"),
                    token.map_or("-", |t| t)
                )))
            }
            "relay" => {
                let mut n = 0;
                while let Some(item) = channels.next("in")? {
                    channels.send("out", &json!({"seq": item.sequence, "value": item.value}))?;
                    n += 1;
                }
                channels.close("out")?;
                Ok(json!(format!("relayed {n}")))
            }
            "wait" => channels.next("in").map(|_| json!("woke with an item")),
            "send-other" => channels.send("other", &json!(1)).map(|()| json!("sent")),
            other => Ok(json!(other)),
        }
    }
}

/// Reports which ambient authorities the guest can reach, e.g.
/// `fs:denied cwd:denied env:0 args:0 net:denied`.
fn escape() -> String {
    let outcome = |ok: bool| if ok { "reached" } else { "denied" };
    let fs = std::fs::read("/etc/hostname").is_ok() || std::fs::read("/etc/passwd").is_ok();
    let cwd = std::fs::read_dir(".").is_ok();
    let net = std::net::TcpStream::connect("127.0.0.1:80").is_ok()
        || std::net::TcpStream::connect("1.1.1.1:443").is_ok();
    format!(
        "fs:{} cwd:{} env:{} args:{} net:{}",
        outcome(fs),
        outcome(cwd),
        std::env::vars_os().count(),
        std::env::args_os().count(),
        outcome(net)
    )
}

fn spin() -> ! {
    let mut n = 0u64;
    loop {
        n = std::hint::black_box(n.wrapping_add(1));
    }
}

jig_provider_sdk::export_provider!(Faulty);
