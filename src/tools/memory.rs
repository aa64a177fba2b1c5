//! `remember` and `forget`: the agent's notes for later runs on the same workspace.
//!
//! They count as `exec` actions of their own names for the policy (registered tools
//! are `exec` with their qualified name). A note is refused when its key or value
//! carries content of a file the policy denies reading (see [`leak`]), so memory is no
//! way around a mask.

mod leak;

use crate::store::AsyncStore;
use std::path::PathBuf;

use futures_util::future::BoxFuture;
use serde::Deserialize;

use super::{Tool, ToolContext, ToolError, ToolOutput};
use crate::policy::{Act, Action};
use crate::provider::ToolSpec;
use crate::store::Store;

/// What the memory tools work with.
#[derive(Clone)]
pub struct MemoryContext {
    /// The store holding the notes.
    pub store: Store,
    /// The canonical path of the workspace the notes belong to.
    pub workspace: String,
    /// The run writing them.
    pub run_id: i64,
    /// Host paths of the files the policy denied reading when the run started.
    pub denied_files: Vec<PathBuf>,
    /// The run's executor: the files masked in its last session (where they were
    /// then) are checked too, so a secret a command moved or wrote is covered.
    pub exec: Option<std::sync::Arc<crate::exec::Executor>>,
}

impl MemoryContext {
    /// The denied file whose content the note (`key` or `value`) carries, if any.
    fn leaks(&self, key: &str, value: &str) -> Option<PathBuf> {
        let mut files = self.denied_files.clone();
        if let Some(e) = &self.exec {
            files.extend(e.masked().iter().map(|m| e.workdir().join(m)));
        }
        let (key, value) = (leak::fold(key), leak::fold(value));
        files
            .into_iter()
            .find(|f| leak::carries_content_of(f, &[&key, &value]))
    }
}

/// Saves a note for later runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Remember;

/// Deletes a note.
#[derive(Debug, Clone, Copy, Default)]
pub struct Forget;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RememberArgs {
    key: String,
    value: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ForgetArgs {
    key: String,
}

fn memory(ctx: &ToolContext) -> Result<&MemoryContext, ToolError> {
    ctx.memory
        .as_deref()
        .ok_or_else(|| ToolError::Unavailable("memory is not available in this run"))
}

impl Tool for Remember {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "remember".into(),
            description: "Save a short note (key, value) that later runs on this workspace will \
                          be shown: build commands that work, pitfalls, where things live. \
                          Writing an existing key replaces it."
                .into(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {
                    "key": {"type": "string", "description": "A short name, at most 64 bytes."},
                    "value": {"type": "string", "description": "The note, at most 1000 bytes."}
                },
                "required": ["key", "value"],
                "additionalProperties": false
            }),
        }
    }

    fn plan(
        &self,
        _ctx: &ToolContext,
        input: &serde_json::Value,
    ) -> Result<Vec<Action>, ToolError> {
        let _: RememberArgs = super::fs::parse(input)?;
        Ok(vec![Action::new(Act::Exec, "remember")])
    }

    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        input: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let m = memory(ctx)?;
            let a: RememberArgs = super::fs::parse(input)?;
            if let Some(f) = m.leaks(&a.key, &a.value) {
                return Err(ToolError::BadInput(format!(
                    "refused: the note carries content of {}, which the policy denies reading",
                    f.file_name().map_or_else(
                        || f.display().to_string(),
                        |n| n.to_string_lossy().into_owned()
                    )
                )));
            }
            let (workspace, key, value, run_id) = (
                m.workspace.clone(),
                a.key.clone(),
                a.value.clone(),
                m.run_id,
            );
            let evicted = AsyncStore::new(m.store.clone())
                .call(move |s| s.memory_put(&workspace, &key, &value, Some(run_id)))
                .await?;
            let mut content = format!("remembered {:?}", a.key);
            if !evicted.is_empty() {
                content.push_str(&format!(
                    "; to stay within {} notes the least recently used were dropped: {}",
                    crate::store::MAX_NOTES,
                    evicted.join(", ")
                ));
            }
            Ok(ToolOutput {
                content,
                effects: Vec::new(),
            })
        })
    }
}

impl Tool for Forget {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "forget".into(),
            description: "Delete a note saved with remember (it is wrong or outdated).".into(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {"key": {"type": "string", "description": "The note's key."}},
                "required": ["key"],
                "additionalProperties": false
            }),
        }
    }

    fn plan(
        &self,
        _ctx: &ToolContext,
        input: &serde_json::Value,
    ) -> Result<Vec<Action>, ToolError> {
        let _: ForgetArgs = super::fs::parse(input)?;
        Ok(vec![Action::new(Act::Exec, "forget")])
    }

    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        input: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let m = memory(ctx)?;
            let a: ForgetArgs = super::fs::parse(input)?;
            let (workspace, key) = (m.workspace.clone(), a.key.clone());
            let existed = AsyncStore::new(m.store.clone())
                .call(move |s| s.memory_delete(&workspace, &key))
                .await?;
            Ok(ToolOutput {
                content: if existed {
                    format!("forgot {:?}", a.key)
                } else {
                    format!("there was no note {:?}", a.key)
                },
                effects: Vec::new(),
            })
        })
    }
}
