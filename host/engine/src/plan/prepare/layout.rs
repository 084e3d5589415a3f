//! Private layout metadata of a workspace preparation (seed 002 §4
//! "Workspace dependency capture"): the pinned Bun hoisted linker's exact
//! aliases to selected member roots, kept beside the prepared Package/1 in
//! the protected store instead of as file records.
//!
//! A [`Layout`] is a normalised, sorted list of relative links. Each link's
//! target stays inside the prepared tree and names a directory of regular
//! files; no link lies below, or points through, another link, and no link
//! shares a path with a file. Its canonical JSON's digest is part of the
//! prepared identity, so a changed layout is a changed target in review.
//!
//! The layout also records the Flow's workspace member path: the prepared
//! Package/1 stays rooted at the Flow (its metadata, contracts and Skills
//! stay relative to it), but a Run sees the workspace's shape
//! ([`Layout::run_tree`]): the Flow at its member path, each library at its
//! workspace path, the hoisted installs at the workspace root, so the
//! entrypoint's relative imports and `import.meta.dir` resolve as in the
//! workspace.
//!
//! A Run's tree gets the regular files first, then exactly these links
//! ([`materialize`]); [`verify`] checks that the tree holds exactly them;
//! [`unlink`] removes them without following their targets.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use flow::digest::sha256_digest;
use flow::json::Value;
use serde_json::json;

const MIB: u64 = 1024 * 1024;

/// Combined file and alias records of one preparation.
pub(crate) const MAX_RECORDS: usize = 4096;
/// File content plus layout JSON of one preparation.
pub(crate) const MAX_CONTENT_BYTES: u64 = 32 * MIB;
/// The layout JSON alone.
pub(crate) const MAX_LAYOUT_BYTES: usize = MIB as usize;

/// The workspace root in the prepared tree: selected members live below
/// it at their workspace-relative paths, the hoisted installs in its
/// `node_modules`. A Run shows it as the root of its tree.
pub(crate) const MEMBERS_DIR: &str = "node_modules/.jig-workspace";

/// One alias: a link at `path` whose text is `target`, both relative.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Alias {
    pub path: String,
    pub target: String,
}

/// The checked aliases of one prepared tree, sorted by path.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    aliases: Vec<Alias>,
    /// The Flow's workspace-relative member path (`packages/greeter`).
    member: Option<String>,
}

impl Layout {
    /// Check `aliases` against the prepared `files` and the bounds.
    pub fn new(
        aliases: Vec<Alias>,
        files: &BTreeMap<String, Vec<u8>>,
    ) -> Result<Layout, &'static str> {
        let mut aliases = aliases;
        aliases.sort();
        check_links(&aliases, &files.keys().map(String::as_str).collect())?;
        let layout = Layout {
            aliases,
            member: None,
        };
        layout.check_bounds(files)?;
        Ok(layout)
    }

    /// The same layout for a Flow at workspace `member` path, checked: in
    /// the Run's tree no path may collide and every alias stays valid.
    pub(crate) fn with_member(
        self,
        member: &str,
        files: &BTreeMap<String, Vec<u8>>,
    ) -> Result<Layout, &'static str> {
        if !is_plain(member) || member.split('/').any(|s| s == "node_modules") {
            return Err("the Flow's workspace member path is unsafe");
        }
        let layout = Layout {
            member: Some(member.to_string()),
            ..self
        };
        let paths: Vec<String> = files.keys().map(|p| layout.run_path(p)).collect();
        let set: BTreeSet<&str> = paths.iter().map(String::as_str).collect();
        if set.len() != files.len() {
            return Err("a workspace library's path collides with the Flow's files");
        }
        check_links(&layout.run_aliases(), &set)?;
        layout.check_bounds(files)?;
        Ok(layout)
    }

    /// The Flow's workspace member path, if it has one.
    pub fn member(&self) -> Option<&str> {
        self.member.as_deref()
    }

    /// Where the prepared file at `path` appears in a Run's tree: below
    /// the Flow's member path, or at its workspace path for the members
    /// directory; unchanged without a member path.
    pub(crate) fn run_path(&self, path: &str) -> String {
        let Some(member) = &self.member else {
            return path.to_string();
        };
        match path
            .strip_prefix(MEMBERS_DIR)
            .and_then(|rest| rest.strip_prefix('/'))
        {
            Some(rest) => rest.to_string(),
            None => format!("{member}/{path}"),
        }
    }

    /// The aliases as they are made in a Run's tree.
    fn run_aliases(&self) -> Vec<Alias> {
        let mut aliases: Vec<Alias> = self
            .aliases
            .iter()
            .map(|a| {
                let path = self.run_path(&a.path);
                let target = resolve(&a.path, &a.target).expect("a checked alias resolves");
                let target = link_text(&path, &self.run_path(&target));
                Alias { path, target }
            })
            .collect();
        aliases.sort();
        aliases
    }

    /// A Run's tree of the prepared `files`: each file at its
    /// [`Layout::run_path`], and the layout of the links made there.
    pub(crate) fn run_tree(
        &self,
        files: &BTreeMap<String, Vec<u8>>,
    ) -> (BTreeMap<String, Vec<u8>>, Layout) {
        let tree = files
            .iter()
            .map(|(path, content)| (self.run_path(path), content.clone()))
            .collect();
        let layout = Layout {
            aliases: self.run_aliases(),
            member: None,
        };
        (tree, layout)
    }

    fn check_bounds(&self, files: &BTreeMap<String, Vec<u8>>) -> Result<(), &'static str> {
        let content: u64 = files.values().map(|c| c.len() as u64).sum();
        check_bounds(
            files.len(),
            self.aliases.len(),
            content,
            self.to_json().len(),
        )
    }

    pub fn is_empty(&self) -> bool {
        self.aliases.is_empty() && self.member.is_none()
    }

    pub fn aliases(&self) -> &[Alias] {
        &self.aliases
    }

    /// The canonical JSON retained in the store.
    pub(crate) fn to_json(&self) -> Vec<u8> {
        let aliases: Vec<Value> = self
            .aliases
            .iter()
            .map(|a| json!({ "path": a.path, "target": a.target }))
            .collect();
        let mut value = json!({ "aliases": aliases });
        if let Some(member) = &self.member {
            value["member"] = json!(member);
        }
        flow::json::canonical(&value)
    }

    /// The digest the prepared evidence pins.
    pub fn digest(&self) -> String {
        sha256_digest(&self.to_json())
    }

    /// Parse retained layout JSON, which must be canonical and check
    /// against the prepared `files` exactly as when it was made.
    pub(crate) fn from_json(
        bytes: &[u8],
        files: &BTreeMap<String, Vec<u8>>,
    ) -> Result<Layout, &'static str> {
        if bytes.len() > MAX_LAYOUT_BYTES {
            return Err("the layout is larger than 1 MiB");
        }
        let value: Value = serde_json::from_slice(bytes).map_err(|_| "the layout is not JSON")?;
        let shape = "the layout has an unknown shape";
        let object = value.as_object().ok_or(shape)?;
        let member = match object.get("member") {
            None => None,
            Some(Value::String(member)) => Some(member.as_str()),
            Some(_) => return Err(shape),
        };
        if object.len() != 1 + usize::from(member.is_some()) {
            return Err(shape);
        }
        let mut aliases = Vec::new();
        for entry in object
            .get("aliases")
            .and_then(Value::as_array)
            .ok_or(shape)?
        {
            let entry = entry.as_object().filter(|e| e.len() == 2).ok_or(shape)?;
            let text = |key: &str| entry.get(key).and_then(Value::as_str).map(str::to_string);
            aliases.push(Alias {
                path: text("path").ok_or(shape)?,
                target: text("target").ok_or(shape)?,
            });
        }
        let mut layout = Layout::new(aliases, files)?;
        if let Some(member) = member {
            layout = layout.with_member(member, files)?;
        }
        if layout.to_json() != bytes {
            return Err("the layout is not in its canonical form");
        }
        Ok(layout)
    }
}

/// Check `aliases` (sorted) against the file `paths` of one tree: plain,
/// unique, onto no file, below no other alias, and each naming a directory
/// of files in its normalised form, not through another alias.
fn check_links(aliases: &[Alias], files: &BTreeSet<&str>) -> Result<(), &'static str> {
    let paths: BTreeSet<&str> = aliases.iter().map(|a| a.path.as_str()).collect();
    if paths.len() != aliases.len() {
        return Err("two workspace aliases share one path");
    }
    let dirs: BTreeSet<&str> = files.iter().flat_map(|p| prefixes(p)).collect();
    for alias in aliases {
        if !is_plain(&alias.path) {
            return Err("a workspace alias has an unsafe path");
        }
        if files.contains(alias.path.as_str()) || dirs.contains(alias.path.as_str()) {
            return Err("a workspace alias collides with a prepared file");
        }
        if prefixes(&alias.path).any(|p| paths.contains(p)) {
            return Err("a workspace alias lies below another alias");
        }
        let Some(resolved) = resolve(&alias.path, &alias.target) else {
            return Err("a workspace alias points outside the prepared tree");
        };
        if paths.contains(resolved.as_str()) || prefixes(&resolved).any(|p| paths.contains(p)) {
            return Err("a workspace alias points through another alias");
        }
        if !dirs.contains(resolved.as_str()) {
            return Err("a workspace alias points to no prepared member");
        }
        if alias.target != link_text(&alias.path, &resolved) {
            return Err("a workspace alias is not in its normalised form");
        }
    }
    Ok(())
}

/// The three bounds of seed 002 §4 on one preparation.
pub(crate) fn check_bounds(
    files: usize,
    aliases: usize,
    content_bytes: u64,
    layout_bytes: usize,
) -> Result<(), &'static str> {
    if layout_bytes > MAX_LAYOUT_BYTES {
        return Err("the workspace layout is larger than 1 MiB");
    }
    if files.saturating_add(aliases) > MAX_RECORDS {
        return Err("the prepared package has more than 4096 file and alias records");
    }
    if content_bytes.saturating_add(layout_bytes as u64) > MAX_CONTENT_BYTES {
        return Err("the prepared package has more than 32 MiB of content and layout");
    }
    Ok(())
}

/// The link text from the link at `path` to the tree path `target`.
pub(crate) fn link_text(path: &str, target: &str) -> String {
    let from: Vec<&str> = path.split('/').collect();
    let from = &from[..from.len() - 1];
    let to: Vec<&str> = target.split('/').collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<&str> = vec![".."; from.len() - common];
    parts.extend(&to[common..]);
    parts.join("/")
}

/// Create exactly the recorded links below `root`, after its regular files.
pub(crate) fn materialize(root: &Path, layout: &Layout) -> std::io::Result<()> {
    for alias in &layout.aliases {
        let link = root.join(&alias.path);
        let parent = link.parent().expect("an alias path has a parent");
        // No alias lies below another, so no link is followed here.
        std::fs::create_dir_all(parent)?;
        std::os::unix::fs::symlink(&alias.target, &link)?;
    }
    Ok(())
}

/// Does the tree at `root` hold exactly the recorded links, and no other
/// link? Walks without following links.
pub fn verify(root: &Path, layout: &Layout) -> Result<(), &'static str> {
    let mut found = BTreeMap::new();
    let mut pending = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, prefix)) = pending.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|_| "the prepared tree cannot be read")?;
        for entry in entries {
            let entry = entry.map_err(|_| "the prepared tree cannot be read")?;
            let name = entry.file_name();
            let name = name
                .to_str()
                .ok_or("the prepared tree has a non-UTF-8 name")?;
            let path = if prefix.is_empty() {
                name.to_string()
            } else {
                format!("{prefix}/{name}")
            };
            let kind = entry
                .file_type()
                .map_err(|_| "the prepared tree cannot be read")?;
            if kind.is_symlink() {
                let text = std::fs::read_link(entry.path())
                    .map_err(|_| "the prepared tree cannot be read")?;
                let text = text.to_str().ok_or("a prepared link is not UTF-8")?;
                found.insert(path, text.to_string());
            } else if kind.is_dir() {
                pending.push((entry.path(), path));
            }
        }
    }
    let recorded: BTreeMap<String, String> = layout
        .aliases
        .iter()
        .map(|a| (a.path.clone(), a.target.clone()))
        .collect();
    if found != recorded {
        return Err("the prepared tree's links differ from its recorded layout");
    }
    Ok(())
}

/// Remove the recorded links below `root` without following them; a path
/// that is no longer a link is left for the ordinary tree removal.
pub fn unlink(root: &Path, layout: &Layout) -> std::io::Result<()> {
    for alias in &layout.aliases {
        let link = root.join(&alias.path);
        match std::fs::symlink_metadata(&link) {
            Ok(meta) if meta.file_type().is_symlink() => std::fs::remove_file(&link)?,
            _ => {}
        }
    }
    Ok(())
}

/// A relative path of plain segments.
fn is_plain(path: &str) -> bool {
    !path.is_empty()
        && path
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != ".." && !s.contains(['\\', '\0']))
}

/// The strict directory prefixes of `path`.
fn prefixes(path: &str) -> impl Iterator<Item = &str> {
    path.match_indices('/').map(move |(i, _)| &path[..i])
}

/// The tree path a link at `path` with text `target` names, if inside.
fn resolve(path: &str, target: &str) -> Option<String> {
    if target.is_empty() || target.starts_with('/') || target.contains(['\\', '\0']) {
        return None;
    }
    let mut out: Vec<&str> = path.split('/').collect();
    out.pop();
    for segment in target.split('/') {
        match segment {
            ".." => {
                out.pop()?;
            }
            "" | "." => return None,
            other => out.push(other),
        }
    }
    (!out.is_empty()).then(|| out.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(paths: &[&str]) -> BTreeMap<String, Vec<u8>> {
        paths
            .iter()
            .map(|p| (p.to_string(), b"x".to_vec()))
            .collect()
    }

    fn alias(path: &str, target: &str) -> Alias {
        Alias {
            path: path.into(),
            target: target.into(),
        }
    }

    const LIB: &str = "node_modules/.jig-workspace/libs/a/index.js";

    #[test]
    fn bounds_match_the_seed() {
        assert_eq!(MAX_RECORDS, 4096);
        assert_eq!(MAX_CONTENT_BYTES, 33_554_432);
        assert_eq!(MAX_LAYOUT_BYTES, 1_048_576);
    }

    #[test]
    fn records_are_bounded_at_4096_files_and_aliases_together() {
        assert!(check_bounds(4000, 96, 0, 0).is_ok());
        assert!(check_bounds(4000, 97, 0, 0).is_err());
        assert!(check_bounds(MAX_RECORDS, 0, 0, 0).is_ok());
        assert!(check_bounds(MAX_RECORDS + 1, 0, 0, 0).is_err());
        // Generated: 4095 files and one alias is the limit, two past it.
        let mut many = files(&[LIB]);
        for i in 0..MAX_RECORDS - 2 {
            many.insert(format!("f/{i}.js"), Vec::new());
        }
        let one = vec![alias("node_modules/a", ".jig-workspace/libs/a")];
        assert!(Layout::new(one.clone(), &many).is_ok());
        let mut two = one;
        two.push(alias("node_modules/b", ".jig-workspace/libs/a"));
        assert_eq!(
            Layout::new(two, &many),
            Err("the prepared package has more than 4096 file and alias records")
        );
    }

    #[test]
    fn content_and_layout_share_32_mebibytes() {
        assert!(check_bounds(1, 1, MAX_CONTENT_BYTES - 100, 100).is_ok());
        assert!(check_bounds(1, 1, MAX_CONTENT_BYTES - 100, 101).is_err());
        assert!(check_bounds(1, 0, MAX_CONTENT_BYTES, 0).is_ok());
        assert!(check_bounds(1, 0, MAX_CONTENT_BYTES + 1, 0).is_err());
        // Generated: the content fills exactly what the layout leaves.
        let aliases = vec![alias("node_modules/a", ".jig-workspace/libs/a")];
        let json = Layout {
            aliases: aliases.clone(),
            member: None,
        }
        .to_json()
        .len() as u64;
        let mut tree = files(&[LIB]);
        tree.insert(
            "big".into(),
            vec![0; (MAX_CONTENT_BYTES - json - 1) as usize],
        );
        assert!(Layout::new(aliases.clone(), &tree).is_ok());
        tree.insert("big".into(), vec![0; (MAX_CONTENT_BYTES - json) as usize]);
        assert!(Layout::new(aliases, &tree).is_err());
    }

    #[test]
    fn the_layout_json_has_its_own_mebibyte() {
        assert!(check_bounds(0, 0, 0, MAX_LAYOUT_BYTES).is_ok());
        assert_eq!(
            check_bounds(0, 0, 0, MAX_LAYOUT_BYTES + 1),
            Err("the workspace layout is larger than 1 MiB")
        );
        // Generated: aliases with long names filling exactly 1 MiB.
        let tree = files(&[LIB]);
        let size = |aliases: &[Alias]| {
            Layout {
                aliases: aliases.to_vec(),
                member: None,
            }
            .to_json()
            .len()
        };
        let named = |i: usize| {
            let name = format!("node_modules/{i:06}{}", "x".repeat(240));
            alias(&name, ".jig-workspace/libs/a")
        };
        let one = size(&[named(0)]);
        let each = size(&[named(0), named(1)]) - one;
        let count = 1 + (MAX_LAYOUT_BYTES - one) / each;
        let mut aliases: Vec<Alias> = (0..count).map(named).collect();
        let slack = MAX_LAYOUT_BYTES - size(&aliases);
        aliases
            .last_mut()
            .unwrap()
            .path
            .push_str(&"y".repeat(slack));
        assert_eq!(size(&aliases), MAX_LAYOUT_BYTES);
        assert!(aliases.len() < MAX_RECORDS);
        assert!(Layout::new(aliases.clone(), &tree).is_ok());
        aliases.last_mut().unwrap().path.push('y');
        assert_eq!(
            Layout::new(aliases, &tree),
            Err("the workspace layout is larger than 1 MiB")
        );
    }

    #[test]
    fn links_fail_closed_outside_through_or_onto_the_tree() {
        let tree = files(&[LIB, "node_modules/c/index.js", "flow.ts"]);
        let check = |path: &str, target: &str| Layout::new(vec![alias(path, target)], &tree);
        assert!(check("node_modules/a", ".jig-workspace/libs/a").is_ok());
        assert!(check("node_modules/@s/a", "../.jig-workspace/libs/a").is_ok());
        for (path, target) in [
            ("node_modules/a", "../../outside"),
            ("node_modules/a", "/etc"),
            ("node_modules/a", "./.jig-workspace/libs/a"),
            ("node_modules/a", ".jig-workspace/libs/missing"),
            ("node_modules/c", ".jig-workspace/libs/a"),
            ("flow.ts", "node_modules/c"),
            ("node_modules/../x", ".jig-workspace/libs/a"),
            ("node_modules/a", ".jig-workspace/libs/../libs/a"),
        ] {
            assert!(check(path, target).is_err(), "{path} -> {target}");
        }
        // An alias through an alias, and one below another.
        let through = vec![
            alias("node_modules/a", ".jig-workspace/libs/a"),
            alias("node_modules/b", "a"),
        ];
        assert_eq!(
            Layout::new(through, &tree),
            Err("a workspace alias points through another alias")
        );
        let below = vec![
            alias("node_modules/a", ".jig-workspace/libs/a"),
            alias("node_modules/a/x", "../c"),
        ];
        assert!(Layout::new(below, &tree).is_err());
    }

    #[test]
    fn link_text_is_relative_to_the_links_directory() {
        assert_eq!(
            link_text("node_modules/a", "node_modules/.jig-workspace/libs/a"),
            ".jig-workspace/libs/a"
        );
        assert_eq!(
            link_text("node_modules/@s/a", "node_modules/.jig-workspace/libs/a"),
            "../.jig-workspace/libs/a"
        );
    }

    #[test]
    fn the_retained_json_round_trips_only_when_canonical() {
        let tree = files(&[LIB]);
        let layout = Layout::new(
            vec![alias("node_modules/a", ".jig-workspace/libs/a")],
            &tree,
        )
        .unwrap();
        let bytes = layout.to_json();
        assert_eq!(Layout::from_json(&bytes, &tree), Ok(layout.clone()));
        let mut spaced = bytes.clone();
        spaced.push(b' ');
        assert!(Layout::from_json(&spaced, &tree).is_err());
        assert!(Layout::from_json(b"{\"aliases\":[],\"x\":1}", &tree).is_err());
        assert!(layout.digest().starts_with("sha256:"));
    }

    #[test]
    fn materialized_links_verify_and_unlink_without_following() {
        let dir = tempfile::tempdir().unwrap();
        let tree = files(&[LIB]);
        crate::state::Store::write_tree(&tree, dir.path()).unwrap();
        let layout = Layout::new(
            vec![
                alias("node_modules/a", ".jig-workspace/libs/a"),
                alias("node_modules/@s/b", "../.jig-workspace/libs/a"),
            ],
            &tree,
        )
        .unwrap();
        materialize(dir.path(), &layout).unwrap();
        assert_eq!(verify(dir.path(), &layout), Ok(()));
        assert_eq!(
            std::fs::read(dir.path().join("node_modules/@s/b/index.js")).unwrap(),
            b"x"
        );
        // An extra link, a changed link and a missing link all fail.
        let extra = dir.path().join("node_modules/extra");
        std::os::unix::fs::symlink(".jig-workspace", &extra).unwrap();
        assert!(verify(dir.path(), &layout).is_err());
        std::fs::remove_file(&extra).unwrap();
        let a = dir.path().join("node_modules/a");
        std::fs::remove_file(&a).unwrap();
        assert!(verify(dir.path(), &layout).is_err());
        std::os::unix::fs::symlink(".jig-workspace/libs", &a).unwrap();
        assert!(verify(dir.path(), &layout).is_err());
        std::fs::remove_file(&a).unwrap();
        std::os::unix::fs::symlink(".jig-workspace/libs/a", &a).unwrap();
        assert_eq!(verify(dir.path(), &layout), Ok(()));
        unlink(dir.path(), &layout).unwrap();
        assert!(std::fs::symlink_metadata(&a).is_err());
        // The targets are untouched.
        assert!(dir.path().join(LIB).exists());
    }

    #[test]
    fn a_run_sees_the_flow_at_its_member_path_in_the_workspace_shape() {
        let tree = files(&[
            "FLOW.md",
            "flow.ts",
            "node_modules/own/index.js",
            "node_modules/.jig-workspace/node_modules/hoisted/index.js",
            LIB,
        ]);
        let layout = Layout::new(
            vec![alias(
                "node_modules/.jig-workspace/node_modules/a",
                "../libs/a",
            )],
            &tree,
        )
        .unwrap()
        .with_member("packages/greeter", &tree)
        .unwrap();
        assert_eq!(layout.member(), Some("packages/greeter"));
        assert_eq!(layout.run_path("flow.ts"), "packages/greeter/flow.ts");
        let (run, links) = layout.run_tree(&tree);
        assert_eq!(
            run.keys().map(String::as_str).collect::<Vec<_>>(),
            [
                "libs/a/index.js",
                "node_modules/hoisted/index.js",
                "packages/greeter/FLOW.md",
                "packages/greeter/flow.ts",
                "packages/greeter/node_modules/own/index.js",
            ]
        );
        assert_eq!(links.aliases(), [alias("node_modules/a", "../libs/a")]);
        // The member path is retained: it round-trips and is identity.
        let bytes = layout.to_json();
        assert!(bytes.ends_with(b"\"member\":\"packages/greeter\"}"));
        assert_eq!(Layout::from_json(&bytes, &tree), Ok(layout.clone()));
        let moved = Layout::new(layout.aliases.clone(), &tree)
            .unwrap()
            .with_member("apps/greeter", &tree)
            .unwrap();
        assert_ne!(moved.digest(), layout.digest());
        // Without a member path a Run's tree is the prepared tree.
        let plain = Layout::new(layout.aliases.clone(), &tree).unwrap();
        assert_eq!(plain.run_path("flow.ts"), "flow.ts");
        for unsafe_member in ["", "../x", "a//b", "node_modules/x"] {
            assert!(plain.clone().with_member(unsafe_member, &tree).is_err());
        }
    }

    #[test]
    fn a_library_colliding_with_the_flow_in_the_run_tree_fails_closed() {
        // The library `app/lib` lies inside the Flow member `app`, whose
        // own file `lib/index.js` then shares its Run path.
        let tree = files(&[
            "FLOW.md",
            "lib/index.js",
            "node_modules/.jig-workspace/app/lib/index.js",
        ]);
        assert_eq!(
            Layout::new(vec![], &tree)
                .unwrap()
                .with_member("app", &tree),
            Err("a workspace library's path collides with the Flow's files")
        );
    }

    #[test]
    fn a_changed_layout_alone_is_a_changed_target_in_review() {
        let lock = json!({"packages": {"flows/a": {"digest": "sha256:ab", "directRun": true, "uses": {}}}, "bindings": {}});
        let tree = files(&[LIB]);
        let evidence = |path: &str| {
            let layout = Layout::new(vec![alias(path, ".jig-workspace/libs/a")], &tree).unwrap();
            json!({"lock": lock, "execution": {"flows/a": {"prepared": {"digest": "sha256:01", "layout": layout.digest()}}}})
        };
        let current = evidence("node_modules/a");
        let proposed = evidence("node_modules/b");
        assert_ne!(current, proposed);
        assert_eq!(
            crate::plan::changed_targets(&current, &proposed)
                .into_iter()
                .collect::<Vec<_>>(),
            ["flow:flows/a"]
        );
        assert!(crate::plan::changed_targets(&current, &current.clone()).is_empty());
    }
}
