//! `jig test`: run each Flow's fixtures (`fixtures/<case>/case.json`
//! beside its FLOW.md; `jig_engine::run::fixture`) as trials in the same
//! envelope as `jig exec`, print a line per case with a diff of what
//! differed, and optionally write JUnit XML for CI. Nothing is admitted.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use flow::json::Value;
use jig_engine::config::HostConfig;
use jig_engine::files::Request;
use jig_engine::run::ask;
use jig_engine::run::fixture::{self, Fixture};
use jig_engine::run::trial;

use super::exec::{conduct_trial, trial_error};
use super::{load_config, project_root, terminal, CliError, Code, CommandLine};

pub struct TestArgs<'a> {
    /// Package directories; the project's Flows when empty.
    pub packages: &'a [PathBuf],
    /// Where to write JUnit XML.
    pub junit: Option<&'a Path>,
    pub config: Option<&'a Path>,
    pub base: &'a Path,
}

/// How one case ended.
enum Verdict {
    Passed,
    /// The Run gave something else: the diff of expected and actual.
    Failed(String),
    /// The case could not be run (its fixture, its trial or its files).
    Error(String),
}

struct Case {
    package: String,
    name: String,
    took: Duration,
    verdict: Verdict,
}

pub fn test(args: TestArgs<'_>) -> Result<u8, CliError> {
    let config = load_config(args.config)?;
    let packages = packages(&args)?;
    let style = match std::io::stdout().is_terminal() {
        true => terminal::Style::terminal(),
        false => terminal::Style::PLAIN,
    };
    let mut cases = Vec::new();
    for (label, dir) in &packages {
        let fixtures = match fixture::read_all(dir) {
            Ok(fixtures) => fixtures,
            Err(e) => {
                let case = Case {
                    package: label.clone(),
                    name: fixture::FIXTURES_DIR.into(),
                    took: Duration::ZERO,
                    verdict: Verdict::Error(e.to_string()),
                };
                show(&case, &style);
                cases.push(case);
                continue;
            }
        };
        if fixtures.is_empty() {
            eprintln!(
                "{}: no fixtures (add {}/<case>/{})",
                terminal::escape(label),
                fixture::FIXTURES_DIR,
                fixture::CASE_FILE
            );
        }
        for fixture in fixtures {
            let started = Instant::now();
            let verdict = match run_case(dir, &fixture, &config) {
                Ok(terminal) => match fixture.expect.check(&terminal) {
                    Ok(()) => Verdict::Passed,
                    Err(mismatch) => Verdict::Failed(mismatch.diff()),
                },
                Err(e) => Verdict::Error(format!("{}: {e}", e.code())),
            };
            let case = Case {
                package: label.clone(),
                name: fixture.name,
                took: started.elapsed(),
                verdict,
            };
            show(&case, &style);
            cases.push(case);
        }
    }
    let failed = cases
        .iter()
        .filter(|c| !matches!(c.verdict, Verdict::Passed))
        .count();
    let passed = cases.len() - failed;
    let summary = match failed {
        0 => style.paint(terminal::Role::Success, "ok"),
        _ => style.paint(terminal::Role::Failure, "FAILED"),
    };
    outln!("test result: {summary}. {passed} passed; {failed} failed");
    if let Some(path) = args.junit {
        std::fs::write(args.base.join(path), junit(&cases)).map_err(|e| {
            CliError::new(
                Code::OutputFailed,
                format!(
                    "{}: the JUnit report cannot be written: {e}",
                    path.display()
                ),
            )
        })?;
    }
    Ok(u8::from(failed > 0))
}

/// The packages to test, each with the label its lines show: those named
/// (relative to `base`), else the Flows the project's `jig.ts` declares.
fn packages(args: &TestArgs<'_>) -> Result<Vec<(String, PathBuf)>, CliError> {
    if !args.packages.is_empty() {
        return Ok(args
            .packages
            .iter()
            .map(|p| (p.display().to_string(), args.base.join(p)))
            .collect());
    }
    let root = project_root(args.base)?;
    let declarations = jig_project::capture(&root).map_err(|e| match e.is_candidate_invalid() {
        true => CliError::Candidate(e),
        false => CliError::Project(e),
    })?;
    Ok(declarations
        .flows
        .iter()
        .map(|flow| (flow.clone(), root.join(flow)))
        .collect())
}

/// Run one fixture as a trial of the package at `dir`: its terminal.
fn run_case(dir: &Path, fixture: &Fixture, config: &HostConfig) -> Result<Value, CliError> {
    let children: BTreeMap<String, PathBuf> = fixture
        .children
        .iter()
        .map(|(slot, path)| (slot.clone(), dir.join(path)))
        .collect();
    let timeout = ask::timeout(fixture.timeout.as_deref())?;
    let request = Request::parse(&fixture.attach, &[]).map_err(CliError::from)?;
    let trial =
        trial::prepare(dir, &children, fixture.settings.clone(), config).map_err(trial_error)?;
    let files = trial.files(&request, &fixture.dir, None, &[], &fixture.input)?;
    let door = CommandLine::new(false);
    let (conducted, _) = conduct_trial(&trial, &files, fixture.input.clone(), timeout, &[], &door)?;
    let terminal = conducted.terminal.to_value();
    let closed = trial.close();
    if conducted.interrupted {
        return Err(super::exit::interrupted_error());
    }
    closed.map_err(|e| {
        CliError::new(
            Code::CleanupFailed,
            format!("the private directory could not be removed: {e}"),
        )
    })?;
    Ok(terminal)
}

/// One case's line, and what differed.
fn show(case: &Case, style: &terminal::Style) {
    let name = format!(
        "{} {}",
        terminal::escape(&case.package),
        terminal::escape(&case.name)
    );
    let took = format!("({:.2}s)", case.took.as_secs_f64());
    match &case.verdict {
        Verdict::Passed => outln!(
            "{} {name} {took}",
            style.paint(terminal::Role::Success, "ok  ")
        ),
        Verdict::Failed(diff) => {
            outln!(
                "{} {name} {took}",
                style.paint(terminal::Role::Failure, "FAIL")
            );
            out!("{}", terminal::escape_lines(diff.trim_end()));
            outln!();
        }
        Verdict::Error(why) => {
            outln!("{} {name}", style.paint(terminal::Role::Failure, "FAIL"));
            outln!("  {}", terminal::escape(why));
        }
    }
}

/// The cases as JUnit XML (one `testsuite`; a differing result is a
/// `failure`, a case that could not run an `error`).
fn junit(cases: &[Case]) -> String {
    let count = |f: fn(&Verdict) -> bool| cases.iter().filter(|c| f(&c.verdict)).count();
    let failures = count(|v| matches!(v, Verdict::Failed(_)));
    let errors = count(|v| matches!(v, Verdict::Error(_)));
    let time: f64 = cases.iter().map(|c| c.took.as_secs_f64()).sum();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" time=\"{time:.3}\">",
        cases.len()
    );
    let _ = writeln!(
        out,
        "  <testsuite name=\"jig test\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" time=\"{time:.3}\">",
        cases.len()
    );
    for case in cases {
        let _ = write!(
            out,
            "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
            xml(&case.package),
            xml(&case.name),
            case.took.as_secs_f64()
        );
        match &case.verdict {
            Verdict::Passed => out.push_str("/>\n"),
            Verdict::Failed(diff) => {
                let _ = writeln!(
                    out,
                    ">\n      <failure message=\"the result differs from the fixture\">{}</failure>\n    </testcase>",
                    xml(diff)
                );
            }
            Verdict::Error(why) => {
                let _ = writeln!(
                    out,
                    ">\n      <error message=\"{}\"/>\n    </testcase>",
                    xml(why)
                );
            }
        }
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

/// Text as XML character data or an attribute value: the five special
/// characters escaped, and what XML 1.0 cannot hold (controls but tab and
/// line breaks) shown as `\u{…}`.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if c.is_control() || matches!(c, '\u{fffe}' | '\u{ffff}') => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn junit_names_each_case_and_escapes_what_xml_cannot_hold() {
        let cases = [
            Case {
                package: "flows/a".into(),
                name: "ok".into(),
                took: Duration::from_millis(1500),
                verdict: Verdict::Passed,
            },
            Case {
                package: "flows/a".into(),
                name: "bad<\u{1b}>".into(),
                took: Duration::from_millis(20),
                verdict: Verdict::Failed("-\"x\" & 'y'\n".into()),
            },
            Case {
                package: "flows/b".into(),
                name: "fixtures".into(),
                took: Duration::ZERO,
                verdict: Verdict::Error("case.json: not JSON/1".into()),
            },
        ];
        let xml = junit(&cases);
        assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites tests=\"3\" failures=\"1\" errors=\"1\" time=\"1.520\">\n"), "{xml}");
        assert!(
            xml.contains("    <testcase classname=\"flows/a\" name=\"ok\" time=\"1.500\"/>\n"),
            "{xml}"
        );
        assert!(xml.contains("name=\"bad&lt;\\u{1b}&gt;\""), "{xml}");
        assert!(
            xml.contains(">-&quot;x&quot; &amp; &apos;y&apos;\n</failure>"),
            "{xml}"
        );
        assert!(
            xml.contains("<error message=\"case.json: not JSON/1\"/>"),
            "{xml}"
        );
        assert!(xml.ends_with("  </testsuite>\n</testsuites>\n"));
    }
}
