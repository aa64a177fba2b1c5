//! Stores a new run's resolved configuration the moment the run has an id (its
//! `run_started` event), so even a run killed in its first step has it on record.

use std::sync::Arc;
use std::sync::Mutex;

use io_harness::run::{Flow, Observer, RunEvent};
use io_harness::store::RunSetting;

/// Passes every event on to `inner`; on the first `run_started` of a new run, records
/// the settings with that run.
pub struct RecordSettings {
    inner: Arc<dyn Observer>,
    store: io_harness::Store,
    pending: Mutex<Option<Vec<RunSetting>>>,
}

impl RecordSettings {
    pub fn new(
        inner: Arc<dyn Observer>,
        store: io_harness::Store,
        settings: Vec<RunSetting>,
    ) -> Self {
        Self {
            inner,
            store,
            pending: Mutex::new(Some(settings)),
        }
    }
}

impl Observer for RecordSettings {
    fn on_event(&self, event: &RunEvent) -> Flow {
        if let RunEvent::RunStarted {
            run_id,
            resumed: false,
            ..
        } = event
            && let Some(settings) = self.pending.lock().ok().and_then(|mut p| p.take())
            && let Err(e) = self.store.record_settings(*run_id, &settings)
        {
            // The run's own next commit sees a failing store and ends it; the
            // settings are a record of the start, not a reason to stop here.
            errln!("warning: the resolved configuration of run {run_id} was not stored: {e}");
        }
        self.inner.on_event(event)
    }
}
