//! `grep`: lines matching a regex, with the ripgrep library crates.

use std::fs::File;
use std::io;
use std::ops::ControlFlow;

use futures_util::future::BoxFuture;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};
use serde::Deserialize;

use super::PathGlob;
use super::walk::walk;
use crate::policy::{Act, Action, Decision};
use crate::provider::ToolSpec;
use crate::tools::confine::Follow;
use crate::tools::fs::{cut_line, parse, plan_path, run_blocking, text};
use crate::tools::{EntryKind, Tool, ToolContext, ToolError, ToolLimits, ToolOutput};

/// Longest matching line shown whole.
const MAX_LINE: usize = 500;
/// Output bytes kept free for the closing notes.
const NOTE_RESERVE: usize = 300;

/// Searches file contents by regex.
#[derive(Debug, Clone, Copy, Default)]
pub struct Grep;

#[derive(Deserialize)]
struct Args {
    pattern: String,
    path: Option<String>,
    glob: Option<String>,
    #[serde(default)]
    case_insensitive: bool,
}

impl Tool for Grep {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "grep".into(),
            description: "Search file contents with a regular expression (Rust regex syntax, \
                          one line at a time). Prints `path:line:text` per matching line. Skips \
                          .git, what .gitignore/.ignore exclude, binary files and symlinks. \
                          Narrow it with `path` (a file or directory) and `glob` (e.g. `*.rs`)."
                .into(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Regular expression."},
                    "path": {"type": "string", "description": "File or directory to search, relative to the workspace root (default `.`)."},
                    "glob": {"type": "string", "description": "Only search files matching this glob (as in find)."},
                    "case_insensitive": {"type": "boolean", "description": "Ignore case (default false)."}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        }
    }

    fn plan(&self, ctx: &ToolContext, input: &serde_json::Value) -> Result<Vec<Action>, ToolError> {
        let a: Args = parse(input)?;
        plan_path(ctx, Act::Read, a.path.as_deref().unwrap_or("."))
    }

    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        input: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        let gate = ctx.read_gate.clone();
        // A search stops at the run's deadline, and never runs longer than its own
        // bound: it runs on a blocking thread nothing else could stop.
        let bound = std::time::Instant::now() + MAX_SEARCH_TIME;
        let deadline = ctx
            .exec
            .as_ref()
            .and_then(|e| e.deadline())
            .map_or(bound, |d| d.min(bound));
        run_blocking(ctx, input, move |ws, limits, a: Args| {
            let denied = |rel: &str| {
                gate.as_ref().is_some_and(|g| {
                    g.decide(&Action::new(Act::Read, rel)).decision == Decision::Deny
                })
            };
            let start = ws.normalize(a.path.as_deref().unwrap_or("."))?;
            let matcher = RegexMatcherBuilder::new()
                .case_insensitive(a.case_insensitive)
                .size_limit(MAX_REGEX_BYTES)
                .dfa_size_limit(MAX_REGEX_BYTES)
                .line_terminator(Some(b'\n'))
                .build(&a.pattern)
                .map_err(|e| ToolError::BadInput(format!("bad regex: {e}")))?;
            let glob = a.glob.as_deref().map(PathGlob::new).transpose()?;
            let mut g = Collector::new(matcher, limits, deadline);
            let mut unreadable = 0;
            if ws.metadata(&start)?.kind == EntryKind::File {
                // An explicitly named file is searched whatever the glob and ignore
                // files say.
                let (file, meta) = ws.open_file(&start, Follow::Inside)?;
                let _ = g.file(&start, &file, meta.len);
            } else {
                let summary = walk(ws, &start, &mut |v| {
                    if v.entry.kind != EntryKind::File
                        || glob.as_ref().is_some_and(|gl| !gl.is_match(v.rel, &start))
                    {
                        return ControlFlow::Continue(());
                    }
                    if denied(v.rel) {
                        g.withheld += 1;
                        return ControlFlow::Continue(());
                    }
                    match v.dir.open_file(v.entry.os_name()) {
                        Ok((file, meta)) => g.file(v.rel, &file, meta.len),
                        Err(_) => {
                            g.unreadable += 1;
                            ControlFlow::Continue(())
                        }
                    }
                })?;
                unreadable = summary.unreadable;
            }
            text(g.finish(&a.pattern, &start, unreadable))
        })
    }
}

/// The largest compiled regex (and its lazy DFA's cache): a pattern such as
/// `a{100000}` is refused at once instead of compiling for minutes.
const MAX_REGEX_BYTES: usize = 1 << 20;

/// The longest one search runs, whatever the run's budget.
const MAX_SEARCH_TIME: std::time::Duration = std::time::Duration::from_secs(60);

/// Accumulates `path:line:text` lines within the limits.
struct Collector {
    /// When the search stops, searched or not.
    deadline: std::time::Instant,
    /// It stopped there.
    timed_out: bool,
    matcher: RegexMatcher,
    searcher: Searcher,
    limits: ToolLimits,
    out: String,
    matches: usize,
    stopped: bool,
    too_large: usize,
    unreadable: usize,
    /// Files the policy denies reading, not searched.
    withheld: usize,
}

impl Collector {
    fn new(matcher: RegexMatcher, limits: ToolLimits, deadline: std::time::Instant) -> Self {
        let searcher = SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::quit(b'\x00'))
            .build();
        Self {
            deadline,
            timed_out: false,
            matcher,
            searcher,
            limits,
            out: String::new(),
            matches: 0,
            stopped: false,
            too_large: 0,
            unreadable: 0,
            withheld: 0,
        }
    }

    /// Searches one open file; `Break` once a limit is reached.
    fn file(&mut self, rel: &str, file: &File, len: u64) -> ControlFlow<()> {
        if std::time::Instant::now() >= self.deadline {
            self.timed_out = true;
            return ControlFlow::Break(());
        }
        if len > self.limits.max_file_bytes {
            self.too_large += 1;
            return ControlFlow::Continue(());
        }
        let mut sink = LineSink {
            rel,
            out: &mut self.out,
            matches: &mut self.matches,
            stopped: &mut self.stopped,
            max_matches: self.limits.max_entries,
            max_bytes: self.limits.max_output_bytes.saturating_sub(NOTE_RESERVE),
        };
        if self
            .searcher
            .search_file(&self.matcher, file, &mut sink)
            .is_err()
        {
            self.unreadable += 1;
        }
        if self.stopped {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }

    fn finish(mut self, pattern: &str, start: &str, unreadable_dirs: usize) -> String {
        if self.matches == 0 {
            self.out = format!("no matches for {pattern:?} under {start}\n");
        }
        if self.stopped {
            self.out.push_str(&format!(
                "[stopped after {} matches (limits: {} matches, {} bytes); narrow the pattern, path or glob]\n",
                self.matches, self.limits.max_entries, self.limits.max_output_bytes
            ));
        }
        if self.timed_out {
            self.out.push_str(
                "[stopped: the search ran out of time (the run's deadline, or 60 s); narrow the path or glob]\n",
            );
        }
        if self.too_large > 0 {
            self.out.push_str(&format!(
                "[{} files over {} bytes not searched]\n",
                self.too_large, self.limits.max_file_bytes
            ));
        }
        let unreadable = self.unreadable + unreadable_dirs;
        if unreadable > 0 {
            self.out.push_str(&format!(
                "[{unreadable} files or directories could not be read]\n"
            ));
        }
        if self.withheld > 0 {
            self.out.push_str(&format!(
                "[{} files not searched: the policy denies reading them]\n",
                self.withheld
            ));
        }
        self.out
    }
}

/// The searcher's sink: formats each matching line, stops at the limits.
struct LineSink<'a> {
    rel: &'a str,
    out: &'a mut String,
    matches: &'a mut usize,
    stopped: &'a mut bool,
    max_matches: usize,
    max_bytes: usize,
}

impl Sink for LineSink<'_> {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, io::Error> {
        let line = String::from_utf8_lossy(mat.bytes());
        let line = line.trim_end_matches(['\n', '\r']);
        let entry = format!(
            "{}:{}:{}\n",
            self.rel,
            mat.line_number().unwrap_or(0),
            cut_line(line, MAX_LINE)
        );
        if *self.matches >= self.max_matches || self.out.len() + entry.len() > self.max_bytes {
            *self.stopped = true;
            return Ok(false);
        }
        self.out.push_str(&entry);
        *self.matches += 1;
        Ok(true)
    }
}
