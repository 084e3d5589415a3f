//! A hostile Flow as a native executable: the same attacks as
//! `hostile.py`, selected by `{"attack": NAME, ...}`, each reporting what
//! it could and could not do.

use std::io::Read;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use flow_sdk::{handle, HandlerError, RunContext, RunResult};
use serde_json::{json, Map, Value};

const FORK_ATTEMPTS: usize = 1000;
const HOG_CHUNK: usize = 16 * 1024 * 1024;
const HOG_TOTAL: usize = 1024 * 1024 * 1024;

fn errno_name() -> String {
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) => "EAGAIN".into(),
        Some(libc::ESRCH) => "ESRCH".into(),
        Some(libc::EPERM) => "EPERM".into(),
        _ => e.to_string(),
    }
}

fn io_name(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ENOENT) => "ENOENT".into(),
        Some(libc::EACCES) => "EACCES".into(),
        Some(libc::EROFS) => "EROFS".into(),
        Some(libc::ECONNREFUSED) => "ECONNREFUSED".into(),
        Some(libc::ENETUNREACH) => "ENETUNREACH".into(),
        _ => e.to_string(),
    }
}

fn fork_bomb() -> Value {
    let mut forked = 0;
    let mut failure = Value::Null;
    for _ in 0..FORK_ATTEMPTS {
        // SAFETY: the child only calls fork, sleep and _exit.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            failure = json!(errno_name());
            break;
        }
        if pid == 0 {
            unsafe {
                libc::fork();
                libc::sleep(60);
                libc::_exit(0);
            }
        }
        forked += 1;
    }
    json!({"forked": forked, "failure": failure})
}

fn memory_hog(input: &Value) -> Value {
    let total = input["mib"]
        .as_u64()
        .map(|m| m as usize * 1024 * 1024)
        .unwrap_or(HOG_TOTAL);
    let mut held: Vec<Vec<u8>> = Vec::new();
    while held.len() * HOG_CHUNK < total {
        held.push(vec![0x78; HOG_CHUNK]);
    }
    json!({"heldMiB": held.len() * HOG_CHUNK / (1024 * 1024)})
}

fn cpu_spin() -> Value {
    let mut n: u64 = 0;
    loop {
        n = std::hint::black_box(n.wrapping_add(1));
    }
}

fn cpu_share(input: &Value) -> Value {
    let seconds = input["seconds"].as_f64().unwrap_or(1.0);
    let until = std::time::Instant::now() + Duration::from_secs_f64(seconds);
    let mut n: u64 = 0;
    while std::time::Instant::now() < until {
        n = std::hint::black_box(n.wrapping_add(1));
    }
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    json!({"cpuSeconds": ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9})
}

fn daemon() -> Value {
    // SAFETY: the children only call setsid, fork, close, sleep and _exit.
    unsafe {
        let pid = libc::fork();
        if pid == 0 {
            libc::setsid();
            if libc::fork() == 0 {
                for fd in 0..1024 {
                    libc::close(fd);
                }
                libc::sleep(120);
            }
            libc::_exit(0);
        }
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
    }
    json!({"daemonized": true})
}

fn network(input: &Value) -> Value {
    let port = input["port"].as_u64().unwrap_or(1) as u16;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let tcp = match TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
        Ok(_) => "connected".to_string(),
        Err(e) => io_name(&e),
    };
    let name = input["name"].as_str().unwrap_or("example.com");
    let dns = match (name, 443).to_socket_addrs() {
        Ok(_) => "resolved".to_string(),
        Err(e) => format!("failed: {e}"),
    };
    json!({"tcp": tcp, "dns": dns})
}

fn paths(input: &Value) -> Vec<String> {
    input["paths"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| p.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn reads(input: &Value) -> Value {
    let mut report = Map::new();
    for path in paths(input) {
        let entry = if std::path::Path::new(&path).is_dir() {
            std::fs::read_dir(&path).map(|d| {
                let mut names: Vec<String> = d
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect();
                names.sort();
                names.join(" ")
            })
        } else {
            std::fs::File::open(&path).and_then(|f| {
                let mut bytes = Vec::new();
                f.take(4096).read_to_end(&mut bytes)?;
                Ok(String::from_utf8_lossy(&bytes).into_owned())
            })
        };
        let value = match entry {
            Ok(text) => json!({"ok": true, "text": text}),
            Err(e) => json!({"ok": false, "error": io_name(&e)}),
        };
        report.insert(path, value);
    }
    Value::Object(report)
}

fn writes(input: &Value) -> Value {
    let mut report = Map::new();
    let mut targets = paths(input);
    if let Some(dir) = std::env::current_exe().ok().and_then(|e| e.parent().map(|p| p.to_path_buf())) {
        targets.push(dir.join("escape").to_string_lossy().into_owned());
    }
    for path in targets {
        let value = match std::fs::write(&path, "escaped") {
            Ok(()) => json!({"ok": true}),
            Err(e) => json!({"ok": false, "error": io_name(&e)}),
        };
        report.insert(path, value);
    }
    Value::Object(report)
}

fn ptrace(input: &Value) -> Value {
    let mut report = Map::new();
    for pid in input["pids"].as_array().cloned().unwrap_or_default() {
        let pid = pid.as_i64().unwrap_or(0) as libc::pid_t;
        // SAFETY: PTRACE_ATTACH/DETACH take no pointers.
        let r = unsafe {
            libc::ptrace(
                libc::PTRACE_ATTACH,
                pid,
                std::ptr::null_mut::<libc::c_void>(),
                std::ptr::null_mut::<libc::c_void>(),
            )
        };
        let outcome = if r == 0 {
            unsafe {
                libc::ptrace(
                    libc::PTRACE_DETACH,
                    pid,
                    std::ptr::null_mut::<libc::c_void>(),
                    std::ptr::null_mut::<libc::c_void>(),
                );
            }
            "attached".to_string()
        } else {
            errno_name()
        };
        report.insert(pid.to_string(), json!(outcome));
    }
    Value::Object(report)
}

fn fds() -> Value {
    let mut report = Map::new();
    for entry in std::fs::read_dir("/proc/self/fd").into_iter().flatten().flatten() {
        let target = std::fs::read_link(entry.path())
            .map(|t| t.to_string_lossy().into_owned())
            .unwrap_or_else(|e| io_name(&e));
        report.insert(entry.file_name().to_string_lossy().into_owned(), json!(target));
    }
    Value::Object(report)
}

const TERM_MARKER: &[u8] = b"hostile: got SIGTERM\n";

extern "C" fn on_term(_: libc::c_int) {
    // SAFETY: write and _exit are async-signal-safe.
    unsafe {
        libc::write(2, TERM_MARKER.as_ptr().cast(), TERM_MARKER.len());
        libc::_exit(0);
    }
}

/// Says on stderr that it got SIGTERM, then exits: a polite component.
fn term_trap() -> Value {
    // SAFETY: installs a handler that only makes async-signal-safe calls.
    unsafe {
        libc::signal(libc::SIGTERM, on_term as *const () as libc::sighandler_t);
    }
    eprintln!("hostile: waiting");
    loop {
        std::thread::sleep(Duration::from_secs(60));
    }
}

/// Ignores SIGTERM and lingers: only SIGKILL ends it.
fn term_ignore() -> Value {
    // SAFETY: SIG_IGN needs no handler.
    unsafe {
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
    }
    loop {
        std::thread::sleep(Duration::from_secs(60));
    }
}

async fn run(ctx: RunContext) -> Result<RunResult, HandlerError> {
    let input = ctx.input().clone();
    let output = match input["attack"].as_str().unwrap_or("") {
        "fork-bomb" => fork_bomb(),
        "memory-hog" => memory_hog(&input),
        "cpu-spin" => cpu_spin(),
        "cpu-share" => cpu_share(&input),
        "daemon" => daemon(),
        "network" => network(&input),
        "reads" => reads(&input),
        "writes" => writes(&input),
        "ptrace" => ptrace(&input),
        "fds" => fds(),
        "term-trap" => term_trap(),
        "term-ignore" => term_ignore(),
        _ => json!({"ok": true}),
    };
    Ok(RunResult::done(output))
}

fn main() {
    handle(run)
}
