//! `read_file`: numbered lines of a text file, a window at a time.

use futures_util::future::BoxFuture;
use serde::Deserialize;

use super::{cut_line, plan_path, run_blocking, text};
use crate::policy::{Act, Action};
use crate::provider::ToolSpec;
use crate::tools::{Tool, ToolContext, ToolError, ToolOutput};

/// Longest line shown whole.
const MAX_LINE: usize = 2000;
/// Output bytes kept free for the closing note.
const NOTE_RESERVE: usize = 200;

/// Reads a text file as numbered lines.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadFile;

#[derive(Deserialize)]
struct Args {
    path: String,
    start_line: Option<usize>,
    end_line: Option<usize>,
}

impl Tool for ReadFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "read_file".into(),
            description: "Read a text file in the workspace. Returns numbered lines \
                          (`    12\\ttext`). For a long file pass start_line and end_line \
                          (1-based, inclusive); the output says when it was cut and where to \
                          continue. Binary files are reported, not shown. Paths are relative \
                          to the workspace root."
                .into(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path relative to the workspace root."},
                    "start_line": {"type": "integer", "minimum": 1, "description": "First line to show (default 1)."},
                    "end_line": {"type": "integer", "minimum": 1, "description": "Last line to show (default: the end)."}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        }
    }

    fn plan(&self, ctx: &ToolContext, input: &serde_json::Value) -> Result<Vec<Action>, ToolError> {
        let a: Args = super::parse(input)?;
        plan_path(ctx, Act::Read, &a.path)
    }

    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        input: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        run_blocking(ctx, input, |ws, limits, a: Args| {
            let rel = ws.normalize(&a.path)?;
            let bytes = ws.read_bounded(&rel, limits.max_file_bytes)?;
            if bytes.contains(&0) {
                return text(format!(
                    "{rel}: binary file ({} bytes); not shown",
                    bytes.len()
                ));
            }
            let body = String::from_utf8_lossy(&bytes);
            text(render(
                &rel,
                &body,
                a.start_line,
                a.end_line,
                limits.max_output_bytes,
            )?)
        })
    }
}

/// Numbers lines `start..=end` of `body`, stopping before `budget` bytes and saying
/// where to continue.
fn render(
    rel: &str,
    body: &str,
    start: Option<usize>,
    end: Option<usize>,
    budget: usize,
) -> Result<String, ToolError> {
    let lines: Vec<&str> = body.lines().collect();
    let total = lines.len();
    if total == 0 {
        return Ok(format!("{rel}: empty file"));
    }
    let start = start.unwrap_or(1).max(1);
    if start > total {
        return Err(ToolError::BadInput(format!(
            "start_line {start} is past the end of {rel} ({total} lines)"
        )));
    }
    let end = end.unwrap_or(total).min(total);
    if end < start {
        return Err(ToolError::BadInput(format!(
            "end_line {end} is before start_line {start}"
        )));
    }
    let budget = budget.saturating_sub(NOTE_RESERVE);
    let mut out = String::new();
    let mut last = start - 1;
    for (n, line) in (start..=end).zip(&lines[start - 1..end]) {
        let entry = format!("{n:>6}\t{}\n", cut_line(line, MAX_LINE));
        if !out.is_empty() && out.len() + entry.len() > budget {
            break;
        }
        out.push_str(&entry);
        last = n;
    }
    if last < total {
        out.push_str(&format!(
            "[lines {start}-{last} of {total}; call read_file with start_line={} to see more]",
            last + 1
        ));
    } else if start > 1 {
        out.push_str(&format!("[lines {start}-{last} of {total}]"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_numbers_windows_and_says_where_to_continue() {
        let body = "a\nb\nc\nd\n";
        assert_eq!(
            render("f", body, None, None, 10_000).unwrap(),
            "     1\ta\n     2\tb\n     3\tc\n     4\td\n"
        );
        let w = render("f", body, Some(2), Some(3), 10_000).unwrap();
        assert!(w.starts_with("     2\tb\n     3\tc\n"), "{w}");
        assert!(w.contains("start_line=4"), "{w}");
        let tail = render("f", body, Some(4), None, 10_000).unwrap();
        assert!(tail.ends_with("[lines 4-4 of 4]"), "{tail}");
        assert!(matches!(
            render("f", body, Some(9), None, 10_000),
            Err(ToolError::BadInput(_))
        ));
        assert!(matches!(
            render("f", body, Some(3), Some(2), 10_000),
            Err(ToolError::BadInput(_))
        ));
        assert_eq!(
            render("f", "", None, None, 10_000).unwrap(),
            "f: empty file"
        );
    }

    #[test]
    fn render_stops_at_the_budget() {
        let body: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        let out = render("f", &body, None, None, 1000).unwrap();
        assert!(out.len() <= 1000, "{}", out.len());
        assert!(
            out.contains("of 1000; call read_file with start_line="),
            "{out}"
        );
    }
}
