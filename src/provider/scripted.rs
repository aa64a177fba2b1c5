//! Replays model turns from a script: the offline demo and the tests run on it.
//!
//! The turn answered is the number of assistant messages already in the conversation,
//! so the provider holds no cursor of its own: a resumed run replays from exactly
//! where the stored conversation stands.
//!
//! A sub-agent's conversation starts afresh, so it gets a script of its own: turns
//! tagged `"agent": "<name>"` in a script file (or given with
//! [`Scripted::with_agent`]) are played to the sub-agent of that name, whatever its
//! depth; untagged turns are the root run's. Names are one flat namespace per script.
//!
//! A call marked `"idempotent": true` is one the script says is safe to run twice.
//! When the harness reports such a call interrupted (a resume after a crash tells the
//! model a command was cut off, effects unknown), the script issues it again, as a
//! model that knows the command would, before going on; that extra turn (its text is
//! [`RERUN_TEXT`]) is not a turn of the script. Unmarked calls are never re-issued.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};

use super::Provider;
use super::error::{ProviderError, ProviderErrorKind};
use super::types::{
    Completion, CompletionRequest, ContentBlock, Cost, CostSource, ProviderIdentity, Role,
    StopReason, Usage,
};

/// One tool call in a script; the id is generated when absent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptCall {
    /// Call id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Tool name.
    pub name: String,
    /// Arguments.
    #[serde(default)]
    pub input: serde_json::Value,
    /// Safe to run again: re-issued when the harness reports it interrupted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub idempotent: bool,
}

/// The text of the turn that re-issues interrupted idempotent calls.
pub const RERUN_TEXT: &str = "Re-running the interrupted call.";

/// One recorded model turn: a line of a script file (JSON Lines).
///
/// Either the short form (`text` and/or `tool_calls`) or `content` with the neutral
/// blocks verbatim (what `Record` writes, thinking blocks included).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptTurn {
    /// Assistant text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Tool calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ScriptCall>,
    /// Full content blocks (instead of `text` / `tool_calls`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<ContentBlock>,
    /// Usage as recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Cost as recorded; unknown when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Model as recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The sub-agent this turn belongs to; `None` for the root run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

impl ScriptTurn {
    /// A turn that only says `text`.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: Some(text.into()),
            ..Self::default()
        }
    }

    /// A turn that calls one tool.
    pub fn tool(name: impl Into<String>, input: serde_json::Value) -> Self {
        Self {
            tool_calls: vec![ScriptCall {
                id: None,
                name: name.into(),
                input,
                idempotent: false,
            }],
            ..Self::default()
        }
    }

    /// Adds another tool call to this turn.
    pub fn and_tool(mut self, name: impl Into<String>, input: serde_json::Value) -> Self {
        self.tool_calls.push(ScriptCall {
            id: None,
            name: name.into(),
            input,
            idempotent: false,
        });
        self
    }

    /// Marks every call of this turn idempotent (see the module docs).
    pub fn idempotent(mut self) -> Self {
        for c in &mut self.tool_calls {
            c.idempotent = true;
        }
        self
    }

    fn blocks(&self, turn: usize) -> Vec<ContentBlock> {
        if !self.content.is_empty() {
            return self.content.clone();
        }
        let mut out = Vec::new();
        if let Some(t) = &self.text {
            out.push(ContentBlock::Text { text: t.clone() });
        }
        for (i, c) in self.tool_calls.iter().enumerate() {
            out.push(ContentBlock::ToolUse {
                id: c.id.clone().unwrap_or_else(|| format!("call_{turn}_{i}")),
                name: c.name.clone(),
                input: if c.input.is_null() {
                    serde_json::json!({})
                } else {
                    c.input.clone()
                },
            });
        }
        out
    }
}

/// A script that could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScriptError {
    /// The file could not be read.
    #[error("cannot read script {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A line is not a valid turn.
    #[error("{}:{line}: {message}", path.display())]
    Line {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// Replays a list of turns.
#[derive(Debug, Clone)]
pub struct Scripted {
    turns: Vec<ScriptTurn>,
    source: Option<PathBuf>,
    /// Sub-agents' scripts by name, shared by the whole tree.
    agents: Arc<BTreeMap<String, Vec<ScriptTurn>>>,
}

impl Scripted {
    /// A provider replaying `turns`.
    pub fn new(turns: Vec<ScriptTurn>) -> Self {
        Self {
            turns,
            source: None,
            agents: Arc::default(),
        }
    }

    /// Scripts the sub-agent called `name` (at any depth of the tree).
    pub fn with_agent(mut self, name: impl Into<String>, turns: Vec<ScriptTurn>) -> Self {
        Arc::make_mut(&mut self.agents).insert(name.into(), turns);
        self
    }

    /// Loads a JSON Lines script (blank lines and lines starting with `//` skipped).
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ScriptError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_source(path, &text)
    }

    /// Parses a script's `text` as kept by a run, `path` naming where it was read (the
    /// provider's identity and errors show it; the file itself is not read). A resume
    /// replays the script this way from the store, wherever the file is now.
    pub fn from_source(path: impl AsRef<Path>, text: &str) -> Result<Self, ScriptError> {
        let path = path.as_ref();
        let mut turns = Vec::new();
        let mut agents: BTreeMap<String, Vec<ScriptTurn>> = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            let l = line.trim();
            if l.is_empty() || l.starts_with("//") {
                continue;
            }
            let turn: ScriptTurn = serde_json::from_str(l).map_err(|e| ScriptError::Line {
                path: path.to_path_buf(),
                line: i + 1,
                message: e.to_string(),
            })?;
            if turn.text.is_none() && turn.tool_calls.is_empty() && turn.content.is_empty() {
                return Err(ScriptError::Line {
                    path: path.to_path_buf(),
                    line: i + 1,
                    message: "a turn needs text, tool_calls or content".into(),
                });
            }
            match turn.agent.clone() {
                Some(name) => agents.entry(name).or_default().push(turn),
                None => turns.push(turn),
            }
        }
        Ok(Self {
            turns,
            source: Some(path.to_path_buf()),
            agents: Arc::new(agents),
        })
    }

    /// Number of turns.
    pub fn len(&self) -> usize {
        self.turns.len()
    }

    /// Whether the script has no turns.
    pub fn is_empty(&self) -> bool {
        self.turns.is_empty()
    }
}

impl Scripted {
    /// Whether the script marks a call of this name and arguments idempotent.
    fn idempotent(&self, name: &str, input: &serde_json::Value) -> bool {
        self.turns
            .iter()
            .flat_map(|t| &t.tool_calls)
            .any(|c| c.idempotent && c.name == name && &c.input == input)
    }

    /// The turn re-issuing the idempotent calls the last message reports interrupted.
    fn rerun(&self, request: &CompletionRequest) -> Option<Completion> {
        let (last, before) = request.messages.split_last()?;
        let asked = before.iter().rev().find(|m| m.role == Role::Assistant)?;
        let cut: Vec<&str> = last
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    ..
                } if content.starts_with(crate::halt::INTERRUPTED_PREFIX) => {
                    Some(tool_use_id.as_str())
                }
                _ => None,
            })
            .collect();
        let mut content = vec![ContentBlock::Text {
            text: RERUN_TEXT.into(),
        }];
        for b in &asked.content {
            if let ContentBlock::ToolUse { id, name, input } = b
                && cut.contains(&id.as_str())
                && self.idempotent(name, input)
            {
                content.push(ContentBlock::ToolUse {
                    id: format!("rerun_{id}"),
                    name: name.clone(),
                    input: input.clone(),
                });
            }
        }
        (content.len() > 1).then(|| Completion {
            content,
            stop_reason: StopReason::ToolUse,
            usage: Usage::default(),
            cost: Cost::UNKNOWN,
            model: "scripted".into(),
            request_body: serde_json::to_vec(request).ok(),
            price: None,
            model_call: None,
            cut_at: None,
            cut_status: None,
        })
    }
}

impl Provider for Scripted {
    fn identity(&self) -> ProviderIdentity {
        ProviderIdentity {
            kind: "scripted".into(),
            model: "scripted".into(),
            base_url: self.source.as_ref().map(|p| p.display().to_string()),
        }
    }

    /// The turns tagged for `name`; a sub-agent without a script gets none, so its
    /// first call fails as an exhausted script instead of replaying the root's turns.
    fn for_agent(&self, name: &str) -> Option<Arc<dyn Provider>> {
        Some(Arc::new(Self {
            turns: self.agents.get(name).cloned().unwrap_or_default(),
            source: self.source.clone(),
            agents: self.agents.clone(),
        }))
    }

    fn complete<'a>(
        &'a self,
        request: &'a CompletionRequest,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        Box::pin(async move {
            if let Some(rerun) = self.rerun(request) {
                return Ok(rerun);
            }
            let n = request
                .messages
                .iter()
                .filter(|m| m.role == Role::Assistant && m.text() != RERUN_TEXT)
                .count();
            let turn = self.turns.get(n).ok_or_else(|| {
                ProviderError::new(
                    ProviderErrorKind::Request,
                    "scripted",
                    format!(
                        "script exhausted: turn {} requested, the script has {}",
                        n + 1,
                        self.turns.len()
                    ),
                )
            })?;
            let content = turn.blocks(n + 1);
            let has_calls = content
                .iter()
                .any(|b| matches!(b, ContentBlock::ToolUse { .. }));
            let body = serde_json::to_vec(request).map_err(|e| {
                ProviderError::new(ProviderErrorKind::Request, "scripted", e.to_string())
            })?;
            Ok(Completion {
                content,
                stop_reason: if has_calls {
                    StopReason::ToolUse
                } else {
                    StopReason::EndTurn
                },
                usage: turn.usage.unwrap_or_default(),
                cost: match turn.cost_usd {
                    Some(usd) => Cost {
                        usd: Some(usd),
                        source: CostSource::Script,
                    },
                    None => Cost::UNKNOWN,
                },
                model: turn.model.clone().unwrap_or_else(|| "scripted".into()),
                request_body: Some(body),
                price: None,
                model_call: None,
                cut_at: None,
                cut_status: None,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::Message;

    #[tokio::test]
    async fn replays_by_assistant_count_and_reports_exhaustion() {
        let p = Scripted::new(vec![
            ScriptTurn::tool("read_file", serde_json::json!({"path": "a"})),
            ScriptTurn::text("done"),
        ]);
        let mut req = CompletionRequest::new("m", vec![Message::user("go")]);
        let first = p.complete(&req).await.unwrap();
        assert_eq!(first.stop_reason, StopReason::ToolUse);
        assert_eq!(first.tool_calls().next().unwrap().0, "call_1_0");
        req.messages.push(first.to_message());
        assert_eq!(p.complete(&req).await.unwrap().text(), "done");
        req.messages.push(Message::assistant("x"));
        let err = p.complete(&req).await.unwrap_err();
        assert!(err.message.contains("exhausted"), "{err}");
        assert_eq!(first.cost.usd, None, "unrecorded cost is unknown, not zero");
    }

    #[test]
    fn bad_line_named() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("s.jsonl");
        std::fs::write(&f, "{\"text\":\"ok\"}\n\n{\"txt\":1}\n").unwrap();
        match Scripted::from_file(&f) {
            Err(ScriptError::Line { line, .. }) => assert_eq!(line, 3),
            other => panic!("{other:?}"),
        }
    }
}
