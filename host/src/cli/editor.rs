//! `jig editor`: the bundled SDKs where editors and type checkers find
//! them, offline. `@jigging/flow` and `jiggy.flow` are not on the npm
//! registry or PyPI: this `jig` carries them, so it writes them into the
//! project as an install would, where review never looks.
//!
//! - each `flow.ts`/`flow.js` Flow gets `node_modules/@jigging/flow` (the
//!   JavaScript SDK and its type declarations); review leaves a package's
//!   `node_modules` out of what it captures;
//! - the project gets `.jig-sdk/python/jiggy` (the Python SDK), outside
//!   every package;
//! - and, where none exists, `tsconfig.json` (the project's Flows, strict,
//!   ES2022 modules), `pyrightconfig.json` and `mypy.ini` (both pointing
//!   at `.jig-sdk/python`) at the project root, with `.jig-sdk/` and
//!   `node_modules/` added to `.gitignore`.
//!
//! Nothing here is admitted or run; run it again after a fresh clone or an
//! upgrade of `jig`.

use std::path::Path;

use jig_engine::exec::sdk::{JS_SDK, PYTHON_SDK};

use super::review::capture;
use super::{project_root, terminal, CliError, Code};

/// Where the Python SDK is written for editors, below the project root.
pub const PYTHON_DIR: &str = ".jig-sdk/python";
/// Where a JavaScript Flow's editor finds `@jigging/flow`, below the Flow.
const JS_DIR: &str = "node_modules/@jigging/flow";

const TSCONFIG: &str = r#"{
  "compilerOptions": {
    "target": "ES2022",
    "module": "ESNext",
    "moduleResolution": "Bundler",
    "lib": ["ES2022", "DOM"],
    "strict": true,
    "noEmit": true,
    "allowJs": true,
    "checkJs": false
  },
  "include": ["flows/**/*.ts", "flows/**/*.js"],
  "exclude": ["**/node_modules"]
}
"#;

const PYRIGHTCONFIG: &str = r#"{
  "include": ["flows"],
  "extraPaths": [".jig-sdk/python"]
}
"#;

const MYPY_INI: &str =
    "[mypy]\nmypy_path = .jig-sdk/python\n\n[mypy-jiggy.*]\nfollow_imports = silent\n";

/// What `.gitignore` must name so nothing written here is committed.
const IGNORED: [&str; 2] = [".jig-sdk/", "node_modules/"];

pub fn editor(base: &Path) -> Result<u8, CliError> {
    let root = project_root(base)?;
    let flows = capture(&root)?.flows;
    let fault = |path: &Path, e: std::io::Error| {
        CliError::new(Code::Unavailable, format!("{}: {e}", path.display()))
    };
    let python = root.join(PYTHON_DIR);
    write_tree(&python, PYTHON_SDK).map_err(|e| fault(&python, e))?;
    std::fs::write(python.join("jiggy/py.typed"), "").map_err(|e| fault(&python, e))?;
    outln!("wrote {PYTHON_DIR}/jiggy (the Python SDK)");
    for flow in &flows {
        let dir = root.join(flow);
        if !(dir.join("flow.ts").is_file() || dir.join("flow.js").is_file()) {
            continue;
        }
        let js = dir.join(JS_DIR);
        write_tree(&js, JS_SDK).map_err(|e| fault(&js, e))?;
        outln!(
            "wrote {}/{JS_DIR} (the JavaScript SDK and its types)",
            terminal::escape(flow)
        );
    }
    for (name, text) in [
        ("tsconfig.json", TSCONFIG),
        ("pyrightconfig.json", PYRIGHTCONFIG),
        ("mypy.ini", MYPY_INI),
    ] {
        let path = root.join(name);
        if path.exists() {
            outln!("kept {name} (it exists)");
            continue;
        }
        std::fs::write(&path, text).map_err(|e| fault(&path, e))?;
        outln!("wrote {name}");
    }
    let ignore = root.join(".gitignore");
    let kept = std::fs::read_to_string(&ignore).unwrap_or_default();
    let missing: Vec<&str> = IGNORED
        .into_iter()
        .filter(|line| !kept.lines().any(|l| l.trim() == *line))
        .collect();
    if !missing.is_empty() {
        let mut text = kept;
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        for line in &missing {
            text.push_str(line);
            text.push('\n');
        }
        std::fs::write(&ignore, text).map_err(|e| fault(&ignore, e))?;
        outln!(".gitignore now names {}", missing.join(" and "));
    }
    Ok(0)
}

/// `files` (relative path, bytes) written below `dir`, replacing what
/// they name.
fn write_tree(dir: &Path, files: &[(&str, &[u8])]) -> std::io::Result<()> {
    for (relative, bytes) in files {
        let path = dir.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, bytes)?;
    }
    Ok(())
}

/// `jig lock PACKAGE`: resolve the package's npm dependencies into its
/// `bun.lock` (`jig_engine::run::trial::lock`: Bun in the envelope, the
/// configured registry only, the bundled SDK left out, as review's
/// resolution), then write it beside its `package.json` (atomically). The one command
/// that writes a lock into source: review never does.
pub fn lock(base: &Path, package: &Path, config: Option<&Path>) -> Result<u8, CliError> {
    let dir = base.join(package);
    let shown = terminal::escape(&package.display().to_string());
    if !dir.join("package.json").is_file() {
        return Err(CliError::new(
            Code::Usage,
            format!("{shown} has no package.json: name a Flow's package directory"),
        ));
    }
    let config = super::load_config(config)?;
    eprintln!(
        "Resolving dependencies for {shown} from {}. Bun may contact dependency-selected \
         public or private-network services; requests cannot be undone. {}",
        terminal::escape(&jig_engine::plan::prepare::registry(&config)),
        jig_engine::plan::prepare::RESOLUTION_REACH
    );
    let locked = jig_engine::run::trial::lock(&dir, &config, &mut |_| {})
        .map_err(super::exec::trial_error)?;
    let Some(bytes) = locked else {
        outln!("{shown} has no runtime dependencies besides the bundled SDK: nothing to lock");
        return Ok(0);
    };
    // Whole or not at all, and durable, as the host writes its own files.
    jig_engine::state::write_atomic(&dir.join("bun.lock"), &bytes)?;
    outln!("wrote {shown}/bun.lock; commit it, then jig review");
    Ok(0)
}
