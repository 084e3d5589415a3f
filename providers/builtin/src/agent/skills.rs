//! Skills (seed 002 §8, docs/src/agents.md): the selected `skills/<name>/`
//! subtrees of the calling package, rendered as read-only instruction text
//! for that one call. They grant no tools, network, files or authority and
//! are never installed as native skills. A child's skills come only from
//! the child's own admitted package, because the host passes each call the
//! files of the package that made it.

use std::collections::BTreeMap;

/// At most this many skills per call.
pub const MAX_SKILLS: usize = 64;
/// At most this many files across the selected skills.
pub const MAX_SKILL_FILES: usize = 1024;
/// At most this many bytes of file content across the selected skills.
pub const MAX_SKILL_BYTES: usize = 1024 * 1024;
/// The longest skill name (a LocalName).
pub const MAX_SKILL_NAME_CHARS: usize = 64;
/// The rendered provider input (instructions plus skills text) is at most
/// this many bytes.
pub const MAX_RENDERED_BYTES: usize = 1024 * 1024;

/// Why a selection cannot be projected; `code` is the stable detail code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SkillError {
    pub code: &'static str,
    pub message: String,
}

fn error(code: &'static str, message: impl Into<String>) -> SkillError {
    SkillError {
        code,
        message: message.into(),
    }
}

/// A LocalName: `^[a-z0-9]+(?:-[a-z0-9]+)*$`, at most 64 characters.
pub fn is_local_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_SKILL_NAME_CHARS
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// The skills text for `names` from the package `files` (path → bytes),
/// or `None` when no skill is selected.
pub fn render(
    names: &[String],
    files: &BTreeMap<String, Vec<u8>>,
) -> Result<Option<String>, SkillError> {
    if names.is_empty() {
        return Ok(None);
    }
    if names.len() > MAX_SKILLS {
        return Err(error(
            "AGENT_RUN_SKILL_SELECTION_INVALID",
            format!("at most {MAX_SKILLS} skills may be selected"),
        ));
    }
    for (i, name) in names.iter().enumerate() {
        if !is_local_name(name) {
            return Err(error(
                "AGENT_RUN_SKILL_SELECTION_INVALID",
                format!("skill {i} is not a LocalName"),
            ));
        }
        if i > 0 && names[i - 1].as_bytes() >= name.as_bytes() {
            return Err(error(
                "AGENT_RUN_SKILL_SELECTION_INVALID",
                "skill names must be unique and in ascending byte order",
            ));
        }
    }
    let mut count = 0usize;
    let mut bytes = 0usize;
    let mut text = String::from(
        "The following skills are read-only guidance from the package for this task. \
         They grant no tools, files, network or other authority.\n",
    );
    for name in names {
        let prefix = format!("skills/{name}/");
        let skill_md = format!("{prefix}SKILL.md");
        if !files.contains_key(&skill_md) {
            return Err(error(
                "AGENT_RUN_SKILL_UNKNOWN",
                format!("the package has no skills/{name}/SKILL.md"),
            ));
        }
        // SKILL.md first, then the rest of the subtree in byte order.
        let rest = files
            .range(prefix.clone()..)
            .take_while(|(path, _)| path.starts_with(&prefix))
            .filter(|(path, _)| **path != skill_md);
        let subtree = std::iter::once((&skill_md, &files[&skill_md])).chain(rest);
        text.push_str(&format!("\n<skill name=\"{name}\">\n"));
        for (path, content) in subtree {
            count += 1;
            bytes += content.len();
            if count > MAX_SKILL_FILES {
                return Err(error(
                    "AGENT_RUN_SKILL_PROJECTION_LIMIT",
                    format!("the selected skills have more than {MAX_SKILL_FILES} files"),
                ));
            }
            if bytes > MAX_SKILL_BYTES {
                return Err(error(
                    "AGENT_RUN_SKILL_PROJECTION_LIMIT",
                    format!("the selected skills hold more than {MAX_SKILL_BYTES} bytes"),
                ));
            }
            let content = std::str::from_utf8(content).map_err(|_| {
                error(
                    "AGENT_RUN_SKILL_CONTENT_INVALID",
                    format!("{path} is not UTF-8"),
                )
            })?;
            let relative = &path[prefix.len()..];
            text.push_str(&format!("<file path=\"{relative}\">\n{content}"));
            if !content.ends_with('\n') {
                text.push('\n');
            }
            text.push_str("</file>\n");
        }
        text.push_str("</skill>\n");
    }
    Ok(Some(text))
}

/// The rendered input (instructions plus skills text) within
/// [`MAX_RENDERED_BYTES`].
pub fn check_rendered(instructions: &str, skills: Option<&str>) -> Result<(), SkillError> {
    let total = instructions.len() + skills.map_or(0, str::len);
    if total > MAX_RENDERED_BYTES {
        return Err(error(
            "AGENT_RUN_SKILL_PROJECTION_LIMIT",
            format!("the rendered Agent input is {total} bytes; at most {MAX_RENDERED_BYTES}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(pairs: &[(&str, &[u8])]) -> BTreeMap<String, Vec<u8>> {
        pairs
            .iter()
            .map(|(p, c)| (p.to_string(), c.to_vec()))
            .collect()
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn no_selection_renders_nothing() {
        assert_eq!(render(&[], &BTreeMap::new()), Ok(None));
    }

    #[test]
    fn the_selected_subtrees_are_rendered_skill_md_first() {
        let f = files(&[
            ("FLOW.md", b"x"),
            ("skills/alpha/SKILL.md", b"Be brief."),
            ("skills/alpha/a-notes.md", b"Note."),
            ("skills/beta/SKILL.md", b"Beta.\n"),
            ("skills/gamma/SKILL.md", b"Unselected."),
            ("skills/alphabet/SKILL.md", b"Not alpha."),
        ]);
        let text = render(&names(&["alpha", "beta"]), &f).unwrap().unwrap();
        assert!(text.contains("<skill name=\"alpha\">\n<file path=\"SKILL.md\">\nBe brief.\n</file>\n<file path=\"a-notes.md\">\nNote.\n</file>\n</skill>"));
        assert!(text.contains("<skill name=\"beta\">\n<file path=\"SKILL.md\">\nBeta.\n</file>"));
        assert!(!text.contains("Unselected"));
        assert!(!text.contains("Not alpha"));
    }

    #[test]
    fn names_are_local_names_unique_and_ascending() {
        let f = files(&[("skills/a/SKILL.md", b"a"), ("skills/b/SKILL.md", b"b")]);
        for bad in [&["b", "a"][..], &["a", "a"], &["A"], &["a_b"], &["-a"]] {
            let e = render(&names(bad), &f).unwrap_err();
            assert_eq!(e.code, "AGENT_RUN_SKILL_SELECTION_INVALID", "{bad:?}");
        }
        let long = "a".repeat(MAX_SKILL_NAME_CHARS + 1);
        assert!(!is_local_name(&long));
        assert!(is_local_name(&"a".repeat(MAX_SKILL_NAME_CHARS)));
    }

    #[test]
    fn a_skill_needs_an_exact_case_skill_md() {
        let f = files(&[("skills/a/skill.md", b"a")]);
        assert_eq!(
            render(&names(&["a"]), &f).unwrap_err().code,
            "AGENT_RUN_SKILL_UNKNOWN"
        );
        assert_eq!(
            render(&names(&["missing"]), &f).unwrap_err().code,
            "AGENT_RUN_SKILL_UNKNOWN"
        );
    }

    #[test]
    fn at_most_64_skills() {
        let mut pairs = Vec::new();
        let list: Vec<String> = (0..=MAX_SKILLS).map(|i| format!("s{i:03}")).collect();
        for n in &list {
            pairs.push((format!("skills/{n}/SKILL.md"), b"x".to_vec()));
        }
        let f: BTreeMap<String, Vec<u8>> = pairs.into_iter().collect();
        assert!(render(&list[..MAX_SKILLS], &f).is_ok());
        assert_eq!(
            render(&list, &f).unwrap_err().code,
            "AGENT_RUN_SKILL_SELECTION_INVALID"
        );
    }

    #[test]
    fn at_most_1024_files() {
        let mut f = BTreeMap::new();
        f.insert("skills/a/SKILL.md".to_string(), b"x".to_vec());
        for i in 1..MAX_SKILL_FILES {
            f.insert(format!("skills/a/f{i:04}"), b"x".to_vec());
        }
        assert!(render(&names(&["a"]), &f).is_ok());
        f.insert("skills/a/past".to_string(), b"x".to_vec());
        assert_eq!(
            render(&names(&["a"]), &f).unwrap_err().code,
            "AGENT_RUN_SKILL_PROJECTION_LIMIT"
        );
    }

    #[test]
    fn at_most_one_mib_of_content() {
        let mut f = BTreeMap::new();
        f.insert(
            "skills/a/SKILL.md".to_string(),
            vec![b'x'; MAX_SKILL_BYTES - 1],
        );
        f.insert("skills/b/SKILL.md".to_string(), b"y".to_vec());
        assert!(render(&names(&["a", "b"]), &f).is_ok());
        f.insert("skills/b/SKILL.md".to_string(), b"yy".to_vec());
        assert_eq!(
            render(&names(&["a", "b"]), &f).unwrap_err().code,
            "AGENT_RUN_SKILL_PROJECTION_LIMIT"
        );
    }

    #[test]
    fn content_must_be_utf8() {
        let f = files(&[
            ("skills/a/SKILL.md", b"ok"),
            ("skills/a/bin", &[0xff, 0xfe]),
        ]);
        assert_eq!(
            render(&names(&["a"]), &f).unwrap_err().code,
            "AGENT_RUN_SKILL_CONTENT_INVALID"
        );
    }

    #[test]
    fn the_rendered_input_is_at_most_one_mib() {
        let half = "x".repeat(MAX_RENDERED_BYTES / 2);
        assert!(check_rendered(&half, Some(&half)).is_ok());
        let more = format!("{half}x");
        assert_eq!(
            check_rendered(&half, Some(&more)).unwrap_err().code,
            "AGENT_RUN_SKILL_PROJECTION_LIMIT"
        );
    }
}
