//! The package's `package.json` and `bun.lock`: parsed, checked against the
//! source policy (default-registry, integrity-pinned sources only; the
//! bundled SDK at its exact revision) before the installer fetches anything,
//! and staged as the only inputs Bun sees.

use std::collections::BTreeMap;

use flow::json::Value;
use serde_json::json;

use super::{
    codes, refusal, Refusal, BUNDLED_SDK, BUNDLED_SDK_VERSION, BUNDLED_SDK_WORKSPACE_SPECS,
    DEPENDENCY_MAPS, MAX_LOCK_BYTES, MAX_MANIFEST_BYTES, RUNTIME_MAPS, UNSUPPORTED_MANIFEST_FIELDS,
};

/// The package's manifest, parsed, when it has runtime dependencies other
/// than the bundled SDK.
pub(super) struct Manifest {
    pub(super) value: serde_json::Map<String, Value>,
}

impl Manifest {
    pub(super) fn map(&self, name: &str) -> serde_json::Map<String, Value> {
        self.value
            .get(name)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    }

    /// Does a runtime dependency other than the bundled SDK name a
    /// `workspace:` member? The SDK named from a workspace is the bundled
    /// one unless a captured workspace holds a member of that name, so it
    /// alone never makes a package a workspace preparation.
    pub(super) fn uses_workspace(&self) -> bool {
        self.workspace_dependencies()
            .iter()
            .any(|name| name != BUNDLED_SDK)
    }

    /// Runtime dependencies naming `workspace:` members.
    pub(super) fn workspace_dependencies(&self) -> Vec<String> {
        RUNTIME_MAPS
            .iter()
            .flat_map(|m| self.map(m))
            .filter(|(_, spec)| spec.as_str().is_some_and(|s| s.starts_with("workspace:")))
            .map(|(name, _)| name)
            .collect()
    }

    /// The bundled SDK's specifier when it names it in a `workspace:` form
    /// (the reference's own examples live in a Bun workspace whose member
    /// is the SDK, and say `workspace:*`).
    pub(super) fn sdk_workspace_spec(&self) -> Option<String> {
        DEPENDENCY_MAPS.iter().find_map(|m| {
            self.map(m)
                .get(BUNDLED_SDK)
                .and_then(Value::as_str)
                .filter(|s| s.starts_with("workspace:"))
                .map(str::to_string)
        })
    }

    pub(super) fn runtime_dependencies(&self) -> Vec<String> {
        RUNTIME_MAPS
            .iter()
            .flat_map(|m| self.map(m).into_iter().map(|(name, _)| name))
            .filter(|name| name != BUNDLED_SDK)
            .collect()
    }
}

/// JSON Pointer token for a map key.
pub(super) fn pointer_token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

pub(super) fn parse_manifest(bytes: &[u8], at: &str) -> Result<Manifest, Refusal> {
    let invalid = |m: &str| refusal(codes::MANIFEST_INVALID, at, None, m);
    if bytes.len() > MAX_MANIFEST_BYTES {
        return Err(refusal(
            codes::LIMIT_EXCEEDED,
            at,
            None,
            "package.json is larger than 1 MiB",
        ));
    }
    let value: Value =
        serde_json::from_slice(bytes).map_err(|_| invalid("package.json is not valid JSON"))?;
    let Value::Object(value) = value else {
        return Err(invalid("package.json is not a JSON object"));
    };
    for map in DEPENDENCY_MAPS {
        match value.get(map) {
            None => {}
            Some(Value::Object(entries)) if entries.values().all(Value::is_string) => {}
            Some(_) => {
                return Err(refusal(
                    codes::MANIFEST_INVALID,
                    at,
                    Some(format!("/{map}")),
                    "a dependency map must be an object of version strings",
                ))
            }
        }
    }
    Ok(Manifest { value })
}

/// Reject root dependency sources other than default-registry versions,
/// ranges, tags and `npm:` aliases, before anything is resolved.
pub(super) fn check_manifest_sources(manifest: &Manifest, at: &str) -> Result<(), Refusal> {
    for map in DEPENDENCY_MAPS {
        for (name, spec) in manifest.map(map) {
            let spec = spec.as_str().unwrap_or_default();
            if name == BUNDLED_SDK {
                continue;
            }
            let target = spec.strip_prefix("npm:").map(alias_range).unwrap_or(spec);
            if let Some(kind) = unsupported_spec(target) {
                return Err(refusal(
                    codes::SOURCE_UNSUPPORTED,
                    at,
                    Some(format!("/{map}/{}", pointer_token(&name))),
                    &format!(
                        "{kind} dependencies are not supported; only the configured npm \
                         registry's integrity-pinned packages are"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// `@jigging/flow` is satisfied by the bundled SDK, at its exact revision
/// only, or named from a workspace in one of
/// [`BUNDLED_SDK_WORKSPACE_SPECS`].
pub(super) fn check_bundled_sdk(manifest: &Manifest, at: &str) -> Result<(), Refusal> {
    for map in DEPENDENCY_MAPS {
        let entries = manifest.map(map);
        match entries.get(BUNDLED_SDK).and_then(Value::as_str) {
            None => {}
            Some(BUNDLED_SDK_VERSION) => {}
            Some(spec) if BUNDLED_SDK_WORKSPACE_SPECS.contains(&spec) => {}
            Some(_) => {
                return Err(refusal(
                    codes::SOURCE_UNSUPPORTED,
                    at,
                    Some(format!("/{map}/{}", pointer_token(BUNDLED_SDK))),
                    "@jigging/flow is the SDK bundled with this jig; name its exact revision 1.0.0",
                ))
            }
        }
    }
    Ok(())
}

/// `npm:name@range` → `range` (`npm:name` alone means any version).
pub(super) fn alias_range(alias: &str) -> &str {
    let rest = alias.strip_prefix('@').unwrap_or(alias);
    match rest.find('@') {
        Some(i) => &rest[i + 1..],
        None => "",
    }
}

/// The kind of an unsupported dependency specifier, if it is one.
pub(super) fn unsupported_spec(spec: &str) -> Option<&'static str> {
    let spec = spec.trim();
    let lower = spec.to_ascii_lowercase();
    let kinds: [(&str, &'static str); 12] = [
        ("git+", "git"),
        ("git:", "git"),
        ("github:", "GitHub"),
        ("gitlab:", "git"),
        ("bitbucket:", "git"),
        ("http:", "tarball"),
        ("https:", "tarball"),
        ("file:", "file"),
        ("link:", "file"),
        ("portal:", "file"),
        ("workspace:", "workspace"),
        ("catalog:", "catalog"),
    ];
    if let Some((_, kind)) = kinds.iter().find(|(p, _)| lower.starts_with(p)) {
        return Some(kind);
    }
    if lower.starts_with("npm:") {
        return Some("nested alias");
    }
    if spec.starts_with('.') || spec.starts_with('/') || spec.starts_with('~') && spec.contains('/')
    {
        return Some("file");
    }
    if spec.contains('/') || spec.contains(':') {
        // `owner/repo` is GitHub shorthand; other schemes are foreign sources.
        return Some("GitHub");
    }
    None
}

/// The manifest Bun sees: the authored one without the bundled SDK, which
/// the host provides and no registry serves.
pub(super) fn staged_manifest(manifest: &Manifest) -> Vec<u8> {
    let mut value = manifest.value.clone();
    for map in DEPENDENCY_MAPS {
        if let Some(Value::Object(entries)) = value.get_mut(map) {
            entries.remove(BUNDLED_SDK);
        }
    }
    // Scripts never run; they are dropped so no installer revision can.
    value.remove("scripts");
    serde_json::to_vec_pretty(&Value::Object(value)).expect("a JSON value serialises")
}

/// The lock Bun sees: the authored bytes, or the same lock without the
/// bundled SDK when it names it.
pub(super) fn staged_lock(lock: &Value, authored: &[u8]) -> Vec<u8> {
    let names_sdk = lock
        .pointer("/packages")
        .and_then(Value::as_object)
        .is_some_and(|p| p.contains_key(BUNDLED_SDK))
        || lock["workspaces"]
            .as_object()
            .into_iter()
            .flat_map(|w| w.values())
            .any(|member| {
                DEPENDENCY_MAPS
                    .iter()
                    .any(|m| member.get(m).and_then(|d| d.get(BUNDLED_SDK)).is_some())
            });
    if !names_sdk {
        return authored.to_vec();
    }
    let mut lock = lock.clone();
    if let Some(Value::Object(packages)) = lock.get_mut("packages") {
        packages.remove(BUNDLED_SDK);
    }
    if let Some(Value::Object(workspaces)) = lock.get_mut("workspaces") {
        for member in workspaces.values_mut() {
            for map in DEPENDENCY_MAPS {
                if let Some(Value::Object(entries)) = member.get_mut(map) {
                    entries.remove(BUNDLED_SDK);
                }
            }
        }
    }
    serde_json::to_vec_pretty(&lock).expect("a JSON value serialises")
}

/// Parse Bun's text lock: JSON with trailing commas allowed.
pub(crate) fn parse_lock(bytes: &[u8]) -> Result<Value, &'static str> {
    if bytes.len() > MAX_LOCK_BYTES {
        return Err("is larger than 2 MiB");
    }
    let text = std::str::from_utf8(bytes).map_err(|_| "is not UTF-8")?;
    let json = strip_trailing_commas(text);
    let value: Value = serde_json::from_str(&json).map_err(|_| "is not a text Bun lock")?;
    let Some(top) = value.as_object() else {
        return Err("is not a text Bun lock");
    };
    const KNOWN: [&str; 5] = [
        "lockfileVersion",
        "configVersion",
        "workspaces",
        "packages",
        "trustedDependencies",
    ];
    if let Some(key) = top.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        // Overrides, patches and catalogs included: fail closed.
        return Err(if UNSUPPORTED_MANIFEST_FIELDS.contains(&key.as_str()) {
            "records overrides, patches or catalogs, which are not supported"
        } else {
            "has a field this jig does not know"
        });
    }
    match top.get("lockfileVersion").and_then(Value::as_u64) {
        Some(0..=2) => {}
        _ => return Err("has an unsupported lockfileVersion"),
    }
    if !top.get("workspaces").is_some_and(Value::is_object)
        || !top.get("packages").is_none_or(Value::is_object)
    {
        return Err("lacks its workspaces or packages table");
    }
    Ok(value)
}

/// Drop commas that directly precede `}` or `]` outside strings.
pub(super) fn strip_trailing_commas(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if in_string {
            out.push(c);
            if c == '\\' && i + 1 < chars.len() {
                out.push(chars[i + 1]);
                i += 1;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if c == ',' {
            let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
            if !matches!(next, Some('}') | Some(']')) {
                out.push(c);
            }
        } else {
            out.push(c);
        }
        i += 1;
    }
    out
}

/// Every lock entry must be a default-registry package with SRI integrity
/// (an npm alias resolves to such a tuple); anything else is refused before
/// any fetch.
pub(super) fn check_lock_sources(
    lock: &Value,
    registry: &str,
    members: &BTreeMap<String, String>,
    at: &str,
) -> Result<(), Refusal> {
    let workspaces = lock["workspaces"]
        .as_object()
        .expect("checked by parse_lock");
    if let Some(member) = workspaces
        .keys()
        .find(|k| !k.is_empty() && !members.contains_key(*k))
    {
        return Err(refusal(
            codes::SOURCE_UNSUPPORTED,
            at,
            Some(format!("/workspaces/{}", pointer_token(member))),
            "bun.lock names a workspace member, but this package is not a declared workspace",
        ));
    }
    let empty = serde_json::Map::new();
    let packages = lock["packages"].as_object().unwrap_or(&empty);
    for (key, entry) in packages {
        let pointer = Some(format!("/packages/{}", pointer_token(key)));
        let unsupported = |kind: &str| {
            refusal(
                codes::SOURCE_UNSUPPORTED,
                at,
                pointer.clone(),
                &format!(
                    "bun.lock has a {kind} entry; only the configured npm registry's \
                     integrity-pinned packages are supported"
                ),
            )
        };
        let Some(tuple) = entry.as_array() else {
            return Err(refusal(
                codes::LOCK_INVALID,
                at,
                pointer.clone(),
                "bun.lock has a package entry that is not a tuple",
            ));
        };
        let id = tuple.first().and_then(Value::as_str).unwrap_or_default();
        let (name, resolution) = split_package_id(id).unwrap_or_default();
        if let Some(member) = resolution.strip_prefix("workspace:") {
            // A workspace entry must name a declared member, under its name.
            if members.get(member).map(String::as_str) == Some(name) && tuple.len() == 1 {
                continue;
            }
            // The SDK's member in the workspace it was locked in: without
            // such a member here it is the bundled SDK, which the staged
            // lock leaves out.
            if name == BUNDLED_SDK && !members.values().any(|m| m == BUNDLED_SDK) {
                continue;
            }
            return Err(unsupported("undeclared workspace"));
        }
        if !is_exact_version(resolution) {
            return Err(unsupported(resolution_kind(resolution)));
        }
        match (tuple.get(1), tuple.get(2), tuple.get(3), tuple.len()) {
            (Some(Value::String(url)), Some(Value::Object(_)), Some(Value::String(sri)), 4) => {
                if !url.is_empty() && !url.starts_with(registry) {
                    return Err(unsupported("custom-registry"));
                }
                if !is_sri(sri) {
                    return Err(unsupported("non-integrity"));
                }
            }
            (Some(Value::String(_)), Some(Value::Object(_)), _, _) => {
                return Err(unsupported("non-integrity"))
            }
            _ => {
                return Err(refusal(
                    codes::LOCK_INVALID,
                    at,
                    pointer.clone(),
                    "bun.lock has a package entry of an unknown shape",
                ))
            }
        }
    }
    Ok(())
}

/// `name@resolution`, the name possibly scoped (`@scope/name`).
pub(super) fn split_package_id(id: &str) -> Option<(&str, &str)> {
    let start = usize::from(id.starts_with('@'));
    let at = id[start..].find('@')? + start;
    Some((&id[..at], &id[at + 1..]))
}

pub(super) fn resolution_kind(resolution: &str) -> &'static str {
    let lower = resolution.to_ascii_lowercase();
    if lower.starts_with("github:") {
        "GitHub"
    } else if lower.starts_with("git+") || lower.starts_with("git:") {
        "git"
    } else if lower.starts_with("http:") || lower.starts_with("https:") || lower.ends_with(".tgz") {
        "tarball"
    } else if lower.starts_with("workspace:") {
        "undeclared workspace"
    } else if lower.starts_with("file:") || lower.starts_with("link:") || lower.starts_with('.') {
        "file"
    } else {
        "non-registry"
    }
}

/// `1.2.3`, `1.2.3-beta.1`, `1.2.3+build`: what a registry resolution is.
pub(super) fn is_exact_version(text: &str) -> bool {
    let (core, _) = text.split_once('+').unwrap_or((text, ""));
    let (core, pre) = core.split_once('-').unwrap_or((core, ""));
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        && pre
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
}

/// Supported SRI: sha512, sha384 or sha256 with a base64 digest.
pub(super) fn is_sri(text: &str) -> bool {
    let Some((algorithm, digest)) = text.split_once('-') else {
        return false;
    };
    matches!(algorithm, "sha512" | "sha384" | "sha256")
        && !digest.is_empty()
        && digest
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b))
}

/// The lock must record exactly the manifest's root dependencies (the
/// bundled SDK aside) and an entry for each; else it is stale.
pub(super) fn check_lock_current(
    lock: &Value,
    member: &str,
    manifest: &Manifest,
    at: &str,
) -> Result<(), Refusal> {
    let stale = |m: &str| refusal(codes::LOCK_STALE, at, None, m);
    let root = lock["workspaces"].get(member).cloned().unwrap_or(json!({}));
    for map in DEPENDENCY_MAPS {
        let mut recorded = root
            .get(map)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mut declared = manifest.map(map);
        recorded.remove(BUNDLED_SDK);
        declared.remove(BUNDLED_SDK);
        if recorded != declared {
            return Err(stale(
                "bun.lock does not record the manifest's dependencies; run bun install to \
                 update it (review never repairs a lock)",
            ));
        }
    }
    let packages = lock["packages"].as_object();
    for name in manifest.runtime_dependencies() {
        if !member.is_empty() {
            // Member dependencies may be nested under the member's name.
            break;
        }
        if !packages.is_some_and(|p| p.contains_key(&name)) {
            return Err(stale(
                "bun.lock has no entry for a manifest dependency; run bun install to update it",
            ));
        }
    }
    Ok(())
}
