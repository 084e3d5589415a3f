//! The long soak: many Runs through `jig serve` with
//! `[retention]` on, sampling as it goes the disk `.jig/` takes, the
//! daemon's RSS, and how long the Run list and a key lookup take. Writes
//! `soak.csv` and `soak.png` (disk and RSS against Runs) to
//! `$SOAK_OUT` (default: cargo's bench scratch directory) and prints the
//! verdicts: every Run exactly one terminal, nothing pending left, list and
//! key lookup at the end against the start.
//!
//! `cargo bench -p jig --bench soak` runs 20,000 Runs (of the `jig` in
//! `JIG_BENCH_BINARY`, when set, else the one built with it); `SOAK_RUNS`,
//! `SOAK_KEEP` (`max-runs`, default 1000), `SOAK_SAMPLE` (Runs between
//! samples, default 250) and `SOAK_CLIENTS` (default 8) change it. A short
//! form, to check the command line and the plot (about a minute, built
//! without optimisation):
//!
//! ```text
//! SOAK_RUNS=200 SOAK_KEEP=20 SOAK_SAMPLE=20 SOAK_OUT=/tmp/soak \
//!     cargo bench -p jig --bench soak --profile dev
//! ```
//!
//! The CI form is `host/tests/all/retention.rs`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::BodyExt;

const FLOW_MD: &str = "---\nname: echo\ndescription: Answers its input.\n---\n";
const FLOW_PY: &str = "from jiggy.flow import handle\n\nasync def run(ctx):\n    return {\"outcome\": \"done\", \"output\": ctx.input}\n\nhandle(run)\n";
const JIG_TS: &str = "import { defineJig, discover } from \"@jigging/jig\";\n\nexport default defineJig({\n  flows: discover(\"./flows\"),\n  bindings: discover(\"./bindings\"),\n});\n";

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The `jig` soaked: `JIG_BENCH_BINARY` (a release build kept aside), or
/// the one this bench was built with.
fn binary() -> PathBuf {
    std::env::var_os("JIG_BENCH_BINARY")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_jig")))
}

fn jig(dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(binary());
    command
        .current_dir(dir)
        .env_remove("JIG_CONFIG")
        .env_remove("JIG_SERVER")
        .env("XDG_CONFIG_HOME", dir.join(".config"))
        .env("NO_COLOR", "1")
        .args(args)
        .stdin(Stdio::null());
    command
}

/// One request over the socket: (status, body).
async fn request(socket: &Path, method: &str, path: &str, body: Option<String>) -> (u16, Vec<u8>) {
    let stream = tokio::net::UnixStream::connect(socket).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(connection);
    let request = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header(hyper::header::HOST, "localhost")
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(http_body_util::Full::new(axum::body::Bytes::from(
            body.unwrap_or_default(),
        )))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, body.to_vec())
}

/// Bytes of the regular files below `path`.
fn disk(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return if meta.is_file() { meta.len() } else { 0 };
    }
    std::fs::read_dir(path)
        .map(|d| d.flatten().map(|e| disk(&e.path())).sum())
        .unwrap_or(0)
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

struct Sample {
    runs: usize,
    disk: u64,
    rss_kib: u64,
    list_ms: f64,
    key_ms: f64,
    seconds: f64,
}

/// The median of five timings of `what`, in milliseconds.
fn median_ms(
    runtime: &tokio::runtime::Runtime,
    mut what: impl FnMut() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>,
) -> f64 {
    let mut times: Vec<f64> = (0..5)
        .map(|_| {
            let started = Instant::now();
            runtime.block_on(what());
            started.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    times[2]
}

fn main() {
    let total = setting("SOAK_RUNS", 20_000);
    let keep = setting("SOAK_KEEP", 1000);
    let every = setting("SOAK_SAMPLE", 250).max(1);
    let clients = setting("SOAK_CLIENTS", 8).max(1);
    let out = std::env::var_os("SOAK_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("soak"));
    std::fs::create_dir_all(&out).unwrap();

    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("p");
    std::fs::create_dir_all(root.join("flows/echo")).unwrap();
    std::fs::write(root.join("jig.ts"), JIG_TS).unwrap();
    std::fs::write(root.join("flows/echo/FLOW.md"), FLOW_MD).unwrap();
    std::fs::write(root.join("flows/echo/flow.py"), FLOW_PY).unwrap();
    let review = jig(&root, &["review", "--yes"]).output().unwrap();
    assert!(review.status.success(), "{review:?}");
    let config = outer.path().join("host.toml");
    std::fs::write(
        &config,
        format!("[retention]\nmax-runs = {keep}\ninterval = \"2s\"\n"),
    )
    .unwrap();
    let socket = outer.path().join("jig.sock");
    let mut daemon: Child = jig(&root, &["serve", "--socket"])
        .arg(&socket)
        .args(["--max-queued-runs", "256", "--config"])
        .arg(&config)
        .arg("-C")
        .arg(&root)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(out.join("serve.log")).unwrap())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(started.elapsed() < Duration::from_secs(60), "no daemon");
        std::thread::sleep(Duration::from_millis(50));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // The keyed Run the lookups replay (kept: inside the key window).
    let keyed = r#"{"target":"flow:flows/echo","input":"probe","key":"probe"}"#.to_string();
    let (status, _) = runtime.block_on(request(
        &socket,
        "POST",
        "/v1/projects/p/runs",
        Some(keyed.clone()),
    ));
    assert_eq!(status, 200);
    let probe = |runtime: &tokio::runtime::Runtime| {
        let list = median_ms(runtime, || {
            let socket = socket.clone();
            Box::pin(async move {
                let (status, _) =
                    request(&socket, "GET", "/v1/projects/p/runs?limit=100", None).await;
                assert_eq!(status, 200);
            })
        });
        let key = median_ms(runtime, || {
            let (socket, keyed) = (socket.clone(), keyed.clone());
            Box::pin(async move {
                let (status, _) =
                    request(&socket, "POST", "/v1/projects/p/runs", Some(keyed)).await;
                assert_eq!(status, 200);
            })
        });
        (list, key)
    };

    let next = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let soak_started = Instant::now();
    let workers: Vec<_> = (0..clients)
        .map(|_| {
            let (next, done, socket) = (next.clone(), done.clone(), socket.clone());
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                let mut seen = Vec::new();
                loop {
                    let n = next.fetch_add(1, Ordering::SeqCst);
                    if n >= total {
                        return seen;
                    }
                    let body = format!(r#"{{"target":"flow:flows/echo","input":{n}}}"#);
                    let (status, body) = runtime.block_on(request(
                        &socket,
                        "POST",
                        "/v1/projects/p/runs",
                        Some(body),
                    ));
                    let terminal: serde_json::Value = serde_json::from_slice(&body).unwrap();
                    assert_eq!(status, 200, "{terminal}");
                    assert_eq!(terminal["status"], "succeeded", "{terminal}");
                    seen.push(terminal["output"].as_u64().unwrap() as usize);
                    done.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    let mut samples = Vec::new();
    let mut sample = |runtime: &tokio::runtime::Runtime, runs: usize| {
        let (list_ms, key_ms) = probe(runtime);
        let s = Sample {
            runs,
            disk: disk(&root.join(".jig")),
            rss_kib: rss_kib(daemon.id()),
            list_ms,
            key_ms,
            seconds: soak_started.elapsed().as_secs_f64(),
        };
        eprintln!(
            "soak: {} Runs, .jig {} KiB, RSS {} KiB, list {:.1} ms, key {:.1} ms, {:.0} s",
            s.runs,
            s.disk / 1024,
            s.rss_kib,
            s.list_ms,
            s.key_ms,
            s.seconds
        );
        samples.push(s);
    };
    sample(&runtime, 0);
    let mut next_sample = every;
    while done.load(Ordering::SeqCst) < total {
        std::thread::sleep(Duration::from_millis(100));
        let now = done.load(Ordering::SeqCst);
        if now >= next_sample {
            sample(&runtime, now);
            next_sample = now + every;
        }
    }
    let mut outputs = BTreeSet::new();
    let mut answered = 0;
    for worker in workers {
        for n in worker.join().unwrap() {
            answered += 1;
            outputs.insert(n);
        }
    }
    // Let the last sweeps run, then the final sample.
    std::thread::sleep(Duration::from_secs(5));
    sample(&runtime, total);
    let (_, metrics) = runtime.block_on(request(&socket, "GET", "/metrics", None));
    let metrics = String::from_utf8_lossy(&metrics).into_owned();
    let (_, listed) = runtime.block_on(request(
        &socket,
        "GET",
        "/v1/projects/p/runs?limit=100000",
        None,
    ));
    let listed: serde_json::Value = serde_json::from_slice(&listed).unwrap();
    let listed = listed["runs"].as_array().cloned().unwrap_or_default();
    let pending = listed.iter().filter(|r| r["terminal"].is_null()).count();
    let _ = daemon.kill();
    let _ = daemon.wait();

    let csv = out.join("soak.csv");
    let mut text = String::from("runs,jig_bytes,rss_kib,list_ms,key_lookup_ms,seconds\n");
    for s in &samples {
        text += &format!(
            "{},{},{},{:.3},{:.3},{:.1}\n",
            s.runs, s.disk, s.rss_kib, s.list_ms, s.key_ms, s.seconds
        );
    }
    std::fs::write(&csv, text).unwrap();
    let png = out.join("soak.png");
    plot::write(&png, &samples);
    let (first, last) = (&samples[1.min(samples.len() - 1)], samples.last().unwrap());
    println!(
        "soak: {total} Runs in {:.0} s with max-runs {keep}; every Run one terminal: {}; \
         retained {} ({pending} pending); .jig {} KiB at the first sample, {} KiB at the end; \
         RSS {} KiB, {} KiB; list {:.1} ms, {:.1} ms; key lookup {:.1} ms, {:.1} ms",
        last.seconds,
        answered == total && outputs.len() == total,
        listed.len(),
        first.disk / 1024,
        last.disk / 1024,
        first.rss_kib,
        last.rss_kib,
        first.list_ms,
        last.list_ms,
        first.key_ms,
        last.key_ms,
    );
    println!("soak: {} and {}", csv.display(), png.display());
    assert_eq!(answered, total, "every Run answered once");
    assert_eq!(outputs.len(), total, "every Run its own terminal");
    assert_eq!(pending, 0, "nothing pending left");
    assert!(metrics.contains("jig_active_runs 0"), "{metrics}");
}

/// A PNG of two panels, disk (top) and RSS (bottom) against Runs, drawn
/// by hand (no plotting crate is available offline): axes with their
/// labels and units, a tick value per quarter, a legend, and the curves.
/// The text is a 5x7 bitmap font of the few characters the labels use.
/// The CSV carries the numbers.
mod plot {
    use super::Sample;

    const W: usize = 800;
    const H: usize = 640;
    /// Where the plotting area of each panel begins and ends, across.
    const LEFT: i64 = 110;
    const RIGHT: i64 = W as i64 - 40;
    const PANEL_HEIGHT: i64 = 210;
    const BLACK: [u8; 3] = [0, 0, 0];
    const DISK: [u8; 3] = [31, 119, 180];
    const RSS: [u8; 3] = [214, 39, 40];
    /// Each glyph pixel is this many canvas pixels square.
    const SCALE: i64 = 2;
    /// A glyph's advance: 5 columns and a space.
    const ADVANCE: i64 = 6 * SCALE;

    /// The rows of a 5x7 glyph (bit 4 leftmost); blank for a character
    /// the labels do not use.
    fn glyph(c: char) -> [u8; 7] {
        match c {
            '0' => [0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E],
            '1' => [0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E],
            '2' => [0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F],
            '3' => [0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E],
            '4' => [0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02],
            '5' => [0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E],
            '6' => [0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E],
            '7' => [0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08],
            '8' => [0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E],
            '9' => [0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C],
            '.' => [0, 0, 0, 0, 0, 0x0C, 0x0C],
            '(' => [0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02],
            ')' => [0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08],
            'B' => [0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E],
            'M' => [0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11],
            'R' => [0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11],
            'S' => [0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E],
            'a' => [0, 0, 0x0E, 0x01, 0x0F, 0x11, 0x0F],
            'd' => [0x01, 0x01, 0x0D, 0x13, 0x11, 0x11, 0x0F],
            'e' => [0, 0, 0x0E, 0x11, 0x1F, 0x10, 0x0E],
            'f' => [0x06, 0x09, 0x08, 0x1C, 0x08, 0x08, 0x08],
            'g' => [0, 0x0F, 0x11, 0x11, 0x0F, 0x01, 0x0E],
            'i' => [0x04, 0, 0x0C, 0x04, 0x04, 0x04, 0x0E],
            'j' => [0x02, 0, 0x06, 0x02, 0x02, 0x12, 0x0C],
            'k' => [0x10, 0x10, 0x12, 0x14, 0x18, 0x14, 0x12],
            'm' => [0, 0, 0x1A, 0x15, 0x15, 0x11, 0x11],
            'n' => [0, 0, 0x16, 0x19, 0x11, 0x11, 0x11],
            'o' => [0, 0, 0x0E, 0x11, 0x11, 0x11, 0x0E],
            's' => [0, 0, 0x0E, 0x10, 0x0E, 0x01, 0x1E],
            'u' => [0, 0, 0x11, 0x11, 0x11, 0x13, 0x0D],
            _ => [0; 7],
        }
    }

    struct Canvas(Vec<[u8; 3]>);

    impl Canvas {
        fn set(&mut self, x: i64, y: i64, c: [u8; 3]) {
            if (0..W as i64).contains(&x) && (0..H as i64).contains(&y) {
                self.0[y as usize * W + x as usize] = c;
            }
        }
        fn line(&mut self, (x0, y0): (i64, i64), (x1, y1): (i64, i64), c: [u8; 3]) {
            let steps = (x1 - x0).abs().max((y1 - y0).abs()).max(1);
            for i in 0..=steps {
                let x = x0 + (x1 - x0) * i / steps;
                let y = y0 + (y1 - y0) * i / steps;
                for d in 0..2 {
                    self.set(x, y + d, c);
                }
            }
        }
        fn fill(&mut self, (x0, y0): (i64, i64), (w, h): (i64, i64), c: [u8; 3]) {
            for y in y0..y0 + h {
                for x in x0..x0 + w {
                    self.set(x, y, c);
                }
            }
        }
        /// `text` with its top left at (x, y), left to right; or, `upward`,
        /// with its bottom left there, read bottom to top (a y axis label).
        fn text(&mut self, (x, y): (i64, i64), text: &str, c: [u8; 3], upward: bool) {
            for (i, ch) in text.chars().enumerate() {
                for (row, bits) in glyph(ch).iter().enumerate() {
                    for col in 0..5i64 {
                        if bits & (0x10 >> col) == 0 {
                            continue;
                        }
                        let along = i as i64 * ADVANCE + col * SCALE;
                        let (px, py) = match upward {
                            false => (x + along, y + row as i64 * SCALE),
                            true => (x + row as i64 * SCALE, y - along - SCALE),
                        };
                        self.fill((px, py), (SCALE, SCALE), c);
                    }
                }
            }
        }
    }

    fn width(text: &str) -> i64 {
        text.chars().count() as i64 * ADVANCE
    }

    /// A tick value, with the decimals a panel whose top is `max` needs
    /// to tell its quarters apart.
    fn tick(value: f64, max: f64) -> String {
        let decimals = match max {
            m if m >= 100.0 => 0,
            m if m >= 10.0 => 1,
            m if m >= 1.0 => 2,
            _ => 3,
        };
        format!("{value:.decimals$}")
    }

    /// One panel at `top`: grid, axes, tick values per quarter, the y
    /// label (`y_label`, its unit in it), the x label, and the curve.
    fn panel(canvas: &mut Canvas, top: i64, points: &[(f64, f64)], y_label: &str, color: [u8; 3]) {
        let grey = [200, 200, 200];
        let bottom = top + PANEL_HEIGHT;
        let max_x = points.iter().map(|p| p.0).fold(1.0, f64::max);
        let max_y = points.iter().map(|p| p.1).fold(0.1, f64::max);
        for q in 0..=4 {
            let y = bottom - PANEL_HEIGHT * q / 4;
            canvas.line((LEFT, y), (RIGHT, y), grey);
            let value = tick(max_y * q as f64 / 4.0, max_y);
            canvas.text((LEFT - 8 - width(&value), y - 7), &value, BLACK, false);
            let x = LEFT + (RIGHT - LEFT) * q / 4;
            canvas.line((x, bottom), (x, bottom + 5), BLACK);
            let runs = format!("{:.0}", max_x * q as f64 / 4.0);
            let at = (x - width(&runs) / 2).min(W as i64 - 4 - width(&runs));
            canvas.text((at, bottom + 9), &runs, BLACK, false);
        }
        canvas.line((LEFT, top), (LEFT, bottom), BLACK);
        canvas.line((LEFT, bottom), (RIGHT, bottom), BLACK);
        let middle = top + PANEL_HEIGHT / 2 + width(y_label) / 2;
        canvas.text((8, middle), y_label, BLACK, true);
        let x_label = "Runs";
        let center = (LEFT + RIGHT) / 2 - width(x_label) / 2;
        canvas.text((center, bottom + 29), x_label, BLACK, false);
        let at = |(x, y): (f64, f64)| {
            (
                LEFT + ((x / max_x) * (RIGHT - LEFT) as f64) as i64,
                bottom - ((y / max_y) * PANEL_HEIGHT as f64) as i64,
            )
        };
        for pair in points.windows(2) {
            canvas.line(at(pair[0]), at(pair[1]), color);
        }
    }

    /// The legend, across the top: a swatch and the name of each curve.
    fn legend(canvas: &mut Canvas, entries: &[(&str, [u8; 3])]) {
        let mut x = LEFT;
        for (name, color) in entries {
            canvas.fill((x, 12), (24, 6), *color);
            canvas.text((x + 32, 8), name, BLACK, false);
            x += 32 + width(name) + 40;
        }
    }

    pub fn write(path: &std::path::Path, samples: &[Sample]) {
        const MIB: f64 = 1024.0 * 1024.0;
        let mut canvas = Canvas(vec![[255, 255, 255]; W * H]);
        let disk: Vec<(f64, f64)> = samples
            .iter()
            .map(|s| (s.runs as f64, s.disk as f64 / MIB))
            .collect();
        let rss: Vec<(f64, f64)> = samples
            .iter()
            .map(|s| (s.runs as f64, s.rss_kib as f64 / 1024.0))
            .collect();
        legend(
            &mut canvas,
            &[("disk of .jig (MiB)", DISK), ("daemon RSS (MiB)", RSS)],
        );
        panel(&mut canvas, 45, &disk, "disk of .jig (MiB)", DISK);
        panel(
            &mut canvas,
            45 + PANEL_HEIGHT + 85,
            &rss,
            "daemon RSS (MiB)",
            RSS,
        );
        let mut raw = Vec::with_capacity(H * (1 + 3 * W));
        for row in canvas.0.chunks(W) {
            raw.push(0);
            for px in row {
                raw.extend_from_slice(px);
            }
        }
        let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
        let mut chunk = |kind: &[u8], data: &[u8]| {
            png.extend_from_slice(&(data.len() as u32).to_be_bytes());
            let mut crc = crc32fast::Hasher::new();
            crc.update(kind);
            crc.update(data);
            png.extend_from_slice(kind);
            png.extend_from_slice(data);
            png.extend_from_slice(&crc.finalize().to_be_bytes());
        };
        let mut header = Vec::new();
        header.extend_from_slice(&(W as u32).to_be_bytes());
        header.extend_from_slice(&(H as u32).to_be_bytes());
        header.extend_from_slice(&[8, 2, 0, 0, 0]);
        chunk(b"IHDR", &header);
        chunk(
            b"IDAT",
            &miniz_oxide::deflate::compress_to_vec_zlib(&raw, 6),
        );
        chunk(b"IEND", &[]);
        std::fs::write(path, png).unwrap();
    }
}
