//! Records a real provider's turns as a script that [`Scripted`](super::Scripted)
//! replays: the way to turn one live run into an offline test or demo.
//!
//! Each completion becomes one JSON line, a [`ScriptTurn`] with the full content
//! blocks (thinking and its signature included), usage, cost and model. Lines are
//! appended as each call returns, so a run that dies part-way still leaves a
//! usable script of the turns it got. Failed calls are not recorded: the script
//! replays answers, and a retry of the same turn then lines up with its one answer.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use futures_util::future::BoxFuture;

use super::Provider;
use super::error::{ProviderError, ProviderErrorKind};
use super::scripted::ScriptTurn;
use super::types::{Completion, CompletionRequest, ProviderIdentity};

/// Wraps a provider and appends every turn it returns to a script file.
///
/// ```
/// use io_harness::provider::{CompletionRequest, Message, Provider, Record, ScriptTurn, Scripted};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("script.jsonl");
/// let live = Record::new(Scripted::new(vec![ScriptTurn::text("hi")]), &path).unwrap();
/// live.complete(&CompletionRequest::new("m", vec![Message::user("hello")])).await.unwrap();
/// let replay = Scripted::from_file(&path).unwrap();
/// assert_eq!(replay.len(), 1);
/// # });
/// ```
#[derive(Debug)]
pub struct Record<P> {
    inner: P,
    path: PathBuf,
    file: Mutex<File>,
}

impl<P: Provider> Record<P> {
    /// Records `inner` into `path`, appending to the file (created if missing).
    pub fn new(inner: P, path: impl AsRef<Path>) -> std::io::Result<Self> {
        let path = path.as_ref().to_path_buf();
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        Ok(Self {
            inner,
            path,
            file: Mutex::new(file),
        })
    }

    /// The script file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn append(&self, turn: &Completion) -> Result<(), ProviderError> {
        let line = ScriptTurn {
            content: turn.content.clone(),
            usage: Some(turn.usage),
            cost_usd: turn.cost.usd,
            model: Some(turn.model.clone()),
            ..ScriptTurn::default()
        };
        let mut text = serde_json::to_string(&line).map_err(|e| self.failed(e.to_string()))?;
        text.push('\n');
        // One write of the whole line: appends of concurrent calls do not interleave.
        let mut file = self
            .file
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        file.write_all(text.as_bytes())
            .and_then(|()| file.flush())
            .map_err(|e| self.failed(e.to_string()))
    }

    fn failed(&self, why: String) -> ProviderError {
        let msg = format!("cannot record to {}: {why}", self.path.display());
        ProviderError::new(ProviderErrorKind::Request, "record", msg)
    }
}

impl<P: Provider> Provider for Record<P> {
    fn identity(&self) -> ProviderIdentity {
        self.inner.identity()
    }

    fn secrets(&self) -> Vec<String> {
        self.inner.secrets()
    }

    fn endpoint_source(&self) -> Option<String> {
        self.inner.endpoint_source()
    }

    /// Calls the inner provider and appends its answer. A turn that cannot be written
    /// fails the call (kind `Request`, not retried): a recording that silently misses
    /// turns would replay the wrong answers.
    fn complete<'a>(
        &'a self,
        request: &'a CompletionRequest,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        Box::pin(async move {
            let turn = self.inner.complete(request).await?;
            self.append(&turn)?;
            Ok(turn)
        })
    }
}
