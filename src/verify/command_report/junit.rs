//! A JUnit XML report as pytest `--junitxml`, cargo-nextest, jest-junit and
//! go-junit-report write it: a `<testsuites>` or `<testsuite>` root, `<testcase
//! classname name>` elements at any depth of nested suites, each failed by a
//! `<failure>` or `<error>` child and not run with a `<skipped>` one. Read with
//! bounded size and depth; anything else is refused, never guessed at.

use std::io::Read;
use std::path::Path;

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

/// Largest report read.
pub(crate) const MAX_BYTES: u64 = 16 * 1024 * 1024;
/// Deepest element nesting accepted.
const MAX_DEPTH: usize = 64;

/// How one test case ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// No failure, error or skip recorded.
    Passed,
    /// A `<failure>`.
    Failed,
    /// An `<error>`.
    Error,
    /// A `<skipped>`: it did not run.
    Skipped,
}

/// One `<testcase>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Case {
    /// `classname::name` (just `name` when the case has no classname).
    pub id: String,
    /// How it ended.
    pub outcome: Outcome,
}

impl Case {
    /// The case is named by an absolute path (`classname::/w/a.test.js`).
    pub(crate) fn name_is_path(&self) -> bool {
        self.id
            .rsplit("::")
            .next()
            .is_some_and(|n| n.starts_with('/'))
    }
}

/// Why a report could not be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum JunitError {
    /// No file at the path.
    #[error("was not written")]
    Missing,
    /// A symlink, a directory or another non-file.
    #[error("is not a regular file")]
    NotAFile,
    /// Over [`MAX_BYTES`].
    #[error("is larger than {} MiB", MAX_BYTES / (1024 * 1024))]
    TooLarge,
    /// Reading failed.
    #[error("could not be read: {0}")]
    Io(#[from] std::io::Error),
    /// Not well-formed XML.
    #[error("is not well-formed XML: {0}")]
    Xml(String),
    /// Well-formed, but not JUnit.
    #[error("is not a JUnit report: {0}")]
    NotJunit(String),
}

/// Reads the report at `path` (never following a symlink) and parses it.
pub(crate) fn read(path: &Path) -> Result<Vec<Case>, JunitError> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(JunitError::Missing),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(JunitError::NotAFile),
        Err(e) => return Err(e.into()),
    };
    if !file.metadata()?.is_file() {
        return Err(JunitError::NotAFile);
    }
    let mut bytes = Vec::new();
    file.take(MAX_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(JunitError::TooLarge);
    }
    parse(&bytes)
}

/// Parses report bytes into its test cases.
pub(crate) fn parse(bytes: &[u8]) -> Result<Vec<Case>, JunitError> {
    let mut reader = Reader::from_reader(bytes);
    let mut buf = Vec::new();
    let mut stack: Vec<String> = Vec::new();
    let mut cases = Vec::new();
    let mut open_case: Option<usize> = None;
    let mut root_seen = false;
    loop {
        let ev = reader
            .read_event_into(&mut buf)
            .map_err(|e| JunitError::Xml(format!("at byte {}: {e}", reader.error_position())))?;
        match ev {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let empty = matches!(ev, Event::Empty(_));
                let name: String = e.local_name().as_ref().to_owned();
                if stack.is_empty() {
                    if root_seen {
                        return Err(JunitError::Xml("more than one root element".into()));
                    }
                    root_seen = true;
                    if name != "testsuites" && name != "testsuite" {
                        return Err(JunitError::NotJunit(format!(
                            "the root is <{name}>, not <testsuites> or <testsuite>"
                        )));
                    }
                }
                if name == "testcase" {
                    cases.push(Case {
                        id: case_id(e)?,
                        outcome: Outcome::Passed,
                    });
                    open_case = (!empty).then(|| cases.len() - 1);
                } else if let Some(i) = open_case {
                    mark(&mut cases[i].outcome, &name);
                }
                if !empty {
                    if stack.len() >= MAX_DEPTH {
                        return Err(JunitError::NotJunit(format!(
                            "elements nest deeper than {MAX_DEPTH}"
                        )));
                    }
                    stack.push(name);
                }
            }
            Event::End(_) => {
                let closed = stack.pop();
                open_case = open_case.filter(|_| closed.as_deref() != Some("testcase"));
            }
            Event::Eof => {
                if let Some(open) = stack.last() {
                    return Err(JunitError::Xml(format!("it ends inside <{open}>")));
                }
                break;
            }
            Event::DocType(_) => {
                return Err(JunitError::NotJunit("a DOCTYPE is not accepted".into()));
            }
            _ => {}
        }
        buf.clear();
    }
    if !root_seen {
        return Err(JunitError::Xml("no root element".into()));
    }
    Ok(cases)
}

/// A child element of a case that says how it ended; the worst one wins.
fn mark(outcome: &mut Outcome, child: &str) {
    let seen = match child {
        "failure" => Outcome::Failed,
        "error" => Outcome::Error,
        "skipped" => Outcome::Skipped,
        _ => return,
    };
    *outcome = match (*outcome, seen) {
        (Outcome::Error, _) | (_, Outcome::Error) => Outcome::Error,
        (Outcome::Failed, _) | (_, Outcome::Failed) => Outcome::Failed,
        _ => Outcome::Skipped,
    };
}

/// `classname::name` of a `<testcase>`; a case without a name is refused.
fn case_id(e: &BytesStart<'_>) -> Result<String, JunitError> {
    let mut classname = None;
    let mut name = None;
    for a in e.attributes() {
        let a = a.map_err(|err| JunitError::Xml(err.to_string()))?;
        let value = a
            .normalized_value(quick_xml::XmlVersion::Implicit1_0)
            .map_err(|err| JunitError::Xml(err.to_string()))?
            .into_owned();
        match a.key.local_name().as_ref() {
            "classname" => classname = Some(value),
            "name" => name = Some(value),
            _ => {}
        }
    }
    let name = name.ok_or_else(|| JunitError::NotJunit("a <testcase> has no name".into()))?;
    Ok(match classname.filter(|c| !c.is_empty()) {
        Some(c) => format!("{c}::{name}"),
        None => name,
    })
}

#[cfg(test)]
mod fuzz;

#[cfg(test)]
mod tests {
    use super::*;

    const PYTEST: &str = r#"<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest" errors="0" failures="1" skipped="1" tests="4"><testcase classname="tests.test_parse" name="test_trailing" time="0.001" /><testcase classname="tests.test_parse" name="test_bad" time="0.001"><failure message="assert 1 == 2">x</failure></testcase><testcase classname="tests.test_parse" name="test_skip"><skipped type="pytest.skip" message="no">s</skipped></testcase><testcase classname="tests.test_parse.TestX" name="test_e[a&amp;b]"><error message="boom"/></testcase></testsuite></testsuites>"#;

    #[test]
    fn cases_and_outcomes_are_read() {
        let cases = parse(PYTEST.as_bytes()).unwrap();
        let got: Vec<(&str, Outcome)> = cases.iter().map(|c| (c.id.as_str(), c.outcome)).collect();
        assert_eq!(
            got,
            [
                ("tests.test_parse::test_trailing", Outcome::Passed),
                ("tests.test_parse::test_bad", Outcome::Failed),
                ("tests.test_parse::test_skip", Outcome::Skipped),
                ("tests.test_parse.TestX::test_e[a&b]", Outcome::Error),
            ]
        );
    }

    #[test]
    fn nested_suites_and_a_bare_testsuite_root_are_junit() {
        let nested = r#"<testsuites><testsuite name="a"><testsuite name="b"><testcase classname="m" name="t"/></testsuite></testsuite></testsuites>"#;
        assert_eq!(parse(nested.as_bytes()).unwrap()[0].id, "m::t");
        let bare = r#"<testsuite tests="1"><testcase name="only"></testcase></testsuite>"#;
        assert_eq!(parse(bare.as_bytes()).unwrap()[0].id, "only");
        assert!(parse(b"<testsuites/>").unwrap().is_empty());
    }

    #[test]
    fn what_is_not_junit_is_refused() {
        let err = |b: &[u8]| parse(b).unwrap_err().to_string();
        assert!(err(b"").contains("no root"), "{}", err(b""));
        assert!(err(b"<html></html>").contains("not a JUnit"));
        assert!(err(b"<testsuites><testcase name='a'>").contains("well-formed"));
        assert!(err(b"<testsuites></testsuites><x/>").contains("more than one root"));
        assert!(err(b"<!DOCTYPE x [<!ENTITY a 'b'>]><testsuites/>").contains("DOCTYPE"));
        assert!(err(b"<testsuites><testcase classname='a'/></testsuites>").contains("no name"));
        let deep = format!("<testsuites>{}", "<testsuite>".repeat(100));
        assert!(err(deep.as_bytes()).contains("deeper"));
    }

    #[test]
    fn a_symlink_or_an_oversized_file_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.xml");
        std::fs::write(&real, PYTEST).unwrap();
        let link = dir.path().join("link.xml");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert!(matches!(read(&link), Err(JunitError::NotAFile)));
        assert!(matches!(read(dir.path()), Err(JunitError::NotAFile)));
        assert!(matches!(
            read(&dir.path().join("none")),
            Err(JunitError::Missing)
        ));
        let big = dir.path().join("big.xml");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(MAX_BYTES + 1).unwrap();
        assert!(matches!(read(&big), Err(JunitError::TooLarge)));
        assert_eq!(read(&real).unwrap().len(), 4);
    }
}
