//! `write_file`: create or replace a whole file.

use futures_util::future::BoxFuture;
use serde::Deserialize;

use super::{plan_path, run_blocking, sha256_hex};
use crate::policy::{Act, Action};
use crate::provider::ToolSpec;
use crate::tools::confine::{Follow, io_error};
use crate::tools::{FileEffect, Tool, ToolContext, ToolError, ToolOutput, Workspace};

/// Creates or replaces a file.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteFile;

#[derive(Deserialize)]
struct Args {
    path: String,
    content: String,
}

impl Tool for WriteFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "write_file".into(),
            description: "Create a file, or replace the whole content of an existing one. \
                          Missing parent directories are created. To change part of an \
                          existing file, prefer edit_file. Paths are relative to the \
                          workspace root."
                .into(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path relative to the workspace root."},
                    "content": {"type": "string", "description": "The complete new content."}
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
        }
    }

    fn plan(&self, ctx: &ToolContext, input: &serde_json::Value) -> Result<Vec<Action>, ToolError> {
        let a: Args = super::parse(input)?;
        plan_path(ctx, Act::Write, &a.path)
    }

    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        input: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        run_blocking(ctx, input, |ws, _limits, a: Args| {
            let rel = ws.normalize(&a.path)?;
            let before = existing_hash(ws, &rel)?;
            ws.write(&rel, a.content.as_bytes())?;
            let verb = if before.is_some() {
                "replaced"
            } else {
                "created"
            };
            Ok(ToolOutput {
                content: format!("{verb} {rel} ({} bytes)", a.content.len()),
                effects: vec![FileEffect {
                    path: rel,
                    before,
                    after: Some(sha256_hex(a.content.as_bytes())),
                }],
            })
        })
    }
}

/// The hash of the file a write to `rel` would replace (`None`: there is none).
fn existing_hash(ws: &Workspace, rel: &str) -> Result<Option<String>, ToolError> {
    match ws.open_file(rel, Follow::Never) {
        Ok((file, meta)) => super::content_fingerprint(file, meta.len)
            .map(Some)
            .map_err(|e| io_error(rel, e)),
        Err(ToolError::NotFound(_)) => Ok(None),
        Err(e) => Err(e),
    }
}
