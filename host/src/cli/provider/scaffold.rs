//! `jig provider new NAME --lang rust|python|js [DIR]`: a provider project
//! to start from — a contract descriptor with one method to edit, the
//! provider source serving it, a test (`test.sh`: build the component and
//! call it through `jig provider call`), and a README with the build
//! command and what the toolchain needs.
//!
//! The Rust scaffold depends on the guest SDK by path (the SDK is not
//! published): the one `--sdk` names, else the copy installed beside this
//! jig, else the one in the checkout this jig was built in.

use std::path::{Path, PathBuf};

use super::super::{sdk, CliError, Code};

/// Where an installed jig keeps the provider SDK's sources (with the WIT
/// world it binds, `../wit`), from its executable.
const INSTALLED_PROVIDER_SDK: &str = "../share/jig/providers/sdk";
/// The provider SDK of the checkout this jig was built in, if that
/// checkout is still there.
const CHECKOUT_PROVIDER_SDK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../providers/sdk");

/// The longest provider name (it becomes a crate, file and URI segment).
pub const MAX_NAME_CHARS: usize = 64;

/// The language of a scaffold.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    Rust,
    Python,
    Js,
}

const WIT: &str = include_str!("../../../../providers/wit/provider.wit");
const CONTRACT: &str = include_str!("templates/contract.capability.json");

/// (path in the scaffold, template) per language; `@NAME@` becomes the
/// contract file's name; `test.sh` is made executable.
fn files(lang: Lang) -> Vec<(&'static str, &'static str)> {
    match lang {
        Lang::Rust => vec![
            ("Cargo.toml", include_str!("templates/rust/Cargo.toml")),
            ("src/lib.rs", include_str!("templates/rust/lib.rs")),
            ("README.md", include_str!("templates/rust/README.md")),
            ("test.sh", include_str!("templates/rust/test.sh")),
        ],
        Lang::Python => vec![
            ("app.py", include_str!("templates/python/app.py")),
            ("README.md", include_str!("templates/python/README.md")),
            ("test.sh", include_str!("templates/python/test.sh")),
            ("wit/provider.wit", WIT),
        ],
        Lang::Js => vec![
            ("provider.js", include_str!("templates/js/provider.js")),
            ("README.md", include_str!("templates/js/README.md")),
            ("test.sh", include_str!("templates/js/test.sh")),
            ("wit/provider.wit", WIT),
        ],
    }
}

/// Is `name` a lower-case name usable as crate, file and URI segment?
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && name.len() <= MAX_NAME_CHARS
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-')
}

pub fn new(
    name: &str,
    lang: Lang,
    dir: Option<&Path>,
    sdk: Option<&Path>,
    base: &Path,
) -> Result<u8, CliError> {
    let invalid = |message: String| CliError::new(Code::InvalidRequest, message);
    if !valid_name(name) {
        return Err(invalid(format!(
            "{name:?} is not a provider name (a lower-case letter, then letters, digits and '-'; at most {MAX_NAME_CHARS})"
        )));
    }
    let dir = base.join(dir.map_or_else(|| PathBuf::from(name), Path::to_path_buf));
    if std::fs::read_dir(&dir).is_ok_and(|mut d| d.next().is_some()) {
        return Err(invalid(format!(
            "{} exists and is not empty",
            dir.display()
        )));
    }
    let sdk = match (lang, sdk) {
        (Lang::Rust, None) => {
            let found = found_sdk().ok_or_else(|| {
                invalid(
                    "--lang rust needs the provider SDK, and none is installed with this jig \
                     or in the checkout it was built in; pass --sdk PATH (the providers/sdk \
                     directory of a jig checkout)"
                        .to_owned(),
                )
            })?;
            sdk_path(&found)?
        }
        (Lang::Rust, Some(sdk)) => sdk_path(&base.join(sdk))?,
        (_, _) => String::new(),
    };
    if lang == Lang::Rust {
        outln!("using the provider SDK at {sdk}");
    }
    let crate_name = name.replace('-', "_");
    let fill = |text: &str| {
        text.replace("@NAME@", name)
            .replace("@CRATE@", &crate_name)
            .replace("@SDK@", &sdk)
    };
    let write = |path: &str, text: &str| -> Result<(), CliError> {
        let path = dir.join(path);
        let failed = |e: std::io::Error| {
            CliError::new(
                Code::InvalidRequest,
                format!("cannot write {}: {e}", path.display()),
            )
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(failed)?;
        }
        std::fs::write(&path, fill(text)).map_err(failed)
    };
    write(&format!("{name}.capability.json"), CONTRACT)?;
    for (path, text) in files(lang) {
        write(path, text)?;
    }
    {
        use std::os::unix::fs::PermissionsExt;
        let script = dir.join("test.sh");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| invalid(format!("cannot make {} executable: {e}", script.display())))?;
    }
    outln!(
        "created {} ({lang:?} provider {name:?}); build and test it with {}",
        dir.display(),
        dir.join("test.sh").display()
    );
    Ok(0)
}

/// The guest SDK's crate.
const SDK_CRATE: &str = "jig-provider-sdk";

/// The provider SDK found without `--sdk`: installed beside this jig
/// ([`INSTALLED_PROVIDER_SDK`]), else in its checkout
/// ([`CHECKOUT_PROVIDER_SDK`]).
fn found_sdk() -> Option<PathBuf> {
    sdk::beside_executable(INSTALLED_PROVIDER_SDK)
        .into_iter()
        .chain([PathBuf::from(CHECKOUT_PROVIDER_SDK)])
        .find(|dir| sdk::is_crate(dir, SDK_CRATE))
}

/// The SDK directory as a TOML-safe absolute path, if it is the jig guest
/// SDK.
fn sdk_path(dir: &Path) -> Result<String, CliError> {
    let invalid = |why: &str| {
        CliError::new(
            Code::InvalidRequest,
            format!("--sdk {}: {why}", dir.display()),
        )
    };
    if !dir.join("Cargo.toml").is_file() {
        return Err(invalid("has no Cargo.toml"));
    }
    if !sdk::is_crate(dir, SDK_CRATE) {
        return Err(invalid("is not the jig guest SDK (providers/sdk)"));
    }
    sdk::toml_path(dir).map_err(|why| match why {
        sdk::Unwritable::Unresolved(e) => invalid(&e.to_string()),
        sdk::Unwritable::Unquotable(_) => invalid("the path cannot be written into Cargo.toml"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_at_the_length_limit_and_past_it() {
        assert!(valid_name("greet"));
        assert!(valid_name("issue-tracker2"));
        assert!(valid_name(&"a".repeat(MAX_NAME_CHARS)));
        assert!(!valid_name(&"a".repeat(MAX_NAME_CHARS + 1)));
        for bad in ["", "Greet", "2greet", "greet-", "gr eet", "gr_eet", "../x"] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }
}
