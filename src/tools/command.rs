//! `run_command`: the agent's commands, always through the run's sandbox.
//!
//! An argv runs without a shell; a shell string only when the contract allows it
//! (`[sandbox] shell = true`), and then as `sh -c` inside the sandbox. The model sees
//! the exit code (or the signal), the cap that stopped the command if one was enforced,
//! and the head and tail of its output.

use futures_util::future::BoxFuture;
use serde::Deserialize;

use super::{Tool, ToolContext, ToolError, ToolOutput};
use crate::exec::BoundedOutput;
use crate::exec::Purpose;
use crate::policy::{Act, Action};
use crate::provider::ToolSpec;
use crate::sandbox::SandboxError;

/// Runs a command in the sandbox.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunCommand;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    #[serde(default)]
    argv: Vec<String>,
    #[serde(default)]
    command: Option<String>,
}

impl Args {
    fn argv(self, shell: bool) -> Result<Vec<String>, ToolError> {
        match (self.argv.is_empty(), self.command) {
            (false, None) => Ok(self.argv),
            (true, Some(c)) if shell => Ok(vec!["sh".into(), "-c".into(), c]),
            (true, Some(_)) => Err(ToolError::BadInput(
                "shell strings are not allowed in this run; pass argv as a list".into(),
            )),
            _ => Err(ToolError::BadInput("pass argv (a list of strings)".into())),
        }
    }
}

impl Tool for RunCommand {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "run_command".into(),
            description: "Run a program in the workspace, isolated in a sandbox with no \
                          network: argv is the program and its arguments, run without a \
                          shell. Returns the exit code and the head and tail of its output. \
                          Use it to build, test and inspect."
                .into(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {
                    "argv": {"type": "array", "items": {"type": "string"}, "description": "Program and arguments, e.g. [\"cargo\", \"test\"]."},
                    "command": {"type": "string", "description": "A shell command line, only where the run allows a shell."}
                },
                "additionalProperties": false
            }),
        }
    }

    fn plan(&self, ctx: &ToolContext, input: &serde_json::Value) -> Result<Vec<Action>, ToolError> {
        let a: Args = super::fs::parse(input)?;
        let shell = ctx.exec.as_ref().is_some_and(|e| e.shell_allowed());
        let argv = a.argv(shell)?;
        if argv[0].is_empty() {
            return Err(ToolError::BadInput("argv[0] is empty".into()));
        }
        // The whole argv: exec rules judge arguments and what wrappers run too.
        Ok(vec![Action::new(
            Act::Exec,
            crate::policy::command_line::quote(&argv),
        )])
    }

    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        input: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let exec = ctx.exec.as_ref().ok_or_else(|| {
                ToolError::Unavailable("commands cannot run in this run: it has no sandbox")
            })?;
            let a: Args = super::fs::parse(input)?;
            let argv = a.argv(exec.shell_allowed())?;
            let out = match exec.run(argv.clone(), Purpose::Tool, None).await {
                Ok(o) => o,
                Err(SandboxError::Exec { program, source })
                    if source.kind() == std::io::ErrorKind::NotFound =>
                {
                    return Ok(ToolOutput {
                        content: format!("{program}: command not found in the sandbox"),
                        effects: Vec::new(),
                    });
                }
                Err(e) => return Err(ToolError::Sandbox(e)),
            };
            let half = ctx.limits.max_output_bytes / 2;
            let mut text = match (out.exit_code, out.signal) {
                (Some(c), _) => format!("exit code {c}"),
                (None, Some(s)) => format!("killed by signal {s}"),
                _ => "ended without an exit status".into(),
            };
            text.push_str(&cap_note(&out));
            text.push_str(&format!(" [{}]\n", out.backend.label()));
            for (name, stream) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
                if stream.bytes.is_empty() {
                    continue;
                }
                // The head, the middle the sandbox dropped, and the true tail.
                let mut b = BoundedOutput::new(half);
                b.push(&stream.bytes);
                let kept = (stream.bytes.len() + stream.tail.len()) as u64;
                b.skip(stream.total_bytes.saturating_sub(kept));
                b.push(&stream.tail);
                text.push_str(&format!(
                    "--- {name}{} ---\n",
                    if stream.truncated {
                        " (cut by the output cap)"
                    } else {
                        ""
                    }
                ));
                text.push_str(&b.render());
                if !text.ends_with('\n') {
                    text.push('\n');
                }
            }
            for notice in exec.take_notices() {
                text.push_str(&format!("--- harness ---\n{notice}\n"));
            }
            Ok(ToolOutput {
                content: text,
                effects: Vec::new(),
            })
        })
    }
}

/// What the model is told of a cap: only one recorded as hit where it was enforced,
/// and only "stopped" when the command did not end on its own (a refused fork or a
/// file stopped at the disk cap leaves the command running to its exit).
fn cap_note(out: &crate::sandbox::SandboxOutcome) -> String {
    use crate::sandbox::{Cap, CapState};
    let Some(cap) = out
        .cap_hit
        .filter(|c| out.cap_state(*c) == Some(CapState::Hit))
    else {
        return String::new();
    };
    match (cap, out.exit_code) {
        (Cap::Processes, _) => " (a fork was refused at the sandbox's processes cap)".into(),
        (Cap::Output, Some(_)) => " (output cut at the sandbox's output cap)".into(),
        (Cap::Output, None) => " (killed: its output ran far past the sandbox's output cap)".into(),
        (_, Some(_)) => format!(" (it hit the sandbox's {} cap)", cap.label()),
        (_, None) => format!(" (stopped by the sandbox's {} cap)", cap.label()),
    }
}
