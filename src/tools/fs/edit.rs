//! `edit_file`: replace one exact, unique occurrence of a text.

use futures_util::future::BoxFuture;
use serde::Deserialize;

use super::{plan_path, run_blocking, sha256_hex};
use crate::policy::{Act, Action};
use crate::provider::ToolSpec;
use crate::tools::confine::Follow;
use crate::tools::{FileEffect, Tool, ToolContext, ToolError, ToolOutput};

/// Replaces one exact occurrence of a text in a file.
#[derive(Debug, Clone, Copy, Default)]
pub struct EditFile;

#[derive(Deserialize)]
struct Args {
    path: String,
    old: String,
    new: String,
}

impl Tool for EditFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "edit_file".into(),
            description: "Replace one exact occurrence of `old` with `new` in a text file. \
                          `old` must match the file exactly (whitespace and indentation \
                          included) and occur exactly once: include neighbouring lines to \
                          make it unique. If it occurs zero or several times nothing is \
                          changed and the count is reported."
                .into(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path relative to the workspace root."},
                    "old": {"type": "string", "description": "Exact text to replace; must occur exactly once."},
                    "new": {"type": "string", "description": "Replacement text."}
                },
                "required": ["path", "old", "new"],
                "additionalProperties": false
            }),
        }
    }

    fn plan(&self, ctx: &ToolContext, input: &serde_json::Value) -> Result<Vec<Action>, ToolError> {
        let a: Args = super::parse(input)?;
        // The edit reads the file to find `old`, and its answer ("edited" or "occurs
        // 0 times") tells what is in it: it is a read as much as a write.
        let mut actions = plan_path(ctx, Act::Read, &a.path)?;
        actions.extend(plan_path(ctx, Act::Write, &a.path)?);
        Ok(actions)
    }

    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        input: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        run_blocking(ctx, input, |ws, limits, a: Args| {
            if a.old.is_empty() {
                return Err(ToolError::BadInput("`old` must not be empty".into()));
            }
            let rel = ws.normalize(&a.path)?;
            // Read exactly the file the write will replace (no symlink on the path).
            let bytes = ws.read_with(&rel, limits.max_file_bytes, Follow::Never)?;
            let Ok(body) = std::str::from_utf8(&bytes) else {
                return Err(ToolError::BadInput(format!(
                    "{rel} is not UTF-8 text; edit_file only edits text"
                )));
            };
            let count = occurrences(body, &a.old);
            if count != 1 {
                return Err(ToolError::EditMatch { path: rel, count });
            }
            let Some(at) = body.find(&a.old) else {
                return Err(ToolError::EditMatch {
                    path: rel,
                    count: 0,
                });
            };
            let edited = format!("{}{}{}", &body[..at], a.new, &body[at + a.old.len()..]);
            ws.write(&rel, edited.as_bytes())?;
            let line = body[..at].matches('\n').count() + 1;
            Ok(ToolOutput {
                content: format!("edited {rel} at line {line}"),
                effects: vec![FileEffect {
                    path: rel,
                    before: Some(sha256_hex(&bytes)),
                    after: Some(sha256_hex(edited.as_bytes())),
                }],
            })
        })
    }
}

/// Occurrences of `needle` in `hay`, overlapping ones included: `aa` is in `aaa`
/// twice, which makes a replacement of it ambiguous.
fn occurrences(hay: &str, needle: &str) -> usize {
    let step = needle.chars().next().map_or(1, char::len_utf8);
    let mut n = 0;
    let mut from = 0;
    while let Some(i) = hay[from..].find(needle) {
        n += 1;
        from += i + step;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::occurrences;

    #[test]
    fn occurrences_counts_overlaps() {
        assert_eq!(occurrences("aaa", "aa"), 2);
        assert_eq!(occurrences("abcabc", "abc"), 2);
        assert_eq!(occurrences("héllo", "é"), 1);
        assert_eq!(occurrences("x", "y"), 0);
    }
}
