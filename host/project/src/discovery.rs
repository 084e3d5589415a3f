//! Membership (seed 002 §2): which directories are Flow members and which
//! files are Binding declarations, from `discover()` roots or exact lists.
//!
//! Discovery is shallow and exact. A Flow root selects immediate real child
//! directories holding an exact-case regular `FLOW.md`; a Binding root
//! selects immediate regular files named `<LocalName>.ts`. Nothing recurses
//! and no symlink is followed: a symlink where a member would be rejects the
//! candidate (`PROJECT_UNSAFE`), other entries are inert. Entry names that are
//! not UTF-8 can never be project paths and are inert.

use std::collections::BTreeMap;
use std::path::Path;

use crate::declaration::{pointer_token, Source};
use crate::paths::{self, escape};
use crate::tree::{self, Kind};
use crate::{ProjectCode, ProjectError};

/// Most members one field may select (the lock's bound on targets and Bindings).
pub const MAX_MEMBERS: usize = 4096;

/// Exact-case name of a Flow package's metadata file.
pub const FLOW_MD: &str = "FLOW.md";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    Flows,
    Bindings,
}

impl Field {
    fn name(self) -> &'static str {
        match self {
            Field::Flows => "flows",
            Field::Bindings => "bindings",
        }
    }
}

/// Selected Flow directories, sorted canonical paths.
pub(crate) fn flows(root: &Path, source: Option<&Source>) -> Result<Vec<String>, ProjectError> {
    let members = select(root, source, Field::Flows)?;
    Ok(members.into_keys().collect())
}

/// Selected Binding files by Binding ID (file stem).
pub(crate) fn bindings(
    root: &Path,
    source: Option<&Source>,
) -> Result<BTreeMap<String, String>, ProjectError> {
    let members = select(root, source, Field::Bindings)?;
    let mut by_id: BTreeMap<String, String> = BTreeMap::new();
    for (path, pointer) in members {
        let id = binding_id(&path).unwrap_or_default().to_owned();
        if let Some(other) = by_id.insert(id.clone(), path.clone()) {
            return Err(ProjectError::new(
                ProjectCode::MemberCollision,
                format!(
                    "{} and {} both declare Binding {id}",
                    escape(&other),
                    escape(&path)
                ),
            )
            .pointer(pointer));
        }
    }
    Ok(by_id)
}

/// The Binding ID of a `<dir>/<LocalName>.ts` path.
pub(crate) fn binding_id(path: &str) -> Option<&str> {
    let file = path.rsplit('/').next()?;
    file.strip_suffix(".ts")
        .filter(|stem| paths::is_local_name(stem))
}

/// Members (canonical path -> JSON pointer of the root or entry selecting it).
fn select(
    root: &Path,
    source: Option<&Source>,
    field: Field,
) -> Result<BTreeMap<String, String>, ProjectError> {
    let mut members: BTreeMap<String, String> = BTreeMap::new();
    let name = field.name();
    match source {
        None => {}
        Some(Source::Discover(roots)) => {
            for (i, dir) in roots.iter().enumerate() {
                let pointer = format!("/{name}/roots/{i}");
                for member in discover(root, dir, field).map_err(|e| e.pointer(&pointer))? {
                    add(&mut members, member, &pointer)?;
                }
            }
        }
        Some(Source::Members(list)) => {
            for (i, path) in list.iter().enumerate() {
                let pointer = format!("/{name}/paths/{i}");
                exact(root, path, field).map_err(|e| e.pointer(&pointer))?;
                add(&mut members, path.clone(), &pointer)?;
            }
        }
    }
    if members.len() > MAX_MEMBERS {
        return Err(ProjectError::new(
            ProjectCode::DeclarationInvalid,
            format!(
                "{name} selects {} members; at most {MAX_MEMBERS} are allowed",
                members.len()
            ),
        )
        .pointer(format!("/{}", pointer_token(name))));
    }
    let mut folded: BTreeMap<String, &str> = BTreeMap::new();
    for (path, pointer) in &members {
        if let Some(other) = folded.insert(paths::fold(path), path) {
            return Err(ProjectError::new(
                ProjectCode::MemberCollision,
                format!(
                    "{} and {} differ only by letter case or normalization",
                    escape(other),
                    escape(path)
                ),
            )
            .pointer(pointer.clone()));
        }
    }
    Ok(members)
}

fn add(
    members: &mut BTreeMap<String, String>,
    path: String,
    pointer: &str,
) -> Result<(), ProjectError> {
    if members.contains_key(&path) {
        return Err(ProjectError::new(
            ProjectCode::MemberCollision,
            format!("{} is selected twice", escape(&path)),
        )
        .pointer(pointer));
    }
    members.insert(path, pointer.to_owned());
    Ok(())
}

/// Members directly beneath discovery root `dir`.
fn discover(root: &Path, dir: &str, field: Field) -> Result<Vec<String>, ProjectError> {
    let Some(entries) = tree::list_dir(root, dir)? else {
        return Ok(Vec::new());
    };
    let mut found = Vec::new();
    for (name, kind) in entries {
        let Some(name) = name.to_str() else { continue };
        let path = format!("{dir}/{name}");
        let candidate = match field {
            Field::Flows => match kind {
                Kind::Dir => has_flow_md(root, &path)?,
                _ => false,
            },
            Field::Bindings => {
                let named = binding_id(&path).is_some();
                if named && kind == Kind::Symlink {
                    return Err(unsafe_link(&path));
                }
                named && kind == Kind::File
            }
        };
        if !candidate {
            continue;
        }
        let canonical = match paths::normalize(&path) {
            Ok(canonical) => canonical,
            Err(e) => {
                return Err(ProjectError::new(
                    ProjectCode::DeclarationInvalid,
                    format!("member {} cannot be selected: {}", escape(&path), e.message),
                ))
            }
        };
        found.push(canonical);
    }
    Ok(found)
}

/// Whether directory `dir` holds an exact-case regular `FLOW.md`.
fn has_flow_md(root: &Path, dir: &str) -> Result<bool, ProjectError> {
    let Some(entries) = tree::list_dir(root, dir)? else {
        return Ok(false);
    };
    match entries
        .iter()
        .find(|(name, _)| name.to_str() == Some(FLOW_MD))
    {
        None => Ok(false),
        Some((_, Kind::File)) => Ok(true),
        Some((_, Kind::Symlink)) => Err(unsafe_link(&format!("{dir}/{FLOW_MD}"))),
        Some(_) => Err(ProjectError::new(
            ProjectCode::DeclarationInvalid,
            format!(
                "{} is not a regular file",
                escape(&format!("{dir}/{FLOW_MD}"))
            ),
        )),
    }
}

fn unsafe_link(path: &str) -> ProjectError {
    ProjectError::new(
        ProjectCode::Unsafe,
        format!(
            "{} is a symlink; Jig never follows links in project sources",
            escape(path)
        ),
    )
}

/// Checks one exact member: it must exist with the field's kind.
fn exact(root: &Path, path: &str, field: Field) -> Result<(), ProjectError> {
    let missing = |why: &str| {
        ProjectError::new(
            ProjectCode::MemberMissing,
            format!("member {} {why}", escape(path)),
        )
    };
    match field {
        Field::Flows => match tree::lookup(root, path)? {
            Kind::Dir if has_flow_md(root, path)? => Ok(()),
            Kind::Dir => Err(missing("has no FLOW.md")),
            Kind::Missing => Err(missing("does not exist")),
            _ => Err(missing("is not a directory")),
        },
        Field::Bindings => {
            if binding_id(path).is_none() {
                return Err(ProjectError::new(
                    ProjectCode::DeclarationInvalid,
                    format!(
                        "Binding member {} must be named <LocalName>.ts",
                        escape(path)
                    ),
                ));
            }
            match tree::lookup(root, path)? {
                Kind::File => Ok(()),
                Kind::Missing => Err(missing("does not exist")),
                _ => Err(missing("is not a regular file")),
            }
        }
    }
}
