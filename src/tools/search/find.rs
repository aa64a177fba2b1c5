//! `find`: paths in the tree matching a glob.

use std::ops::ControlFlow;

use futures_util::future::BoxFuture;
use serde::Deserialize;

use super::PathGlob;
use super::walk::walk;
use crate::policy::{Act, Action};
use crate::provider::ToolSpec;
use crate::tools::fs::{display_entry, parse, plan_path, run_blocking, text};
use crate::tools::{Tool, ToolContext, ToolError, ToolOutput};

/// Finds paths by glob.
#[derive(Debug, Clone, Copy, Default)]
pub struct Find;

#[derive(Deserialize)]
struct Args {
    pattern: String,
    path: Option<String>,
}

impl Tool for Find {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "find".into(),
            description: "Find files and directories whose path matches a glob, e.g. `*.rs`, \
                          `Cargo.toml`, `src/**/mod.rs`. A pattern without `/` matches file \
                          names at any depth; `*` stays within one directory, `**` crosses \
                          them. Skips .git and what .gitignore/.ignore exclude; does not follow \
                          symlinks. Directories end with `/`, symlinks with `@`."
                .into(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Glob to match."},
                    "path": {"type": "string", "description": "Directory to search, relative to the workspace root (default `.`)."}
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
        run_blocking(ctx, input, |ws, limits, a: Args| {
            let start = ws.normalize(a.path.as_deref().unwrap_or("."))?;
            let glob = PathGlob::new(&a.pattern)?;
            let mut hits: Vec<String> = Vec::new();
            let mut cut = false;
            let summary = walk(ws, &start, &mut |v| {
                if !glob.is_match(v.rel, &start) {
                    return ControlFlow::Continue(());
                }
                if hits.len() >= limits.max_entries {
                    cut = true;
                    return ControlFlow::Break(());
                }
                hits.push(display_entry(v.rel, v.entry.kind));
                ControlFlow::Continue(())
            })?;
            let mut out = if hits.is_empty() {
                format!("no paths under {start} match {:?}\n", a.pattern)
            } else {
                hits.join("\n") + "\n"
            };
            if cut {
                out.push_str(&format!(
                    "[stopped after {} results; narrow the pattern or the path]\n",
                    limits.max_entries
                ));
            }
            if summary.unreadable > 0 {
                out.push_str(&format!(
                    "[{} directories could not be read]\n",
                    summary.unreadable
                ));
            }
            if summary.too_deep > 0 {
                out.push_str(&format!(
                    "[{} directories too deep to enter]\n",
                    summary.too_deep
                ));
            }
            text(out)
        })
    }
}
