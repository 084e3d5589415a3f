//! Project Command (`https://jig.md/contracts/project-command` 1.0.0,
//! docs/src/commands.md, seed 003): the reading of a reviewed command
//! entry (its options are refused at review, by jig-project), the
//! validation of a call's input against the Binding's policy, the logical
//! invocation, the tail of collected output, and the exact result value.
//! The host runs the process; nothing here does.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use flow::digest::sha256_digest;
use flow::json::Value;
use jig_provider_api::CallError;
use serde_json::json;

pub const CONTRACT_ID: &str = "https://jig.md/contracts/project-command";
pub const CONTRACT_VERSION: &str = "1.0.0";
pub const CONTRACT_DIGEST: &str =
    "sha256:aed62fe17f01897545f82d7ee91f163a023721431433c8f4f6981b4367c85bcf";

/// Seed 003: a command's timeout when its entry names none.
pub const DEFAULT_TIMEOUT: &str = "10m";
/// Seed 003: characters of the end of stdout and of stderr kept by default.
pub const DEFAULT_TAIL: u64 = 4096;
/// The contract's bound on `stdout.text` / `stderr.text` (characters). Review
/// refuses a larger `tail` with `jig_project::MAX_COMMAND_TAIL`, which
/// jig-engine's tests hold equal to this.
pub const MAX_TAIL: u64 = 65_536;

/// docs/src/commands.md: at most this many candidate files, at least one.
pub const MAX_FILES: usize = 64;
/// docs/src/commands.md: UTF-8 bytes of all candidate file contents together.
pub const MAX_FILES_BYTES: usize = 256 * 1024;
/// Longest candidate file path, in bytes, and most components (the
/// command path bounds of docs/src/commands.md, since entries are among them).
pub const MAX_FILE_PATH_BYTES: usize = 256;
pub const MAX_FILE_PATH_COMPONENTS: usize = 16;
/// Components a candidate may not contain (docs/src/commands.md).
pub const EXCLUDED_COMPONENTS: [&str; 3] = [".git", ".jig", "node_modules"];
/// docs/src/commands.md: arguments of a `run` command.
pub const MAX_ARGS: usize = 32;
pub const MAX_ARG_BYTES: usize = 1024;
/// docs/src/commands.md: bytes of stdin.
pub const MAX_STDIN_BYTES: usize = 16 * 1024;

/// The refusal of a pinned call whose `sha` is not a full commit id (seed 003).
pub fn pin_sha_refusal(command: &str) -> String {
    format!("command \"{command}\" (pin): its input's sha is not a full commit id.")
}

/// A full commit id: 40 (SHA-1) or 64 (SHA-256) lowercase hex digits.
pub fn full_commit_id(sha: &str) -> bool {
    matches!(sha.len(), 40 | 64) && sha.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// What a command runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// `bun <entry> [args]`.
    Run(String),
    /// `bun test <files>`.
    Test(Vec<String>),
}

/// How a secret reaches the command: its value, or the path of a file holding it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretForm {
    Value,
    Path,
}

/// One reviewed command entry, from its normalized policy value.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub name: String,
    pub action: Action,
    pub timeout: Duration,
    pub tail: u64,
    /// Variable → (secret name, form).
    pub env: BTreeMap<String, (String, SecretForm)>,
    pub pin: bool,
}

impl Entry {
    /// Read a normalized (reviewed) entry. An `Err` means the admitted
    /// policy is not one this host wrote.
    pub fn from_policy(name: &str, value: &Value) -> Result<Entry, String> {
        let bad = || format!("the admitted policy of command {name:?} is malformed");
        let action = match (value.get("run"), value.get("test")) {
            (Some(run), None) => Action::Run(run.as_str().ok_or_else(bad)?.to_string()),
            (None, Some(test)) => Action::Test(
                test.as_array()
                    .ok_or_else(bad)?
                    .iter()
                    .map(|t| t.as_str().map(str::to_string).ok_or_else(bad))
                    .collect::<Result<_, _>>()?,
            ),
            _ => return Err(bad()),
        };
        let timeout = value
            .get("timeout")
            .map(|t| t.as_str().and_then(flow::duration::parse).ok_or_else(bad))
            .transpose()?
            .unwrap_or_else(|| flow::duration::parse(DEFAULT_TIMEOUT).expect("the default parses"));
        let tail = match value.get("tail") {
            None => DEFAULT_TAIL,
            Some(t) => t.as_u64().filter(|t| *t <= MAX_TAIL).ok_or_else(bad)?,
        };
        let mut env = BTreeMap::new();
        for (var, secret) in value
            .get("env")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let name = secret.get("name").and_then(Value::as_str).ok_or_else(bad)?;
            let form = match secret.get("kind").and_then(Value::as_str) {
                Some("secret") => SecretForm::Value,
                Some("secretPath") => SecretForm::Path,
                _ => return Err(bad()),
            };
            env.insert(var.clone(), (name.to_string(), form));
        }
        Ok(Entry {
            name: name.to_string(),
            action,
            timeout,
            tail,
            env,
            pin: value.get("pin") == Some(&json!(true)),
        })
    }
}

/// One call's input, checked against the contract's rules and its entry.
#[derive(Debug, Clone)]
pub struct Request {
    pub command: String,
    pub files: BTreeMap<String, String>,
    pub args: Vec<String>,
    pub stdin: String,
}

fn invalid(message: impl Into<String>) -> CallError {
    CallError::operational("INVALID_INPUT", message)
}

/// The command entry the input names in `policy` (the Binding's reviewed
/// `commands`, absent when it has none): `INVALID_INPUT` with details code
/// `PROJECT_COMMAND_UNCONFIGURED` for a name the Binding did not review.
pub fn entry(policy: Option<&Value>, input: &Value) -> Result<Entry, CallError> {
    let name = input
        .get("command")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("command must be a string"))?;
    let Some(value) = policy.and_then(|p| p.get(name)) else {
        return Err(CallError::Operational {
            code: "INVALID_INPUT".into(),
            message: format!("command {name:?} is not configured for this Binding"),
            details: Some(json!({ "code": "PROJECT_COMMAND_UNCONFIGURED", "name": name })),
        });
    };
    Entry::from_policy(name, value)
        .map_err(|message| CallError::operational("UNAVAILABLE", message))
}

/// Check a call's input (already valid against the contract's schema)
/// against the rules the schema cannot state (docs/src/commands.md).
pub fn request(entry: &Entry, input: &Value) -> Result<Request, CallError> {
    let files_value = input
        .get("files")
        .and_then(Value::as_object)
        .ok_or_else(|| invalid("files must be an object"))?;
    if files_value.is_empty() || files_value.len() > MAX_FILES {
        return Err(invalid(format!("files must hold 1 to {MAX_FILES} entries")));
    }
    let mut files = BTreeMap::new();
    let mut total = 0usize;
    for (path, text) in files_value {
        check_file_path(path)?;
        let text = text
            .as_str()
            .ok_or_else(|| invalid(format!("file {path:?} must be text")))?;
        total += text.len();
        files.insert(path.clone(), text.to_string());
    }
    if total > MAX_FILES_BYTES {
        return Err(invalid(format!(
            "files hold {total} bytes, more than {MAX_FILES_BYTES}"
        )));
    }
    // A path that is also the directory of another cannot be both.
    let set: BTreeSet<&str> = files.keys().map(String::as_str).collect();
    for path in &set {
        let mut prefix = String::new();
        for component in path.split('/') {
            if !prefix.is_empty() && set.contains(prefix.as_str()) {
                return Err(invalid(format!(
                    "file {prefix:?} is also a directory of {path:?}"
                )));
            }
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(component);
        }
    }
    let args: Vec<String> = match input.get("args") {
        None => Vec::new(),
        Some(list) => list
            .as_array()
            .ok_or_else(|| invalid("args must be an array of strings"))?
            .iter()
            .map(|a| {
                a.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| invalid("args must be an array of strings"))
            })
            .collect::<Result<_, _>>()?,
    };
    if args.len() > MAX_ARGS {
        return Err(invalid(format!("more than {MAX_ARGS} args")));
    }
    if let Some(arg) = args.iter().find(|a| a.len() > MAX_ARG_BYTES) {
        return Err(invalid(format!(
            "an argument of {} bytes is longer than {MAX_ARG_BYTES}",
            arg.len()
        )));
    }
    if args.iter().any(|a| a.contains('\0')) {
        return Err(invalid("an argument contains NUL"));
    }
    let stdin = match input.get("stdin") {
        None => String::new(),
        Some(s) => s
            .as_str()
            .ok_or_else(|| invalid("stdin must be a string"))?
            .to_string(),
    };
    if stdin.len() > MAX_STDIN_BYTES {
        return Err(invalid(format!(
            "stdin holds {} bytes, more than {MAX_STDIN_BYTES}",
            stdin.len()
        )));
    }
    match &entry.action {
        Action::Run(path) => {
            if !files.contains_key(path) {
                return Err(invalid(format!(
                    "command {:?} runs {path:?}, which the candidate does not contain",
                    entry.name
                )));
            }
        }
        Action::Test(paths) => {
            if !args.is_empty() {
                return Err(invalid(format!(
                    "command {:?} is a test command and takes no args",
                    entry.name
                )));
            }
            if let Some(path) = paths.iter().find(|p| !files.contains_key(*p)) {
                return Err(invalid(format!(
                    "command {:?} tests {path:?}, which the candidate does not contain",
                    entry.name
                )));
            }
        }
    }
    Ok(Request {
        command: entry.name.clone(),
        files,
        args,
        stdin,
    })
}

/// Our credentialed Project Command contract (seed 003): a command whose
/// env names a secret runs against one commit of the project's
/// repository, never against Flow-written files. Its descriptor ships in
/// `providers/builtin/contracts/`.
pub const CREDENTIALED_CONTRACT_ID: &str =
    "https://example.invalid/jig/contracts/project-command-credentialed";
pub const CREDENTIALED_CONTRACT_VERSION: &str = "1.0.0";
pub const CREDENTIALED_CONTRACT_DIGEST: &str =
    "sha256:af9ec6542aa24c7af3feb5c2b21df496d1ad40527c8374b60e2ea5daa0d09d5a";

/// A candidate (1.0.0) call must name a command without secrets.
pub fn candidate_entry(entry: &Entry) -> Result<(), CallError> {
    if entry.env.is_empty() {
        return Ok(());
    }
    Err(invalid(format!(
        "command {:?} names a secret, so it runs against a commit of the project, never a candidate: call it through {CREDENTIALED_CONTRACT_ID}",
        entry.name
    )))
}

/// One credentialed call's input: the commit to run against when the
/// entry is pinned, arguments and stdin as for a candidate call.
#[derive(Debug, Clone)]
pub struct CredentialedRequest {
    pub request: Request,
    /// The full commit id a pinned command names; `None`: `HEAD`.
    pub sha: Option<String>,
}

/// Check a credentialed call's input against its entry (seed 003's `pin`).
pub fn credentialed_request(
    entry: &Entry,
    input: &Value,
) -> Result<CredentialedRequest, CallError> {
    if entry.env.is_empty() {
        return Err(invalid(format!(
            "command {:?} names no secret: call it with a candidate through {CONTRACT_ID}",
            entry.name
        )));
    }
    let sha = input.get("sha").and_then(Value::as_str).map(str::to_string);
    match (&sha, entry.pin) {
        (Some(sha), true) if full_commit_id(sha) => {}
        (_, true) => return Err(invalid(pin_sha_refusal(&entry.name))),
        (Some(_), false) => {
            return Err(invalid(format!(
                "command {:?} is not pinned, so its input names no sha (it runs against HEAD)",
                entry.name
            )))
        }
        (None, false) => {}
    }
    // The argument and stdin rules are the candidate call's; the entry's
    // own files are checked against the commit by the host.
    let mut probe = input.clone();
    let entries = match &entry.action {
        Action::Run(path) => vec![path.clone()],
        Action::Test(paths) => paths.clone(),
    };
    probe["files"] = Value::Object(entries.into_iter().map(|p| (p, json!(""))).collect());
    if let Some(object) = probe.as_object_mut() {
        object.remove("sha");
    }
    let mut request = request(entry, &probe)?;
    request.files.clear();
    Ok(CredentialedRequest { request, sha })
}

/// The text shown in place of a secret's value in collected output.
pub const REDACTED: &str = "[redacted]";

/// Replace every secret value in collected `{text, truncated}`; when the
/// front was cut, also the end of a secret the cut left at the start (any
/// such end: a few characters too many beat a secret's tail shown). The
/// text is kept within `tail` characters.
pub fn redact(collected: &mut Value, secrets: &[String], tail: u64) {
    let Some(text) = collected.get("text").and_then(Value::as_str) else {
        return;
    };
    let mut text = text.to_string();
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        text = text.replace(secret.as_str(), REDACTED);
    }
    if collected.get("truncated") == Some(&json!(true)) {
        for secret in secrets.iter().filter(|s| !s.is_empty()) {
            let cut = (1..secret.len())
                .filter(|i| secret.is_char_boundary(*i))
                .find(|i| text.starts_with(&secret[*i..]));
            if let Some(i) = cut {
                text = format!("{REDACTED}{}", &text[secret.len() - i..]);
            }
        }
    }
    let count = text.chars().count();
    if count as u64 > tail {
        text = text.chars().skip(count - tail as usize).collect();
        collected["truncated"] = json!(true);
    }
    collected["text"] = json!(text);
}

/// Our credentialed contract's closed result: the commit instead of a
/// candidate digest, the rest as for 1.0.0.
pub fn credentialed_result(
    entry: &Entry,
    request: &Request,
    commit: &str,
    evidence: Evidence,
) -> Value {
    let mut value = result(entry, request, evidence);
    if let Some(object) = value.as_object_mut() {
        object.remove("candidateDigest");
        object.insert("commit".into(), json!(commit));
    }
    value
}

/// A candidate path: relative, canonical, bounded, none of
/// [`EXCLUDED_COMPONENTS`] (compared without ASCII case).
fn check_file_path(path: &str) -> Result<(), CallError> {
    let refuse = |why: &str| Err(invalid(format!("file path {path:?} {why}")));
    if path.is_empty() || path.len() > MAX_FILE_PATH_BYTES {
        return refuse(&format!("must be 1 to {MAX_FILE_PATH_BYTES} bytes"));
    }
    if path.starts_with('/') || path.contains('\\') || path.contains('\0') {
        return refuse("must be relative, without backslash or NUL");
    }
    let components: Vec<&str> = path.split('/').collect();
    if components.len() > MAX_FILE_PATH_COMPONENTS {
        return refuse(&format!(
            "has more than {MAX_FILE_PATH_COMPONENTS} components"
        ));
    }
    if components.iter().any(|c| matches!(*c, "" | "." | "..")) {
        return refuse("has an empty, \".\" or \"..\" component");
    }
    if components.iter().any(|c| {
        EXCLUDED_COMPONENTS
            .iter()
            .any(|x| c.eq_ignore_ascii_case(x))
    }) {
        return refuse("has a .git, .jig or node_modules component");
    }
    if path.chars().any(char::is_control) {
        return refuse("contains a control character");
    }
    Ok(())
}

/// The logical argv of a call, as the result reports it (it starts with
/// `bun`; the host adds the runtime's own flags).
pub fn invocation(entry: &Entry, request: &Request) -> Vec<String> {
    let mut argv = vec!["bun".to_string()];
    match &entry.action {
        Action::Run(path) => {
            argv.push(path.clone());
            argv.extend(request.args.iter().cloned());
        }
        Action::Test(paths) => {
            argv.push("test".into());
            argv.extend(paths.iter().cloned());
        }
    }
    argv
}

/// SHA-256 of the canonical JSON/1 of `files`.
pub fn candidate_digest(request: &Request) -> String {
    let files: serde_json::Map<String, Value> = request
        .files
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    sha256_digest(&flow::json::canonical(&Value::Object(files)))
}

/// The end of one output stream, bounded while it is collected: at most
/// `tail` characters are returned, and whether anything was cut.
#[derive(Debug)]
pub struct Tail {
    tail: usize,
    kept: std::collections::VecDeque<u8>,
    dropped: bool,
}

impl Tail {
    pub fn new(tail: u64) -> Tail {
        Tail {
            tail: tail as usize,
            kept: std::collections::VecDeque::new(),
            dropped: false,
        }
    }

    /// Bytes enough for `tail` characters of up to four bytes, plus one
    /// partial character cut at the front.
    fn byte_bound(&self) -> usize {
        self.tail * 4 + 3
    }

    pub fn push(&mut self, bytes: &[u8]) {
        self.kept.extend(bytes);
        let bound = self.byte_bound();
        if self.kept.len() > bound {
            let excess = self.kept.len() - bound;
            self.kept.drain(..excess);
            self.dropped = true;
        }
    }

    /// `{text, truncated}`: invalid UTF-8 is replaced, never refused.
    pub fn finish(self) -> Value {
        let bytes: Vec<u8> = self.kept.into_iter().collect();
        let text = String::from_utf8_lossy(&bytes);
        let count = text.chars().count();
        let (text, cut) = if count > self.tail {
            (text.chars().skip(count - self.tail).collect(), true)
        } else {
            (text.into_owned(), false)
        };
        json!({ "text": text, "truncated": cut || self.dropped })
    }
}

/// Why the command stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    Exited,
    Deadline,
    Cancelled,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Exited => "exited",
            StopReason::Deadline => "deadline",
            StopReason::Cancelled => "cancelled",
        }
    }
}

/// What the host collected from one command process, after its whole
/// tree was killed and its envelope removed.
#[derive(Debug)]
pub struct Evidence {
    pub stdout: Value,
    pub stderr: Value,
    pub exit_code: Option<i32>,
    pub signal: Option<String>,
    pub stop: StopReason,
}

/// The contract's closed result (docs/src/commands.md).
pub fn result(entry: &Entry, request: &Request, evidence: Evidence) -> Value {
    json!({
        "candidateDigest": candidate_digest(request),
        "command": request.command,
        "invocation": invocation(entry, request),
        "stdinDigest": sha256_digest(request.stdin.as_bytes()),
        "stdout": evidence.stdout,
        "stderr": evidence.stderr,
        "exitCode": evidence.exit_code,
        "signal": evidence.signal,
        "stopReason": evidence.stop.as_str(),
        "cleanup": "complete",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_entry() -> Entry {
        Entry::from_policy("cli", &json!({"run": "src/cli.ts"})).unwrap()
    }

    fn files(n: usize) -> Value {
        let map: serde_json::Map<String, Value> = (0..n)
            .map(|i| {
                let path = if i == 0 {
                    "src/cli.ts".to_string()
                } else {
                    format!("f{i}.ts")
                };
                (path, json!(""))
            })
            .collect();
        Value::Object(map)
    }

    fn code(e: CallError) -> String {
        match e {
            CallError::Operational { code, .. } => code,
            other => panic!("{other:?}"),
        }
    }

    /// A command's timeout is any positive duration in `ms`, `s`, `m` or
    /// `h` ([`flow::duration::parse`]), with no bound of its own.
    #[test]
    fn timeouts_are_positive_numbers_with_a_unit() {
        let timeout = |t: &str| {
            Entry::from_policy("cli", &json!({"run": "src/cli.ts", "timeout": t}))
                .map(|e| e.timeout)
        };
        assert_eq!(timeout("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(timeout("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(timeout("48h"), Ok(Duration::from_secs(48 * 3600)));
        for bad in ["0s", "01s", "10", "1d", "99999999999999999h"] {
            assert!(timeout(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn policy_defaults_are_seed_003s() {
        let entry = run_entry();
        assert_eq!(entry.timeout, Duration::from_secs(600));
        assert_eq!(entry.tail, DEFAULT_TAIL);
        assert!(entry.env.is_empty() && !entry.pin);
    }

    #[test]
    fn files_are_bounded_at_their_limits() {
        let entry = run_entry();
        assert!(request(
            &entry,
            &json!({"command": "cli", "files": files(MAX_FILES)})
        )
        .is_ok());
        let past = request(
            &entry,
            &json!({"command": "cli", "files": files(MAX_FILES + 1)}),
        );
        assert_eq!(code(past.unwrap_err()), "INVALID_INPUT");
        let full = "a".repeat(MAX_FILES_BYTES);
        assert!(request(
            &entry,
            &json!({"command": "cli", "files": {"src/cli.ts": full}})
        )
        .is_ok());
        let over = "a".repeat(MAX_FILES_BYTES + 1);
        assert!(request(
            &entry,
            &json!({"command": "cli", "files": {"src/cli.ts": over}})
        )
        .is_err());
        assert!(request(&entry, &json!({"command": "cli", "files": {}})).is_err());
    }

    #[test]
    fn args_and_stdin_are_bounded_at_their_limits() {
        let entry = run_entry();
        let with = |extra: Value| {
            let mut input = json!({"command": "cli", "files": {"src/cli.ts": ""}});
            for (k, v) in extra.as_object().unwrap() {
                input[k] = v.clone();
            }
            request(&entry, &input)
        };
        assert!(with(json!({"args": vec!["a"; MAX_ARGS]})).is_ok());
        assert!(with(json!({"args": vec!["a"; MAX_ARGS + 1]})).is_err());
        assert!(with(json!({"args": ["a".repeat(MAX_ARG_BYTES)]})).is_ok());
        assert!(with(json!({"args": ["a".repeat(MAX_ARG_BYTES + 1)]})).is_err());
        assert!(with(json!({"args": ["a\u{0}b"]})).is_err());
        assert!(with(json!({"stdin": "a".repeat(MAX_STDIN_BYTES)})).is_ok());
        assert!(with(json!({"stdin": "a".repeat(MAX_STDIN_BYTES + 1)})).is_err());
    }

    #[test]
    fn candidates_keep_out_of_protected_and_colliding_paths() {
        let entry = run_entry();
        for bad in [
            json!({"src/cli.ts": "", ".git/config": ""}),
            json!({"src/cli.ts": "", "a/.JIG/x": ""}),
            json!({"src/cli.ts": "", "node_modules/x/index.js": ""}),
            json!({"src/cli.ts": "", "src": ""}),
            json!({"src/cli.ts": "", "../x": ""}),
            json!({"src/cli.ts": "", "/abs": ""}),
            json!({"src/cli.ts": "", "a//b": ""}),
            json!({"other.ts": ""}),
        ] {
            let input = json!({"command": "cli", "files": bad});
            assert_eq!(
                code(request(&entry, &input).unwrap_err()),
                "INVALID_INPUT",
                "{input}"
            );
        }
    }

    #[test]
    fn tests_take_no_args_and_must_exist() {
        let entry = Entry::from_policy("t", &json!({"test": ["a.test.ts"]})).unwrap();
        let ok = json!({"command": "t", "files": {"a.test.ts": ""}});
        assert!(request(&entry, &ok).is_ok());
        let args = json!({"command": "t", "files": {"a.test.ts": ""}, "args": ["x"]});
        assert!(request(&entry, &args).is_err());
        let missing = json!({"command": "t", "files": {"b.test.ts": ""}});
        assert!(request(&entry, &missing).is_err());
    }

    #[test]
    fn an_unconfigured_name_is_refused_with_its_diagnostic() {
        let policy = json!({"cli": {"run": "a.ts"}});
        let input = json!({"command": "other", "files": {"a.ts": ""}});
        match entry(Some(&policy), &input).unwrap_err() {
            CallError::Operational { code, details, .. } => {
                assert_eq!(code, "INVALID_INPUT");
                assert_eq!(details.unwrap()["code"], "PROJECT_COMMAND_UNCONFIGURED");
            }
            other => panic!("{other:?}"),
        }
        assert!(entry(None, &json!({"command": "cli", "files": {}})).is_err());
    }

    #[test]
    fn the_tail_keeps_the_last_characters() {
        let mut tail = Tail::new(4);
        tail.push(b"abcd");
        assert_eq!(tail.finish(), json!({"text": "abcd", "truncated": false}));
        let mut tail = Tail::new(4);
        tail.push(b"abcde");
        assert_eq!(tail.finish(), json!({"text": "bcde", "truncated": true}));
        // Far past the byte bound, in several pushes, multibyte characters.
        let mut tail = Tail::new(3);
        for _ in 0..100 {
            tail.push("é€😀".as_bytes());
        }
        assert_eq!(tail.finish(), json!({"text": "é€😀", "truncated": true}));
        let mut tail = Tail::new(0);
        tail.push(b"x");
        assert_eq!(tail.finish(), json!({"text": "", "truncated": true}));
    }

    #[test]
    fn pinned_calls_need_a_full_commit_id() {
        let pinned = Entry::from_policy(
            "deploy",
            &json!({"run": "a.ts", "env": {"T": {"kind": "secret", "name": "t"}}, "pin": true}),
        )
        .unwrap();
        let sha = "a".repeat(40);
        assert_eq!(
            credentialed_request(&pinned, &json!({"command": "deploy", "sha": sha}))
                .unwrap()
                .sha,
            Some(sha)
        );
        for bad in [
            json!({"command": "deploy"}),
            json!({"command": "deploy", "sha": "abc123"}),
        ] {
            match credentialed_request(&pinned, &bad).unwrap_err() {
                CallError::Operational { code, message, .. } => {
                    assert_eq!(code, "INVALID_INPUT");
                    assert_eq!(message, pin_sha_refusal("deploy"));
                }
                other => panic!("{other:?}"),
            }
        }
        let unpinned = Entry::from_policy(
            "deploy",
            &json!({"run": "a.ts", "env": {"T": {"kind": "secret", "name": "t"}}}),
        )
        .unwrap();
        assert!(credentialed_request(&unpinned, &json!({"command": "deploy"})).is_ok());
        assert!(credentialed_request(
            &unpinned,
            &json!({"command": "deploy", "sha": "a".repeat(40)})
        )
        .is_err());
        assert!(candidate_entry(&unpinned).is_err());
        assert!(credentialed_request(&run_entry(), &json!({"command": "cli"})).is_err());
    }

    #[test]
    fn secrets_are_redacted_also_when_cut() {
        let secrets = vec!["s3cr3t-value".to_string()];
        let mut whole = json!({"text": "token=s3cr3t-value!", "truncated": false});
        redact(&mut whole, &secrets, 4096);
        assert_eq!(whole["text"], "token=[redacted]!");
        let mut cut = json!({"text": "t-value and more", "truncated": true});
        redact(&mut cut, &secrets, 4096);
        assert_eq!(cut["text"], "[redacted] and more");
    }

    #[test]
    fn the_result_names_its_identities() {
        let entry = run_entry();
        let input = json!({"command": "cli", "files": {"src/cli.ts": "x"}, "args": ["--a"]});
        let request = request(&entry, &input).unwrap();
        let value = result(
            &entry,
            &request,
            Evidence {
                stdout: Tail::new(8).finish(),
                stderr: Tail::new(8).finish(),
                exit_code: Some(0),
                signal: None,
                stop: StopReason::Exited,
            },
        );
        assert_eq!(value["invocation"], json!(["bun", "src/cli.ts", "--a"]));
        assert_eq!(
            value["candidateDigest"],
            json!(sha256_digest(br#"{"src/cli.ts":"x"}"#))
        );
        assert_eq!(
            value["stdinDigest"],
            json!("sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        );
        assert_eq!(value["cleanup"], "complete");
    }
}
