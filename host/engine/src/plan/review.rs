//! The review text: what an operator approves. It leads with added, changed
//! and removed packages, Bindings and targets, shows full Package/1 digests,
//! and escapes every project-controlled string.

use std::collections::BTreeSet;
use std::fmt::Write;

use flow::json::{ascii_quote, Value};

type Describe = fn(&Value) -> String;

fn entries(lock: Option<&Value>, section: &str) -> serde_json::Map<String, Value> {
    lock.and_then(|l| l.get(section))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

fn targets(lock: Option<&Value>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (path, package) in entries(lock, "packages") {
        if package.get("directRun") == Some(&Value::Bool(true)) {
            out.insert(format!("flow:{path}"));
        }
    }
    for id in entries(lock, "bindings").keys() {
        out.insert(format!("binding:{id}"));
    }
    out
}

fn describe_binding(binding: &Value) -> String {
    let package = binding
        .get("packagePath")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut text = format!("package {}", ascii_quote(package));
    let settings = binding.get("settings").cloned().unwrap_or(Value::Null);
    text.push_str(&format!(
        " settings {}",
        ascii_quote(&flow::json::canonical_string(&settings))
    ));
    if let Some(slots) = binding.get("slots").and_then(Value::as_object) {
        for (slot, target) in slots {
            let selector = match (
                target.get("kind").and_then(Value::as_str),
                target.get("path"),
                target.get("id"),
            ) {
                (Some("flow"), Some(Value::String(p)), _) => format!("flow:{p}"),
                (Some("binding"), _, Some(Value::String(id))) => format!("binding:{id}"),
                _ => "?".into(),
            };
            text.push_str(&format!(
                " slot {} -> {}",
                ascii_quote(slot),
                ascii_quote(&selector)
            ));
        }
    }
    if let Some(commands) = binding.get("commands") {
        text.push_str(&format!(
            " commands {}",
            ascii_quote(&flow::json::canonical_string(commands))
        ));
    }
    text
}

fn describe_package(package: &Value) -> String {
    let digest = package.get("digest").and_then(Value::as_str).unwrap_or("");
    let mut text = digest.to_string();
    if package.get("directRun") != Some(&Value::Bool(true)) {
        text.push_str(" (not a direct target)");
    }
    if let Some(uses) = package.get("uses").and_then(Value::as_object) {
        for (slot, contract) in uses {
            let id = contract.get("id").and_then(Value::as_str).unwrap_or("");
            let version = contract
                .get("version")
                .and_then(Value::as_str)
                .unwrap_or("");
            // The digest (computed by this host, never project text)
            // names which published revision the package declared: one
            // id and version can have several.
            let digest = contract.get("digest").and_then(Value::as_str).unwrap_or("");
            text.push_str(&format!(
                " uses {} = {}@{} {}",
                ascii_quote(slot),
                ascii_quote(id),
                ascii_quote(version),
                digest
            ));
        }
    }
    text
}

/// The targets of both Plans whose execution changed: their package
/// identity, their Binding, or the private execution evidence (recipe,
/// providers, prepared dependencies) of their package. Only the names are
/// shown; the evidence itself never is.
pub(crate) fn changed_targets(current: &Value, proposed: &Value) -> BTreeSet<String> {
    let identity = |plan: &Value, path: &str| {
        (
            plan["lock"]["packages"][path].clone(),
            plan["execution"][path].clone(),
        )
    };
    let mut out = BTreeSet::new();
    for target in targets(Some(&proposed["lock"])).intersection(&targets(Some(&current["lock"]))) {
        let changed = if let Some(path) = target.strip_prefix("flow:") {
            identity(current, path) != identity(proposed, path)
        } else {
            let id = target.strip_prefix("binding:").unwrap_or_default();
            let (was, now) = (
                &current["lock"]["bindings"][id],
                &proposed["lock"]["bindings"][id],
            );
            let package = |b: &Value| b["packagePath"].as_str().unwrap_or_default().to_string();
            was != now || identity(current, &package(was)) != identity(proposed, &package(now))
        };
        if changed {
            out.insert(target.clone());
        }
    }
    out
}

/// Render the change from `current` (the admitted lock, if any) to `proposed`.
/// Targets in `changed` (see [`changed_targets`]) are marked `~`.
/// `notes` (each already escaped) say what the host made of a package's
/// own files. With `details`, the complete current and proposed policy
/// follow.
pub(crate) fn review_text(
    current: Option<&Value>,
    proposed: &Value,
    changed: &BTreeSet<String>,
    providers: &Value,
    notes: &[String],
    details: bool,
) -> String {
    let mut out = String::new();
    let sections: [(&str, &str, Describe); 2] = [
        ("Packages", "packages", describe_package),
        ("Bindings", "bindings", describe_binding),
    ];
    for (title, section, describe) in sections {
        let before = entries(current, section);
        let after = entries(Some(proposed), section);
        let mut lines = Vec::new();
        for (key, value) in &after {
            match before.get(key) {
                None => lines.push(format!("  + {} {}", ascii_quote(key), describe(value))),
                Some(old) if old != value => {
                    lines.push(format!("  ~ {} {}", ascii_quote(key), describe(value)));
                    lines.push(format!("      was {}", describe(old)));
                }
                Some(_) => {}
            }
        }
        for (key, value) in &before {
            if !after.contains_key(key) {
                lines.push(format!("  - {} {}", ascii_quote(key), describe(value)));
            }
        }
        if !lines.is_empty() {
            let _ = writeln!(out, "{title}:");
            for line in lines {
                let _ = writeln!(out, "{line}");
            }
        }
    }
    let before = targets(current);
    let after = targets(Some(proposed));
    let _ = writeln!(out, "Targets:");
    for target in &after {
        let mark = match (before.contains(target), changed.contains(target)) {
            (false, _) => '+',
            (true, true) => '~',
            (true, false) => ' ',
        };
        let _ = writeln!(out, "  {mark} {}", ascii_quote(target));
    }
    for target in before.difference(&after) {
        let _ = writeln!(out, "  - {}", ascii_quote(target));
    }
    if let Some(served) = providers.as_object().filter(|m| !m.is_empty()) {
        let _ = writeln!(out, "Providers:");
        for (slot, provider) in served {
            let name = provider.get("name").and_then(Value::as_str).unwrap_or("");
            let kind = provider.get("kind").and_then(Value::as_str).unwrap_or("");
            let mut line = format!(
                "  {} served by {} ({kind})",
                ascii_quote(slot),
                ascii_quote(name)
            );
            // The Agent client's non-secret allowlist (seed 002 §6): never
            // a key, a key file or another private path.
            for field in ["client", "api", "endpoint", "model"] {
                if let Some(value) = provider.get(field).and_then(Value::as_str) {
                    line.push_str(&format!(" {field} {}", ascii_quote(value)));
                }
            }
            // The names of the operator's grants (never their values: a
            // directory is a private path).
            if let Some(grants) = provider.get("grants").and_then(Value::as_array) {
                let names: Vec<&str> = grants.iter().filter_map(Value::as_str).collect();
                line.push_str(&format!(" grants {}", names.join(",")));
            }
            let _ = writeln!(out, "{line}");
        }
    }
    if !notes.is_empty() {
        let _ = writeln!(out, "Notes:");
        for note in notes {
            let _ = writeln!(out, "  {note}");
        }
    }
    if details {
        let _ = writeln!(out, "Current policy:");
        match current {
            Some(lock) => {
                let _ = writeln!(out, "  {}", ascii_pretty(lock, "  "));
            }
            None => {
                let _ = writeln!(out, "  (nothing admitted)");
            }
        }
        let _ = writeln!(out, "Proposed policy:");
        let _ = writeln!(out, "  {}", ascii_pretty(proposed, "  "));
    }
    out
}

/// `value` as indented JSON, each line after the first led by `indent`,
/// with every character outside printable ASCII a `\u` escape: still
/// JSON, and nothing a terminal acts on.
fn ascii_pretty(value: &Value, indent: &str) -> String {
    let pretty = serde_json::to_string_pretty(value).unwrap_or_default();
    let mut out = String::with_capacity(pretty.len());
    for c in pretty.chars() {
        match c {
            '\n' => {
                out.push('\n');
                out.push_str(indent);
            }
            ' '..='~' => out.push(c),
            _ => {
                for unit in c.encode_utf16(&mut [0; 2]) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn first_review_lists_the_greeting_package_and_target() {
        let proposed = json!({"packages": {"flows/hello": {"digest": "sha256:ab", "directRun": true, "uses": {}}}, "bindings": {}});
        let text = review_text(None, &proposed, &BTreeSet::new(), &json!({}), &[], false);
        assert_eq!(
            text,
            "Packages:\n  + \"flows/hello\" sha256:ab\nTargets:\n  + \"flow:flows/hello\"\n"
        );
    }

    #[test]
    fn a_use_names_the_contract_revision_the_package_declared() {
        let digest = jig_provider_builtin::agent::NO_CHANNELS_DIGEST;
        let proposed = json!({"packages": {"flows/ask": {"digest": "sha256:ab", "directRun": true,
            "uses": {"agent": {"id": "https://jig.md/contracts/agent-run", "version": "1.0.0", "digest": digest}}}},
            "bindings": {}});
        let text = review_text(None, &proposed, &BTreeSet::new(), &json!({}), &[], false);
        assert!(
            text.contains(&format!("  + \"flows/ask\" sha256:ab uses \"agent\" = \"https://jig.md/contracts/agent-run\"@\"1.0.0\" {digest}\n")),
            "{text}"
        );
    }

    #[test]
    fn notes_follow_the_targets_and_providers() {
        let proposed = json!({"packages": {}, "bindings": {}});
        let note = "\"flows/a/package.json\" names @jigging/flow \"workspace:*\": the bundled SDK 1.0.0 is used".to_string();
        let text = review_text(
            None,
            &proposed,
            &BTreeSet::new(),
            &json!({}),
            std::slice::from_ref(&note),
            false,
        );
        assert_eq!(text, format!("Targets:\nNotes:\n  {note}\n"));
    }

    #[test]
    fn an_agent_pin_names_client_api_endpoint_and_model() {
        let proposed = json!({"packages": {}, "bindings": {}});
        let providers = json!({"flows/ask#agent": {"kind": "builtin", "name": "agent-run",
            "client": "openai-compatible", "api": "responses",
            "endpoint": "http://127.0.0.1:9/v1", "model": "m-1"}});
        for details in [false, true] {
            let text = review_text(None, &proposed, &BTreeSet::new(), &providers, &[], details);
            assert!(text.contains("  \"flows/ask#agent\" served by \"agent-run\" (builtin) client \"openai-compatible\" api \"responses\" endpoint \"http://127.0.0.1:9/v1\" model \"m-1\"\n"), "{text}");
        }
    }

    #[test]
    fn details_show_each_policy_as_indented_json_that_escapes_what_a_terminal_acts_on() {
        let proposed = json!({"packages": {"flows/\u{1b}[2J\u{e9}\u{1f600}": {"digest": "sha256:ab", "directRun": true, "uses": {}}}, "bindings": {}});
        let text = review_text(None, &proposed, &BTreeSet::new(), &json!({}), &[], true);
        let policy = &text[text.find("Proposed policy:\n").unwrap()..];
        assert_eq!(
            policy,
            "Proposed policy:\n  {\n    \"bindings\": {},\n    \"packages\": {\n      \"flows/\\u001b[2J\\u00e9\\ud83d\\ude00\": {\n        \"digest\": \"sha256:ab\",\n        \"directRun\": true,\n        \"uses\": {}\n      }\n    }\n  }\n"
        );
        let json: String = policy.lines().skip(1).collect();
        let parsed: Value = serde_json::from_str(&json).unwrap();
        assert_eq!(parsed, proposed);
        assert!(text.contains("Current policy:\n  (nothing admitted)\n"));
    }

    #[test]
    fn control_characters_in_names_are_escaped() {
        let proposed = json!({"packages": {"flows/\u{1b}[2J": {"digest": "sha256:ab", "directRun": false, "uses": {}}}, "bindings": {}});
        let text = review_text(None, &proposed, &BTreeSet::new(), &json!({}), &[], false);
        assert!(text.contains("\\u001b[2J"));
        assert!(!text.contains('\u{1b}'));
    }

    #[test]
    fn a_target_whose_prepared_dependencies_changed_is_marked_changed() {
        let lock = json!({"packages": {"flows/a": {"digest": "sha256:ab", "directRun": true, "uses": {}}, "flows/b": {"digest": "sha256:cd", "directRun": true, "uses": {}}}, "bindings": {"x": {"packagePath": "flows/a", "settings": {}, "slots": {}}}});
        let current = json!({"lock": lock, "execution": {"flows/a": {"prepared": {"digest": "sha256:01"}}, "flows/b": {}}});
        let mut proposed = current.clone();
        proposed["execution"]["flows/a"]["prepared"]["digest"] = json!("sha256:02");
        let changed = changed_targets(&current, &proposed);
        assert_eq!(
            changed.into_iter().collect::<Vec<_>>(),
            ["binding:x", "flow:flows/a"]
        );
        let text = review_text(
            Some(&lock),
            &lock,
            &changed_targets(&current, &proposed),
            &json!({}),
            &[],
            false,
        );
        assert_eq!(
            text,
            "Targets:\n  ~ \"binding:x\"\n  ~ \"flow:flows/a\"\n    \"flow:flows/b\"\n"
        );
        assert!(!text.contains("sha256:0"), "evidence is never shown");
    }
}
