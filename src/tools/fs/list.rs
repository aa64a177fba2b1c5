//! `list_dir`: the entries of one directory.

use futures_util::future::BoxFuture;
use serde::Deserialize;

use super::{display_entry, plan_path, run_blocking, text};
use crate::policy::{Act, Action};
use crate::provider::ToolSpec;
use crate::tools::{Tool, ToolContext, ToolError, ToolOutput};

/// Lists a directory.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListDir;

#[derive(Deserialize)]
struct Args {
    path: Option<String>,
}

impl Tool for ListDir {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "list_dir".into(),
            description: "List one directory of the workspace (default: the root), sorted by \
                          name. Directories end with `/`, symlinks with `@`. Not recursive: \
                          use find for a whole tree."
                .into(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Directory relative to the workspace root (default `.`)."}
                },
                "additionalProperties": false
            }),
        }
    }

    fn plan(&self, ctx: &ToolContext, input: &serde_json::Value) -> Result<Vec<Action>, ToolError> {
        let a: Args = super::parse(input)?;
        plan_path(ctx, Act::Read, a.path.as_deref().unwrap_or("."))
    }

    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        input: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        run_blocking(ctx, input, |ws, limits, a: Args| {
            let rel = ws.normalize(a.path.as_deref().unwrap_or("."))?;
            let entries = ws.list_dir(&rel)?;
            if entries.is_empty() {
                return text(format!("{rel}: empty directory"));
            }
            let mut out = String::new();
            for e in entries.iter().take(limits.max_entries) {
                out.push_str(&display_entry(&e.name, e.kind));
                out.push('\n');
            }
            if entries.len() > limits.max_entries {
                out.push_str(&format!(
                    "[{} of {} entries shown; the rest were cut]",
                    limits.max_entries,
                    entries.len()
                ));
            }
            text(out)
        })
    }
}
