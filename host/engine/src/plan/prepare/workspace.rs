//! Workspace dependency capture (seed 002 §4): a Flow whose manifest names
//! `workspace:` libraries is prepared from its ancestor Bun workspace. The
//! root manifest and text lock, every declared member's manifest, and the
//! selected libraries' sources are captured without following links; Bun
//! installs the Flow member with `--filter`, frozen, hoisted, scripts off.
//!
//! The prepared Package/1 stays rooted at the Flow, with the workspace's
//! shape below `node_modules/.jig-workspace`: the hoisted registry packages
//! in its `node_modules`, each selected library (its selected files plus its
//! own nested installs) once at its workspace-relative path, and Bun's
//! aliases to those member roots retained as layout metadata with the
//! Flow's member path (see [`super::layout`]). A Run shows that shape with
//! the Flow at its member path, so a library imported through two paths is
//! one module, cycles resolve through it, and the Flow's relative imports
//! resolve as in the workspace. Unselected member links are omitted; any
//! other link, and any path collision, fails closed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use flow::digest::sha256_digest;
use flow::json::Value;
use flow::package::Package;
use serde_json::json;

use super::files_list::FilesList;
use super::layout::{self, Alias};
use super::{
    add_file, capture_tree, check_lock_current, check_lock_sources, codes, parse_lock,
    parse_manifest, refusal, staged_lock, staged_manifest, Inputs, Manifest, Refusal, BINARY_LOCK,
    BUNDLED_SDK, LOCK, MANIFEST, MAX_LOCK_BYTES, MAX_SOURCE_BYTES, MAX_SOURCE_FILES, NPMRC,
};

/// Discovery bounds: members, directory entries read, levels.
pub(crate) const MAX_MEMBERS: usize = 256;
pub(crate) const MAX_ENTRIES: usize = 32_768;
pub(crate) const MAX_LEVELS: usize = 32;

/// Root fields a workspace preparation does not support.
const UNSUPPORTED_ROOT_FIELDS: [&str; 5] = [
    "patchedDependencies",
    "overrides",
    "resolutions",
    "catalog",
    "catalogs",
];

fn invalid(at: &str, message: &str) -> Refusal {
    refusal(codes::WORKSPACE_INVALID, at, None, message)
}

/// Read a regular file (never through a link), bounded.
fn read_regular(path: &Path, limit: usize) -> Result<Option<Vec<u8>>, &'static str> {
    match std::fs::symlink_metadata(path) {
        Err(_) => Ok(None),
        Ok(meta) if meta.file_type().is_symlink() => Err("is a link"),
        Ok(meta) if !meta.is_file() => Err("is not a regular file"),
        Ok(meta) if meta.len() > limit as u64 => Err("is larger than its limit"),
        Ok(_) => std::fs::read(path).map(Some).map_err(|_| "cannot be read"),
    }
}

/// A directory reached without following a link.
fn is_plain_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

struct Member {
    name: String,
    manifest: Manifest,
    bytes: Vec<u8>,
}

/// Capture and check everything a workspace preparation stages.
pub(super) fn inputs(
    project_root: &Path,
    path: &str,
    package: &Package,
    registry: &str,
    at: &str,
) -> Result<Inputs, Refusal> {
    let flow_dir = project_root.join(path);
    let (root, root_bytes) = find_root(&flow_dir, at)?;
    let root_manifest = parse_manifest(&root_bytes, at)?;
    if let Some(field) = UNSUPPORTED_ROOT_FIELDS
        .iter()
        .find(|f| root_manifest.value.contains_key(**f))
    {
        return Err(refusal(
            codes::MANIFEST_UNSUPPORTED,
            at,
            None,
            &format!("the workspace root manifest has {field}, which is not supported"),
        ));
    }
    if root.join(NPMRC).symlink_metadata().is_ok() {
        return Err(refusal(
            codes::CONFIG_UNSUPPORTED,
            at,
            None,
            "the workspace root has an .npmrc, a separate Bun configuration input; remove it",
        ));
    }
    let member_path = relative(&root, &flow_dir)
        .ok_or_else(|| invalid(at, "the Flow is not below its workspace root"))?;
    let members = discover_members(&root, &root_manifest, at)?;
    let Some(flow_member) = members.get(&member_path) else {
        return Err(invalid(
            at,
            "the Flow is not a declared member of its ancestor Bun workspace",
        ));
    };
    // Workspace metadata is rechecked after source capture.
    if Some(&flow_member.bytes) != package.files().get(MANIFEST) {
        return Err(invalid(
            at,
            "the Flow's package.json changed during capture",
        ));
    }
    let by_name: BTreeMap<&str, &str> = members
        .iter()
        .map(|(p, m)| (m.name.as_str(), p.as_str()))
        .collect();

    // The transitive local runtime dependencies of the Flow member.
    let mut selected: BTreeSet<String> = BTreeSet::new();
    let mut pending = vec![member_path.clone()];
    while let Some(current) = pending.pop() {
        for name in members[&current].manifest.workspace_dependencies() {
            let Some(path) = by_name.get(name.as_str()) else {
                if name == BUNDLED_SDK {
                    // No member is the SDK: the bundled one serves it
                    // (its specifier was checked with the manifest).
                    continue;
                }
                return Err(refusal(
                    codes::SOURCE_UNSUPPORTED,
                    at,
                    None,
                    "a workspace: dependency names no member of the workspace; workspace \
                     requirements never fall back to a registry",
                ));
            };
            if *path != member_path && selected.insert(path.to_string()) {
                pending.push(path.to_string());
            }
        }
    }
    let mut source_files = package.files().len();
    let mut source_bytes: u64 = package.files().values().map(|c| c.len() as u64).sum();
    let mut libraries = BTreeMap::new();
    for library in &selected {
        let member = &members[library];
        let list = files_list(&member.manifest, at)?;
        let files = library_files(&root.join(library), list.as_ref(), &member.manifest)
            .map_err(|why| invalid(at, &format!("a selected workspace library {why}")))?;
        source_files += files.len();
        source_bytes += files.values().map(|c| c.len() as u64).sum::<u64>();
        libraries.insert(library.clone(), (member.name.clone(), files));
    }
    if source_files > MAX_SOURCE_FILES || source_bytes > MAX_SOURCE_BYTES {
        return Err(refusal(
            codes::LIMIT_EXCEEDED,
            at,
            None,
            "the Flow and its workspace libraries have more than 4096 files or 16 MiB before \
             installation",
        ));
    }

    if root.join(BINARY_LOCK).symlink_metadata().is_ok() {
        return Err(refusal(
            codes::LOCK_INVALID,
            at,
            None,
            "the workspace has a bun.lockb; supply the text bun.lock",
        ));
    }
    let lock_bytes = read_regular(&root.join(LOCK), MAX_LOCK_BYTES).map_err(|_| {
        refusal(
            codes::LIMIT_EXCEEDED,
            at,
            None,
            "the workspace bun.lock is not a regular file of at most 2 MiB",
        )
    })?;
    let member_names: BTreeMap<String, String> = members
        .iter()
        .map(|(p, m)| (p.clone(), m.name.clone()))
        .collect();
    let lock = match &lock_bytes {
        None => None,
        Some(bytes) => {
            let lock = parse_lock(bytes).map_err(|why| {
                refusal(
                    codes::LOCK_INVALID,
                    at,
                    None,
                    &format!("the workspace bun.lock {why}"),
                )
            })?;
            check_lock_sources(&lock, registry, &member_names, at)?;
            check_lock_current(&lock, "", &root_manifest, at)?;
            for (path, member) in &members {
                check_lock_current(&lock, path, &member.manifest, at)?;
            }
            Some(staged_lock(&lock, bytes))
        }
    };

    let mut staged = BTreeMap::from([(MANIFEST.to_string(), staged_manifest(&root_manifest))]);
    for (path, member) in &members {
        staged.insert(
            format!("{path}/{MANIFEST}"),
            staged_manifest(&member.manifest),
        );
    }
    let digest = sha256_digest(&flow::json::canonical(&json!({
        "flow": package.digest(),
        "member": member_path,
        "root": sha256_digest(&root_bytes),
        "lock": lock_bytes.as_deref().map(sha256_digest),
        "members": members
            .iter()
            .map(|(p, m)| (p.clone(), Value::String(sha256_digest(&m.bytes))))
            .collect::<serde_json::Map<_, _>>(),
        "libraries": libraries
            .iter()
            .map(|(p, (_, files))| (p.clone(), Value::String(flow::package::digest_files(files))))
            .collect::<serde_json::Map<_, _>>(),
    })));
    Ok(Inputs {
        staged,
        lock,
        member: member_path,
        filter: Some(flow_member.name.clone()),
        libraries,
        members: member_names,
        digest,
    })
}

/// The nearest ancestor whose package.json declares `workspaces`, reached
/// through plain directories only, at most [`MAX_LEVELS`] up.
fn find_root(flow_dir: &Path, at: &str) -> Result<(PathBuf, Vec<u8>), Refusal> {
    let mut dir = flow_dir.to_path_buf();
    for _ in 0..MAX_LEVELS {
        if !is_plain_dir(&dir) {
            return Err(invalid(at, "the path to the workspace root passes a link"));
        }
        let Some(parent) = dir.parent() else { break };
        dir = parent.to_path_buf();
        let manifest = dir.join(MANIFEST);
        let bytes = read_regular(&manifest, super::MAX_MANIFEST_BYTES)
            .map_err(|why| invalid(at, &format!("an ancestor package.json {why}")))?;
        if let Some(bytes) = bytes {
            let declares = serde_json::from_slice::<Value>(&bytes)
                .ok()
                .is_some_and(|v| v.get("workspaces").is_some());
            if declares {
                return Ok((dir, bytes));
            }
        }
    }
    // An undeclared workspace is an unsupported source, like any other.
    Err(refusal(
        codes::SOURCE_UNSUPPORTED,
        at,
        None,
        "workspace: dependencies need an ancestor Bun workspace (a package.json with \
         workspaces) within 32 levels",
    ))
}

/// `child` relative to `root`, `/`-separated, when it is below it.
fn relative(root: &Path, child: &Path) -> Option<String> {
    let rest = child.strip_prefix(root).ok()?;
    let parts: Vec<&str> = rest
        .components()
        .map(|c| match c {
            Component::Normal(p) => p.to_str(),
            _ => None,
        })
        .collect::<Option<_>>()?;
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// Expand the root's workspace patterns (literal paths and a final `*`),
/// bounded, without following links.
fn discover_members(
    root: &Path,
    manifest: &Manifest,
    at: &str,
) -> Result<BTreeMap<String, Member>, Refusal> {
    let patterns = match manifest.value.get("workspaces") {
        Some(Value::Array(p)) => p.clone(),
        Some(Value::Object(o)) => match o.get("packages") {
            Some(Value::Array(p)) if o.keys().all(|k| k == "packages") => p.clone(),
            _ => return Err(invalid(at, "workspaces catalogs are not supported")),
        },
        _ => return Err(invalid(at, "workspaces must be a list of relative paths")),
    };
    let mut entries = 0usize;
    let mut paths = BTreeSet::new();
    for pattern in patterns {
        let Some(pattern) = pattern.as_str() else {
            return Err(invalid(at, "a workspace pattern is not a string"));
        };
        let pattern = pattern.strip_prefix("./").unwrap_or(pattern);
        let parts: Vec<&str> = pattern.trim_end_matches('/').split('/').collect();
        let plain = |p: &&str| !p.is_empty() && *p != "." && *p != ".." && !p.contains('\\');
        if parts.len() > MAX_LEVELS
            || pattern.starts_with('/')
            || pattern.starts_with('!')
            || !parts.iter().all(plain)
        {
            return Err(invalid(
                at,
                "a workspace pattern must stay relative to the workspace root",
            ));
        }
        let (last, base) = parts.split_last().expect("split yields one part");
        if base.iter().any(|p| p.contains('*')) || (last.contains('*') && *last != "*") {
            return Err(invalid(
                at,
                "only literal workspace paths and a final /* are supported",
            ));
        }
        let base = base.join("/");
        if *last != "*" {
            paths.insert(if base.is_empty() {
                last.to_string()
            } else {
                format!("{base}/{last}")
            });
            continue;
        }
        let dir = root.join(&base);
        if !is_plain_dir(&dir) {
            continue;
        }
        let listing = std::fs::read_dir(&dir)
            .map_err(|_| invalid(at, "a workspace directory cannot be read"))?;
        for entry in listing {
            entries += 1;
            if entries > MAX_ENTRIES {
                return Err(refusal(
                    codes::LIMIT_EXCEEDED,
                    at,
                    None,
                    "workspace discovery reads at most 32768 entries",
                ));
            }
            let entry = entry.map_err(|_| invalid(at, "a workspace directory cannot be read"))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if is_dir && !name.starts_with('.') && name != "node_modules" {
                let path = if base.is_empty() {
                    name.to_string()
                } else {
                    format!("{base}/{name}")
                };
                if root.join(&path).join(MANIFEST).exists() {
                    paths.insert(path);
                }
            }
        }
    }
    if paths.len() > MAX_MEMBERS {
        return Err(refusal(
            codes::LIMIT_EXCEEDED,
            at,
            None,
            "a workspace has at most 256 members",
        ));
    }
    let mut members = BTreeMap::new();
    let mut names = BTreeSet::new();
    for path in paths {
        let dir = root.join(&path);
        if relative(root, &dir).as_deref() != Some(path.as_str())
            || path
                .split('/')
                .scan(root.to_path_buf(), |d, p| {
                    d.push(p);
                    Some(is_plain_dir(d))
                })
                .any(|plain| !plain)
        {
            return Err(invalid(at, "a workspace member path passes a link"));
        }
        let bytes = read_regular(&dir.join(MANIFEST), super::MAX_MANIFEST_BYTES)
            .map_err(|why| invalid(at, &format!("a member package.json {why}")))?
            .ok_or_else(|| invalid(at, "a declared workspace member has no package.json"))?;
        let manifest = parse_manifest(&bytes, at)?;
        let Some(name) = manifest.value.get("name").and_then(Value::as_str) else {
            return Err(invalid(at, "every workspace member needs a name"));
        };
        if !names.insert(name.to_string()) {
            return Err(invalid(at, "two workspace members share one name"));
        }
        if dir.join(LOCK).symlink_metadata().is_ok()
            || dir.join(BINARY_LOCK).symlink_metadata().is_ok()
        {
            return Err(refusal(
                codes::MANIFEST_UNSUPPORTED,
                at,
                None,
                "workspace members use the root lock; member locks are not supported",
            ));
        }
        if let Some(field) = UNSUPPORTED_ROOT_FIELDS
            .iter()
            .find(|f| manifest.value.contains_key(**f))
        {
            return Err(refusal(
                codes::MANIFEST_UNSUPPORTED,
                at,
                None,
                &format!("a workspace member manifest has {field}, which is not supported"),
            ));
        }
        members.insert(
            path,
            Member {
                name: name.to_string(),
                manifest,
                bytes,
            },
        );
    }
    Ok(members)
}

/// A library's `files` list, compiled; its bounds refuse as limits.
fn files_list(manifest: &Manifest, at: &str) -> Result<Option<FilesList>, Refusal> {
    let entries = match manifest.value.get("files") {
        None => return Ok(None),
        Some(Value::Array(entries)) => entries,
        Some(_) => {
            return Err(invalid(
                at,
                "a selected workspace library has a files field that is not a list",
            ))
        }
    };
    FilesList::compile(
        entries,
        manifest.value.get("main"),
        manifest.value.get("bin"),
    )
    .map(Some)
    .map_err(|why| {
        let code = if why.is_limit() {
            codes::LIMIT_EXCEEDED
        } else {
            codes::WORKSPACE_INVALID
        };
        let message = format!("a selected workspace library {}", why.message());
        refusal(code, at, None, &message)
    })
}

/// A library's selected source: what its `files` list selects when it has
/// one (see [`FilesList`]), else every ordinary file;
/// `.git` and `node_modules` never. Literal `main`/`exports` files must be
/// present.
fn library_files(
    dir: &Path,
    list: Option<&FilesList>,
    manifest: &Manifest,
) -> Result<BTreeMap<String, Vec<u8>>, &'static str> {
    let mut all = BTreeMap::new();
    read_source(dir, "", &mut all)?;
    let selected: BTreeMap<String, Vec<u8>> = match list {
        None => all,
        Some(list) => all
            .into_iter()
            .filter(|(path, _)| list.selects(path))
            .collect(),
    };
    for literal in exported_files(manifest) {
        if !selected.contains_key(&literal) {
            return Err("lacks a file its main or exports names (Jig runs no build)");
        }
    }
    Ok(selected)
}

/// Literal paths in `main` and `exports` (patterns with `*` are skipped).
fn exported_files(manifest: &Manifest) -> Vec<String> {
    let mut out = Vec::new();
    let mut push = |v: &Value| {
        if let Some(p) = v.as_str().filter(|p| !p.contains('*')) {
            out.push(p.trim_start_matches("./").to_string());
        }
    };
    if let Some(main) = manifest.value.get("main") {
        push(main);
    }
    let mut pending: Vec<&Value> = manifest.value.get("exports").into_iter().collect();
    while let Some(v) = pending.pop() {
        match v {
            Value::Object(o) => pending.extend(o.values()),
            Value::Array(a) => pending.extend(a.iter()),
            other => push(other),
        }
    }
    out
}

/// Read ordinary source files below `dir` without following links.
fn read_source(
    dir: &Path,
    prefix: &str,
    files: &mut BTreeMap<String, Vec<u8>>,
) -> Result<(), &'static str> {
    let entries = std::fs::read_dir(dir).map_err(|_| "cannot be read")?;
    for entry in entries {
        let entry = entry.map_err(|_| "cannot be read")?;
        let name = entry.file_name();
        let name = name.to_str().ok_or("has a file name that is not UTF-8")?;
        if name == ".git" || name == "node_modules" {
            continue;
        }
        let path = if prefix.is_empty() {
            name.to_string()
        } else {
            format!("{prefix}/{name}")
        };
        let kind = entry.file_type().map_err(|_| "cannot be read")?;
        if kind.is_dir() {
            read_source(&entry.path(), &path, files)?;
        } else if kind.is_file() {
            if files.len() >= MAX_SOURCE_FILES {
                return Err("has more than 4096 files");
            }
            files.insert(
                path,
                std::fs::read(entry.path()).map_err(|_| "cannot be read")?,
            );
        } else {
            return Err("has a link or special file");
        }
    }
    Ok(())
}

/// Prepared files by path.
type Files = BTreeMap<String, Vec<u8>>;

/// The installed workspace tree below the Flow, in the workspace's shape
/// below [`layout::MEMBERS_DIR`]: the hoisted registry packages as regular
/// files under its `node_modules`, each selected library's files and nested
/// installs at its workspace-relative path, and the installer's aliases to
/// those member roots as layout records (never as files). The Flow member's
/// own nested installs are its `node_modules`.
pub(super) fn flatten(
    staged_root: &Path,
    inputs: &Inputs,
) -> Result<(Files, Vec<Alias>), &'static str> {
    let mut files = BTreeMap::new();
    let mut aliases = Vec::new();
    let modules = staged_root.join("node_modules");
    let mut installed = Vec::new();
    if is_plain_dir(&modules) {
        for entry in std::fs::read_dir(&modules).map_err(|_| "cannot read the installed tree")? {
            let entry = entry.map_err(|_| "cannot read the installed tree")?;
            let name = entry
                .file_name()
                .to_str()
                .ok_or("a non-UTF-8 name")?
                .to_string();
            if name == ".bin" || name == ".cache" {
                continue;
            }
            if format!("node_modules/{name}") == layout::MEMBERS_DIR {
                return Err("the installed tree uses the prepared members directory");
            }
            if name.starts_with('@') && is_plain_dir(&entry.path()) {
                for scoped in
                    std::fs::read_dir(entry.path()).map_err(|_| "cannot read the installed tree")?
                {
                    let scoped = scoped.map_err(|_| "cannot read the installed tree")?;
                    let inner = scoped
                        .file_name()
                        .to_str()
                        .ok_or("a non-UTF-8 name")?
                        .to_string();
                    installed.push((format!("{name}/{inner}"), scoped.path()));
                }
            } else {
                installed.push((name, entry.path()));
            }
        }
    }
    for (name, path) in installed {
        // The hoisted installs stay at the workspace root's node_modules.
        let target = format!("{}/node_modules/{name}", layout::MEMBERS_DIR);
        let meta =
            std::fs::symlink_metadata(&path).map_err(|_| "cannot read the installed tree")?;
        if meta.is_dir() {
            capture_tree(&path, &target, &mut files)?;
        } else if meta.is_file() {
            let content = std::fs::read(&path).map_err(|_| "cannot read the installed tree")?;
            add_file(&mut files, target, content)?;
        } else if meta.file_type().is_symlink() {
            let link = std::fs::read_link(&path).map_err(|_| "cannot read the installed tree")?;
            let member = path
                .parent()
                .and_then(|dir| normalize(staged_root, &dir.join(link)))
                .ok_or("the installed tree has a link outside the workspace")?;
            if member == inputs.member {
                continue;
            }
            if let Some((_, library)) = inputs.libraries.get(&member) {
                // The member root at its workspace-relative path, once.
                let root = format!("{}/{member}", layout::MEMBERS_DIR);
                if !files.keys().any(|f| f.starts_with(&format!("{root}/"))) {
                    for (file, content) in library {
                        add_file(&mut files, format!("{root}/{file}"), content.clone())?;
                    }
                    let nested = staged_root.join(&member).join("node_modules");
                    capture_tree(&nested, &format!("{root}/node_modules"), &mut files)?;
                }
                let text = layout::link_text(&target, &root);
                aliases.push(Alias {
                    path: target,
                    target: text,
                });
            } else if !inputs.members.contains_key(&member) {
                return Err("the installed tree links to something that is not a workspace member");
            }
            // An unselected member's link is omitted.
        } else {
            return Err("the installed tree has a special file");
        }
    }
    // The Flow member's own installs, beside the hoisted ones.
    let own = staged_root.join(&inputs.member).join("node_modules");
    capture_tree(&own, "node_modules", &mut files)?;
    Ok((files, aliases))
}

/// `path` lexically normalised and made relative to `root`, if inside it.
fn normalize(root: &Path, path: &Path) -> Option<String> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    relative(root, &out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_resolve_lexically_inside_the_root() {
        let root = Path::new("/w");
        assert_eq!(
            normalize(root, Path::new("/w/node_modules/../libs/util")).as_deref(),
            Some("libs/util")
        );
        assert_eq!(normalize(root, Path::new("/w/../etc")), None);
    }

    #[test]
    fn bounds_match_the_seed() {
        assert_eq!((MAX_MEMBERS, MAX_ENTRIES, MAX_LEVELS), (256, 32_768, 32));
    }
}
