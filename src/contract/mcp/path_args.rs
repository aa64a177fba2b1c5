//! `path_args` of an `[[mcp]]` server: which arguments of which tools name files, so
//! the contract's file rules judge an MCP call the way they judge `read_file`.
//!
//! # Why this exists
//!
//! A server that runs outside the sandbox (`sandbox = false`) sees the host as the
//! harness does: no view, no masks, no caps. The only thing standing between a model
//! and `.env` is then the harness's own check of what a call names. MCP says nothing
//! about which arguments are paths, so the contract says it, per server and tool:
//!
//! ```toml
//! path_args = { export = ["target"], bulk = ["files/*/path"] }
//! ```
//!
//! An argument name is a pointer into the call's arguments: `/`-separated keys (a
//! leading `/` is allowed, `~0` and `~1` stand for `~` and `/` as in JSON Pointer),
//! `*` for every element of an array. The value it reaches must be a string or an
//! array of strings; each string is one path. A pointer that reaches nothing, or
//! something else, refuses the call: a path argument is never skipped.
//!
//! What the operator declares does not say whether the tool reads or writes, so each
//! declared path is judged as both, on purpose: a rule that denies either act stops
//! the call. The reference filesystem server's tools are known
//! ([`FILESYSTEM_PATH_ARGS`]), and their acts with them; a declaration for one of
//! its tools replaces the table's entry for that tool.

use serde_json::Value;

use crate::contract::policy::Act;

const READ: &[Act] = &[Act::Read];
const WRITE: &[Act] = &[Act::Write];
const BOTH: &[Act] = &[Act::Read, Act::Write];

/// One path argument of the built-in table: its name and the acts it is judged for.
pub type BuiltinArg = (&'static str, &'static [Act]);

/// The path arguments of the tools of `@modelcontextprotocol/server-filesystem`
/// (read from its `dist/index.js`), with what each tool does to the file.
///
/// `edit_file` also reads (its answer is a diff of the file) and `move_file`'s
/// `source` is read as well as removed (its content lands at the destination), so
/// both are judged for both acts. `list_allowed_directories` takes no path.
pub const FILESYSTEM_PATH_ARGS: &[(&str, &[BuiltinArg])] = &[
    ("read_file", &[("path", READ)]),
    ("read_text_file", &[("path", READ)]),
    ("read_media_file", &[("path", READ)]),
    ("read_multiple_files", &[("paths", READ)]),
    ("write_file", &[("path", WRITE)]),
    ("edit_file", &[("path", BOTH)]),
    ("create_directory", &[("path", WRITE)]),
    ("list_directory", &[("path", READ)]),
    ("list_directory_with_sizes", &[("path", READ)]),
    ("directory_tree", &[("path", READ)]),
    ("search_files", &[("path", READ)]),
    ("get_file_info", &[("path", READ)]),
    ("move_file", &[("source", BOTH), ("destination", WRITE)]),
];

/// The reference filesystem server's package, as `npx` names it.
const FILESYSTEM_PACKAGE: &str = "@modelcontextprotocol/server-filesystem";

/// Whether `argv` starts the reference filesystem server: its package named for
/// `npx` (`@modelcontextprotocol/server-filesystem`, with or without `@version`),
/// its installed script (`…/server-filesystem/dist/index.js`) or its bin
/// (`mcp-server-filesystem`).
pub fn is_filesystem_server(argv: &[String]) -> bool {
    argv.iter().any(|a| {
        let a = a.replace('\\', "/");
        a == FILESYSTEM_PACKAGE
            || a.strip_prefix(FILESYSTEM_PACKAGE)
                .is_some_and(|v| v.starts_with('@'))
            || a.ends_with("server-filesystem/dist/index.js")
            || a == "mcp-server-filesystem"
            || a.ends_with("/mcp-server-filesystem")
    })
}

/// One path argument of one tool: where it is in the arguments, and the acts each
/// path it names is judged for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathArg {
    /// The pointer as written (`path`, `files/*/path`).
    pub name: String,
    /// `read`, `write`, or both (a declared argument: the act is unknown).
    pub acts: &'static [Act],
}

impl PathArg {
    /// A declared argument: judged as read and write.
    pub fn declared(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            acts: BOTH,
        }
    }

    /// The paths this argument names in `input` (a call's arguments), in order.
    pub fn paths<'a>(&self, input: &'a Value) -> Result<Vec<&'a str>, PathArgError> {
        let pointer = Pointer::parse(&self.name).map_err(|why| PathArgError::Invalid {
            arg: self.name.clone(),
            why,
        })?;
        let mut out = Vec::new();
        pointer.collect(input, 0, &self.name, &mut out)?;
        Ok(out)
    }
}

/// A path argument a call does not give as the contract says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PathArgError {
    /// It is not there.
    #[error("path argument `{arg}` is missing")]
    Missing {
        /// The argument (with the index of an array element: `paths/2`).
        arg: String,
    },
    /// It is there but not a string (nor an array of strings).
    #[error("path argument `{arg}` must be a string or an array of strings, not {found}")]
    NotAString {
        /// The argument.
        arg: String,
        /// What it is (`a number`).
        found: &'static str,
    },
    /// A string that names no path (empty, or with a NUL byte), or a pointer that
    /// does not parse.
    #[error("path argument `{arg}`: {why}")]
    Invalid {
        /// The argument.
        arg: String,
        /// Why.
        why: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Key(String),
    Each,
}

/// A parsed argument pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pointer(Vec<Segment>);

impl Pointer {
    fn parse(s: &str) -> Result<Self, String> {
        let body = s.strip_prefix('/').unwrap_or(s);
        if body.is_empty() {
            return Err("an argument name must not be empty".into());
        }
        let mut segments = Vec::new();
        for raw in body.split('/') {
            if raw.is_empty() {
                return Err(format!("{s:?} has an empty part"));
            }
            if raw == "*" {
                segments.push(Segment::Each);
                continue;
            }
            let mut key = String::new();
            let mut chars = raw.chars();
            while let Some(c) = chars.next() {
                if c != '~' {
                    key.push(c);
                    continue;
                }
                match chars.next() {
                    Some('0') => key.push('~'),
                    Some('1') => key.push('/'),
                    _ => return Err(format!("{s:?}: `~` must be followed by 0 or 1")),
                }
            }
            segments.push(Segment::Key(key));
        }
        if segments[0] == Segment::Each {
            return Err(format!("{s:?} must start with an argument's name"));
        }
        Ok(Self(segments))
    }

    fn collect<'a>(
        &self,
        v: &'a Value,
        at: usize,
        shown: &str,
        out: &mut Vec<&'a str>,
    ) -> Result<(), PathArgError> {
        let Some(seg) = self.0.get(at) else {
            return leaf(v, shown, out);
        };
        match (seg, v) {
            (Segment::Key(k), Value::Object(m)) => match m.get(k) {
                Some(next) if !next.is_null() => self.collect(next, at + 1, shown, out),
                _ => Err(PathArgError::Missing {
                    arg: shown.to_string(),
                }),
            },
            (Segment::Each, Value::Array(items)) => {
                for item in items {
                    self.collect(item, at + 1, shown, out)?;
                }
                Ok(())
            }
            (Segment::Key(_), Value::Null) => Err(PathArgError::Missing {
                arg: shown.to_string(),
            }),
            (_, other) => Err(PathArgError::NotAString {
                arg: shown.to_string(),
                found: kind(other),
            }),
        }
    }
}

/// The end of a pointer: a string, or an array of strings.
fn leaf<'a>(v: &'a Value, shown: &str, out: &mut Vec<&'a str>) -> Result<(), PathArgError> {
    match v {
        Value::String(s) => {
            out.push(valid(s, shown)?);
            Ok(())
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                match item {
                    Value::String(s) => out.push(valid(s, &format!("{shown}/{i}"))?),
                    other => {
                        return Err(PathArgError::NotAString {
                            arg: format!("{shown}/{i}"),
                            found: kind(other),
                        });
                    }
                }
            }
            Ok(())
        }
        other => Err(PathArgError::NotAString {
            arg: shown.to_string(),
            found: kind(other),
        }),
    }
}

fn valid<'a>(s: &'a str, shown: &str) -> Result<&'a str, PathArgError> {
    let why = if s.is_empty() {
        "an empty string names no path"
    } else if s.contains('\0') {
        "a path must not contain NUL"
    } else {
        return Ok(s);
    };
    Err(PathArgError::Invalid {
        arg: shown.to_string(),
        why: why.into(),
    })
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Checks the syntax of a declared argument name (at load time).
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    Pointer::parse(name).map(|_| ())
}

/// The built-in table's entry for `tool`, if it has one.
pub(crate) fn filesystem_entry(tool: &str) -> Option<Vec<PathArg>> {
    FILESYSTEM_PATH_ARGS
        .iter()
        .find(|(t, _)| *t == tool)
        .map(|(_, args)| {
            args.iter()
                .map(|(name, acts)| PathArg {
                    name: (*name).to_string(),
                    acts,
                })
                .collect()
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn paths(name: &str, input: Value) -> Result<Vec<String>, PathArgError> {
        PathArg::declared(name)
            .paths(&input)
            .map(|v| v.into_iter().map(String::from).collect())
    }

    #[test]
    fn strings_arrays_and_nested_pointers_are_found() {
        assert_eq!(paths("path", json!({"path": "a"})).unwrap(), ["a"]);
        assert_eq!(
            paths("paths", json!({"paths": ["a", "b"]})).unwrap(),
            ["a", "b"]
        );
        assert_eq!(
            paths(
                "/files/*/path",
                json!({"files": [{"path": "x"}, {"path": "y"}]})
            )
            .unwrap(),
            ["x", "y"]
        );
        assert_eq!(
            paths("a~1b/c~0", json!({"a/b": {"c~": "z"}})).unwrap(),
            ["z"]
        );
        assert!(paths("paths", json!({"paths": []})).unwrap().is_empty());
    }

    #[test]
    fn missing_mistyped_and_empty_paths_are_errors_naming_the_argument() {
        let e = paths("path", json!({})).unwrap_err();
        assert_eq!(e.to_string(), "path argument `path` is missing");
        assert!(matches!(
            paths("path", json!({"path": null})),
            Err(PathArgError::Missing { .. })
        ));
        assert!(matches!(
            paths("path", Value::Null),
            Err(PathArgError::Missing { .. })
        ));
        let e = paths("path", json!({"path": 3})).unwrap_err();
        assert_eq!(
            e,
            PathArgError::NotAString {
                arg: "path".into(),
                found: "a number"
            }
        );
        let e = paths("paths", json!({"paths": ["a", 1]})).unwrap_err();
        assert!(e.to_string().contains("`paths/1`"), "{e}");
        let e = paths("path", json!({"path": ""})).unwrap_err();
        assert!(matches!(e, PathArgError::Invalid { .. }), "{e}");
        let e = paths("path", json!({"path": "a\0b"})).unwrap_err();
        assert!(matches!(e, PathArgError::Invalid { .. }), "{e}");
        let e = paths("files/*/path", json!({"files": {"path": "x"}})).unwrap_err();
        assert!(matches!(e, PathArgError::NotAString { .. }), "{e}");
    }

    #[test]
    fn bad_names_are_refused() {
        for bad in ["", "/", "a//b", "*", "a/~2", "a/~"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        for ok in ["path", "/path", "files/*/path", "a~0b"] {
            assert!(check_name(ok).is_ok(), "{ok:?}");
        }
    }

    #[test]
    fn the_reference_filesystem_server_is_recognised() {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(is_filesystem_server(&v(&[
            "npx",
            "-y",
            "@modelcontextprotocol/server-filesystem",
            "."
        ])));
        assert!(is_filesystem_server(&v(&[
            "npx",
            "@modelcontextprotocol/server-filesystem@2026.8.31",
            "."
        ])));
        assert!(is_filesystem_server(&v(&[
            "node",
            "/opt/n/@modelcontextprotocol/server-filesystem/dist/index.js",
            "."
        ])));
        assert!(is_filesystem_server(&v(&["mcp-server-filesystem", "."])));
        assert!(!is_filesystem_server(&v(&[
            "npx",
            "@modelcontextprotocol/server-everything"
        ])));
        assert!(!is_filesystem_server(&v(&[
            "node",
            "my-server-filesystem-ish.js"
        ])));
    }

    #[test]
    fn the_table_knows_every_tool_with_a_path() {
        assert_eq!(
            filesystem_entry("read_multiple_files").unwrap()[0].name,
            "paths"
        );
        let mv = filesystem_entry("move_file").unwrap();
        assert_eq!(mv.len(), 2);
        assert_eq!(mv[1].acts, &[Act::Write]);
        assert!(filesystem_entry("list_allowed_directories").is_none());
    }
}
