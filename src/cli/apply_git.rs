//! `apply --branch NAME`: the run's result committed on a new branch of the original
//! workspace's repository, with the operator's identity, through the `git` binary
//! held to plumbing that runs nothing of the repository's.
//!
//! The repository is the operator's, but what it configures may not be: a cloned
//! project can carry a `core.fsmonitor` program or hooks in a config or hook directory
//! a tool dropped there. So every call sets `core.hooksPath=/dev/null` (no hook, not
//! even `reference-transaction`, which `update-ref` runs), `core.fsmonitor=false`,
//! `diff.external=`, `commit.gpgSign=false` (no signing program), `gc.auto=0` and
//! `maintenance.auto=false` (no background job), no pager, no terminal prompt and no
//! system config (`GIT_CONFIG_NOSYSTEM`); the user's own config is read, for the
//! identity. No filter (`clean`, `smudge`, `process`) can run because no call reads or
//! writes the working tree: blobs go in with `hash-object --no-filters --stdin`, the
//! tree is built in a temporary index (`read-tree`, `update-index --index-info`,
//! `write-tree`), the commit with `commit-tree`, the branch with `update-ref` against
//! an empty old value (it must not exist yet). HEAD, the index and the working tree of
//! the repository are never touched.
//!
//! The merge base is the run's baseline, as for a workspace apply; "ours" is the file
//! as committed at HEAD (under the workspace's path inside the repository).

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use io_harness::run::after::{ApplyPlan, Current, RunChanges};

use super::CliError;
use super::apply::{print_done, refuse_conflicts, take_error};

/// The settings every call carries (see the module docs).
const HARDENING: &[&str] = &[
    "--no-pager",
    "--literal-pathspecs",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "diff.external=",
    "-c",
    "core.pager=cat",
    "-c",
    "commit.gpgSign=false",
    "-c",
    "gc.auto=0",
    "-c",
    "maintenance.auto=false",
    "-c",
    "core.untrackedCache=false",
];

/// Variables that would point git at another repository, index or object store, or
/// inject configuration past ours.
const CLEARED: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_EXTERNAL_DIFF",
    "GIT_EXEC_PATH",
];

struct Git {
    top: PathBuf,
    index: Option<PathBuf>,
}

impl Git {
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new("git");
        c.arg("-C").arg(&self.top).args(HARDENING).args(args);
        for v in CLEARED {
            c.env_remove(v);
        }
        c.env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_PAGER", "cat")
            .env("PAGER", "cat")
            .env("GIT_OPTIONAL_LOCKS", "0");
        if let Some(i) = &self.index {
            c.env("GIT_INDEX_FILE", i);
        }
        c
    }

    /// Runs git with `input` on its standard input; its standard output, or an error
    /// with what it said.
    fn run(&self, args: &[&str], input: Option<&[u8]>) -> Result<Vec<u8>, String> {
        let mut cmd = self.command(args);
        cmd.stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|e| format!("cannot run git: {e}"))?;
        if let (Some(bytes), Some(mut stdin)) = (input, child.stdin.take()) {
            stdin
                .write_all(bytes)
                .map_err(|e| format!("git {}: {e}", args.join(" ")))?;
        }
        let out = child
            .wait_with_output()
            .map_err(|e| format!("git {}: {e}", args.join(" ")))?;
        if !out.status.success() {
            return Err(format!(
                "git {}: {}",
                args.first().copied().unwrap_or(""),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(out.stdout)
    }

    fn line(&self, args: &[&str], input: Option<&[u8]>) -> Result<String, String> {
        let out = self.run(args, input)?;
        Ok(String::from_utf8_lossy(&out).trim().to_string())
    }
}

/// A path's entry at HEAD: mode and object id.
#[derive(Clone)]
struct Entry {
    mode: String,
    kind: String,
    id: String,
}

/// Commits `changes` on the new branch `name`. Exit 0 when committed, 1 on a
/// conflict (nothing made).
pub fn commit(changes: &RunChanges, name: &str) -> Result<i32, CliError> {
    let repo = Repo::open(changes, name)?;
    let entries: RefCell<HashMap<String, Option<Entry>>> = RefCell::default();
    let at_head = |rel: &str| -> Current {
        let entry = head_entry(&repo.git, &format!("{}{rel}", repo.prefix));
        entries.borrow_mut().insert(rel.to_string(), entry.clone());
        match entry {
            None => Current::Missing,
            Some(e) if e.kind == "blob" && e.mode.starts_with("100") => {
                match repo.git.run(&["cat-file", "blob", &e.id], None) {
                    Ok(bytes) => Current::File(bytes),
                    Err(m) => Current::Other(format!("unreadable at HEAD ({m})")),
                }
            }
            Some(e) if e.mode == "120000" => Current::Other("a symlink at HEAD".into()),
            Some(e) => Current::Other(format!("a {} at HEAD", e.kind)),
        }
    };
    let plan = changes.plan(&at_head).map_err(take_error)?;
    if refuse_conflicts(&plan, changes.run_id, &format!("HEAD of {}", repo.top)) {
        return Ok(1);
    }
    let commit = repo.commit(changes, &plan, &entries.into_inner())?;
    let target = format!("new branch {name} of {}", repo.top);
    print_done(&plan, changes.run_id, &target);
    outln!(
        "committed {commit} on branch {name} (from {}); HEAD and the working tree are unchanged",
        repo.head
    );
    Ok(0)
}

/// The repository a branch is made in, checked before anything is planned.
struct Repo {
    git: Git,
    top: String,
    /// The workspace's path in it (see [`prefix_of`]).
    prefix: String,
    head: String,
    name: String,
}

impl Repo {
    /// The workspace's repository, its HEAD commit, and `name` checked as a new branch.
    fn open(changes: &RunChanges, name: &str) -> Result<Self, CliError> {
        let usage = CliError::Usage;
        let probe = Git {
            top: changes.root.clone(),
            index: None,
        };
        let top = probe
            .line(&["rev-parse", "--show-toplevel"], None)
            .map_err(|e| {
                usage(format!(
                    "{} is not in a git repository ({e})",
                    changes.root.display()
                ))
            })?;
        let git = Git {
            top: PathBuf::from(&top),
            index: None,
        };
        let prefix = prefix_of(&changes.root, Path::new(&top))?;
        let head = git
            .line(&["rev-parse", "--verify", "-q", "HEAD^{commit}"], None)
            .map_err(|_| {
                usage(format!(
                    "the repository {top} has no commit at HEAD to branch from"
                ))
            })?;
        git.line(&["check-ref-format", "--branch", name], None)
            .map_err(|_| usage(format!("{name:?} is not a valid branch name")))?;
        let refname = format!("refs/heads/{name}");
        if git
            .run(&["rev-parse", "--verify", "-q", &refname], None)
            .is_ok()
        {
            return Err(usage(format!(
                "branch {name} exists already; name a new one"
            )));
        }
        Ok(Self {
            git,
            top,
            prefix,
            head,
            name: name.to_string(),
        })
    }

    /// Builds the plan's tree on HEAD's in a temporary index, commits it and creates
    /// the branch (which must still not exist). Returns the commit.
    fn commit(
        &self,
        changes: &RunChanges,
        plan: &ApplyPlan,
        entries: &HashMap<String, Option<Entry>>,
    ) -> Result<String, CliError> {
        let scratch = tempfile::tempdir().map_err(|e| CliError::Internal(e.to_string()))?;
        let git = Git {
            top: PathBuf::from(&self.top),
            index: Some(scratch.path().join("index")),
        };
        let internal = CliError::Internal;
        git.run(&["read-tree", &self.head], None)
            .map_err(internal)?;
        let mut info = Vec::new();
        for w in &plan.writes {
            let full = format!("{}{}", self.prefix, w.path);
            let line = match &w.content {
                Some(bytes) => {
                    let args = ["hash-object", "-w", "--no-filters", "--stdin"];
                    let id = git.line(&args, Some(bytes)).map_err(internal)?;
                    let mode = match entries.get(&w.path) {
                        Some(Some(e)) if e.mode == "100755" => "100755",
                        _ => "100644",
                    };
                    format!("{mode} {id}\t{full}\0")
                }
                None => format!("0 {}\t{full}\0", "0".repeat(self.head.len())),
            };
            info.extend_from_slice(line.as_bytes());
        }
        git.run(&["update-index", "-z", "--index-info"], Some(&info))
            .map_err(internal)?;
        let tree = git.line(&["write-tree"], None).map_err(internal)?;
        let message = format!(
            "{}\n\nApplied from io-harness run {id} (io-harness apply {id} --branch {}).\n",
            one_line(&changes.goal),
            self.name,
            id = changes.run_id,
        );
        let args = [
            "commit-tree",
            &tree,
            "-p",
            &self.head,
            "--no-gpg-sign",
            "-F",
            "-",
        ];
        let commit = git
            .line(&args, Some(message.as_bytes()))
            .map_err(|e| CliError::Usage(format!("{e} (are user.name and user.email set?)")))?;
        let refname = format!("refs/heads/{}", self.name);
        git.run(&["update-ref", &refname, &commit, ""], None)
            .map_err(internal)?;
        Ok(commit)
    }
}

/// The workspace's path inside the repository, `/`-terminated (empty at the top).
fn prefix_of(root: &Path, top: &Path) -> Result<String, CliError> {
    let root = root
        .canonicalize()
        .map_err(|e| CliError::Usage(format!("{}: {e}", root.display())))?;
    let top = top
        .canonicalize()
        .map_err(|e| CliError::Usage(format!("{}: {e}", top.display())))?;
    let rel = root.strip_prefix(&top).map_err(|_| {
        CliError::Usage(format!(
            "{} is not inside {}",
            root.display(),
            top.display()
        ))
    })?;
    let rel = rel.to_string_lossy().replace('\\', "/");
    Ok(if rel.is_empty() {
        rel
    } else {
        format!("{rel}/")
    })
}

/// The entry `full` names in HEAD's tree, if any.
fn head_entry(git: &Git, full: &str) -> Option<Entry> {
    let out = git.run(&["ls-tree", "-z", "HEAD", "--", full], None).ok()?;
    let rec = out.split(|b| *b == 0).next()?;
    let text = String::from_utf8_lossy(rec);
    let (meta, path) = text.split_once('\t')?;
    if path != full {
        return None;
    }
    let mut parts = meta.split(' ');
    Some(Entry {
        mode: parts.next()?.to_string(),
        kind: parts.next()?.to_string(),
        id: parts.next()?.to_string(),
    })
}

/// The goal as a commit subject: one line, at most 72 characters.
fn one_line(goal: &str) -> String {
    let line: String = goal
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .filter(|c| !c.is_control())
        .take(72)
        .collect();
    if line.trim().is_empty() {
        "io-harness run".into()
    } else {
        line
    }
}
