//! The file actions of an MCP call: each path its path arguments name
//! ([`crate::mcp::McpServerSpec::path_args_for`]), resolved the way the server will
//! resolve it, as the [`Action`]s the policy judges — in the same form the
//! workspace's own file tools give it, so one rule (`deny read .env`, the built-in
//! secret denies, `.git/` protection) covers both.
//!
//! A server is a process of its own: it resolves a relative path against its working
//! directory (the workspace), takes an absolute one as given, expands a leading `~`
//! (the reference filesystem server does) and follows symlinks. So each path is
//! judged as named (lexically normalized: `a/../.env` is `.env`) and, where a symlink
//! on the way leads elsewhere, as what it resolves to now. A path inside the
//! workspace becomes workspace-relative (`src/lib.rs`, `.` for the root), as for
//! `read_file`; one outside it stays relative to the root with `..` parts
//! (`../../etc/hostname`), so a rule anchored in the workspace (`src/**`) never
//! matches outside it while a name at any depth (`.env`, `**/.ssh/**`) still does.

use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use crate::contract::mcp::PathArg;
use crate::policy::Action;
use crate::tools::ToolError;

/// Where the server runs and where the workspace is, for resolving its paths.
pub(crate) struct Places<'a> {
    /// The server's working directory.
    pub(crate) cwd: &'a Path,
    /// The workspace root the policy's paths are relative to.
    pub(crate) root: &'a Path,
    /// The home directory a leading `~` stands for, if known.
    pub(crate) home: Option<PathBuf>,
}

/// The read and write actions `args` amount to in `input`, without duplicates; a
/// path argument missing, mistyped or empty is a [`ToolError::BadInput`] naming it.
pub(crate) fn actions(
    args: &[PathArg],
    input: &Value,
    places: &Places<'_>,
) -> Result<Vec<Action>, ToolError> {
    let root = Roots::of(places.root);
    let cwd = std::fs::canonicalize(places.cwd).unwrap_or_else(|_| places.cwd.to_path_buf());
    let mut out: Vec<Action> = Vec::new();
    for arg in args {
        let paths = arg
            .paths(input)
            .map_err(|e| ToolError::BadInput(e.to_string()))?;
        for p in paths {
            for target in targets(p, &cwd, places.home.as_deref(), &root) {
                for &act in arg.acts {
                    let a = Action::new(act, target.clone());
                    if !out.contains(&a) {
                        out.push(a);
                    }
                }
            }
        }
    }
    Ok(out)
}

/// The workspace root as given and as the file system resolves it.
struct Roots {
    given: PathBuf,
    real: PathBuf,
}

impl Roots {
    fn of(root: &Path) -> Self {
        let given = lexical(root);
        let real = std::fs::canonicalize(root).unwrap_or_else(|_| given.clone());
        Self { given, real }
    }

    /// `p` (absolute, normalized) as a policy target.
    fn target(&self, p: &Path) -> String {
        for r in [&self.real, &self.given] {
            if let Ok(inside) = p.strip_prefix(r) {
                let rel = slash(inside);
                return if rel.is_empty() { ".".into() } else { rel };
            }
        }
        climb(&self.real, p)
    }
}

/// Every target one path names: as written, and what it resolves to, each in
/// policy form. A leading `~` is judged both as the home directory and as a literal
/// name, since servers differ.
fn targets(raw: &str, cwd: &Path, home: Option<&Path>, root: &Roots) -> Vec<String> {
    let mut named = Vec::new();
    if let Some(home) = home {
        let rest = match raw {
            "~" => Some(""),
            _ => raw.strip_prefix("~/"),
        };
        if let Some(rest) = rest {
            named.push(home.join(rest));
        }
    }
    named.push(cwd.join(raw));
    let mut out: Vec<String> = Vec::new();
    for n in named {
        let n = lexical(&n);
        let real = resolved(&n);
        for p in [Some(n), real].into_iter().flatten() {
            let t = root.target(&p);
            if !out.contains(&t) {
                out.push(t);
            }
        }
    }
    out
}

/// `p` with `.` dropped and `..` applied, without touching the file system (`/..` is
/// `/`).
fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if out.file_name().is_some() {
                    out.pop();
                } else if !out.has_root() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Most symlinks followed resolving one path (the kernel's limit).
const MAX_LINKS: usize = 40;

/// What `p` (absolute, normalized) reaches through symlinks now, component by
/// component as the kernel would, a missing tail (a file about to be created)
/// appended as named and a dangling link followed to where it points. `None` when it
/// reaches `p` itself, or loops.
fn resolved(p: &Path) -> Option<PathBuf> {
    let mut todo: Vec<std::ffi::OsString> = p
        .components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .map(|c| c.as_os_str().to_os_string())
        .rev()
        .collect();
    let mut out = PathBuf::from("/");
    let mut links = 0;
    while let Some(part) = todo.pop() {
        if part == ".." {
            out.pop();
            continue;
        }
        if part == "." {
            continue;
        }
        let next = out.join(&part);
        let is_link = std::fs::symlink_metadata(&next).is_ok_and(|m| m.file_type().is_symlink());
        if !is_link {
            out = next;
            continue;
        }
        links += 1;
        let target = std::fs::read_link(&next).ok()?;
        if links > MAX_LINKS {
            return None;
        }
        if target.is_absolute() {
            out = PathBuf::from("/");
        }
        todo.extend(
            target
                .components()
                .filter(|c| !matches!(c, Component::RootDir | Component::Prefix(_)))
                .map(|c| c.as_os_str().to_os_string())
                .rev(),
        );
    }
    (out != p).then_some(out)
}

/// `p` relative to `root` through `..`: both absolute and normalized.
fn climb(root: &Path, p: &Path) -> String {
    let r: Vec<Component<'_>> = root.components().collect();
    let t: Vec<Component<'_>> = p.components().collect();
    let common = r.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".into(); r.len() - common];
    parts.extend(
        t[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    parts.join("/")
}

fn slash(p: &Path) -> String {
    p.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::policy::Act;

    fn fs_args(tool: &str) -> Vec<PathArg> {
        crate::mcp::McpServerSpec::stdio("fs", ["npx", "@modelcontextprotocol/server-filesystem"])
            .path_args_for(tool)
    }

    fn plan(dir: &Path, tool: &str, input: Value) -> Vec<(Act, String)> {
        let places = Places {
            cwd: dir,
            root: dir,
            home: Some(PathBuf::from("/home/someone")),
        };
        actions(&fs_args(tool), &input, &places)
            .unwrap()
            .into_iter()
            .inspect(|a| assert!(matches!(a.act, Act::Read | Act::Write)))
            .map(|a| (a.act, a.target))
            .collect()
    }

    #[test]
    fn paths_become_workspace_relative_like_the_file_tools_give_them() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        let r = |p: &str| (Act::Read, p.to_string());
        assert_eq!(
            plan(&root, "read_file", json!({"path": ".env"})),
            [r(".env")]
        );
        assert_eq!(
            plan(
                &root,
                "read_file",
                json!({"path": root.join("sub/../.env")})
            ),
            [r(".env")]
        );
        assert_eq!(
            plan(&root, "read_file", json!({"path": "./sub/./a.txt"})),
            [r("sub/a.txt")]
        );
        assert_eq!(
            plan(&root, "list_directory", json!({"path": "."})),
            [r(".")]
        );
        let name = root.file_name().unwrap().to_str().unwrap().to_string();
        assert_eq!(
            plan(
                &root,
                "read_file",
                json!({"path": format!("../{name}/.env")})
            ),
            [r(".env")]
        );
        let depth = root.components().count() - 1;
        let up = vec![".."; depth].join("/");
        assert_eq!(
            plan(&root, "read_file", json!({"path": "/etc/hostname"})),
            [r(&format!("{up}/etc/hostname"))]
        );
        assert_eq!(
            plan(&root, "read_file", json!({"path": "~/.ssh/id_rsa"})),
            [
                r(&format!("{up}/home/someone/.ssh/id_rsa")),
                r("~/.ssh/id_rsa")
            ]
        );
        assert_eq!(
            plan(
                &root,
                "move_file",
                json!({"source": "a", "destination": ".git/hooks/x"})
            ),
            [
                r("a"),
                (Act::Write, "a".into()),
                (Act::Write, ".git/hooks/x".into())
            ]
        );
        assert_eq!(
            plan(
                &root,
                "read_multiple_files",
                json!({"paths": ["a", "b", "a"]})
            ),
            [r("a"), r("b")]
        );
    }

    #[test]
    fn a_symlink_is_judged_as_named_and_as_what_it_reaches() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(root.join(".env"), "K=v").unwrap();
        std::os::unix::fs::symlink(".env", root.join("notes.txt")).unwrap();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::os::unix::fs::symlink(".git/hooks", root.join("hooks")).unwrap();
        assert_eq!(
            plan(&root, "read_file", json!({"path": "notes.txt"})),
            [
                (Act::Read, "notes.txt".to_string()),
                (Act::Read, ".env".to_string())
            ]
        );
        assert_eq!(
            plan(&root, "write_file", json!({"path": "hooks/pre-commit"})),
            [
                (Act::Write, "hooks/pre-commit".to_string()),
                (Act::Write, ".git/hooks/pre-commit".to_string())
            ]
        );
    }

    #[test]
    fn a_missing_or_mistyped_path_refuses_the_call() {
        let dir = tempfile::tempdir().unwrap();
        let places = Places {
            cwd: dir.path(),
            root: dir.path(),
            home: None,
        };
        let e = actions(&fs_args("read_file"), &json!({}), &places).unwrap_err();
        assert_eq!(e.to_string(), "bad input: path argument `path` is missing");
        let e = actions(
            &fs_args("read_multiple_files"),
            &json!({"paths": "a"}),
            &places,
        );
        assert!(e.is_ok(), "a single string is one path");
        let e = actions(&fs_args("write_file"), &json!({"path": 7}), &places).unwrap_err();
        assert!(e.to_string().contains("`path`"), "{e}");
        assert!(
            actions(&fs_args("list_allowed_directories"), &json!({}), &places)
                .unwrap()
                .is_empty()
        );
    }
}
