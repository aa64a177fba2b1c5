//! `--otlp-endpoint URL` on `run` and `resume` (or `OTEL_EXPORTER_OTLP_ENDPOINT`):
//! the run's trace is exported while it goes. The run's observer is wrapped so each
//! step commit and the end notify the live exporter, which never waits (see
//! `io_harness::otel::live`).

use std::sync::Arc;

use io_harness::run::{Flow, Observer, RunEvent};

use super::CliError;

/// The live exporter, when one was asked for.
#[cfg(feature = "otel")]
pub type Live = Arc<io_harness::otel::LiveExport>;
/// No live export in a build without the `otel` feature.
#[cfg(not(feature = "otel"))]
pub type Live = Arc<()>;

/// Starts the live exporter for `flag` (else the environment variable); `None` when
/// neither names an endpoint. A bad endpoint or header is a configuration error
/// (exit 2) before the run starts.
#[cfg(feature = "otel")]
pub fn start(
    flag: Option<&str>,
    content: bool,
    store: &io_harness::Store,
) -> Result<Option<Live>, CliError> {
    use io_harness::otel::{Endpoint, Exporter, LiveExport, OtelError, TraceOptions, send};
    let endpoint = match flag {
        Some(f) => Endpoint::parse(f.trim(), "--otlp-endpoint"),
        None => Endpoint::resolve(None),
    };
    let endpoint = match endpoint {
        Ok(e) => e,
        Err(OtelError::NoEndpoint) => return Ok(None),
        Err(e) => return Err(CliError::Usage(e.to_string())),
    };
    let headers = match std::env::var(send::HEADERS_ENV) {
        Ok(t) => send::parse_headers(&t).map_err(|e| CliError::Usage(e.to_string()))?,
        Err(_) => Vec::new(),
    };
    let values = send::secret_values(&headers);
    store.redact_secrets(&values);
    let path = store
        .path()
        .ok_or_else(|| CliError::Internal("live OTLP export needs a store file".into()))?;
    // Its own handle: the exporter's reads never wait on the run's connection.
    let reader = io_harness::Store::open_existing(&path)
        .map_err(|e| CliError::Internal(format!("{}: {e}", path.display())))?;
    reader.redact_secrets(&values);
    let exporter = Exporter::new(endpoint, &headers).map_err(|e| CliError::Usage(e.to_string()))?;
    Ok(Some(Arc::new(LiveExport::start(
        reader,
        exporter,
        TraceOptions::from_env(content),
    ))))
}

/// Without the `otel` feature a live endpoint is refused (exit 2), none is fine.
#[cfg(not(feature = "otel"))]
pub fn start(
    flag: Option<&str>,
    content: bool,
    _store: &io_harness::Store,
) -> Result<Option<Live>, CliError> {
    let _ = content;
    match flag {
        Some(_) => Err(CliError::Usage(
            "--otlp-endpoint needs the `otel` feature, which this build lacks".into(),
        )),
        None => Ok(None),
    }
}

/// After the run: flushes, records the dropped count and says what went wrong.
pub async fn finish(live: &Live, store: &io_harness::Store, run_id: i64) {
    #[cfg(feature = "otel")]
    {
        let s = live
            .finish(store, run_id, std::time::Duration::from_secs(5))
            .await;
        if let Some(e) = s.first_error {
            errln!(
                "warning: live OTLP export of run {run_id}: {} export(s) dropped; first: {}",
                s.dropped,
                super::output::sanitize(&e)
            );
        }
    }
    #[cfg(not(feature = "otel"))]
    let _ = (live, store, run_id);
}

/// The run's observer, notifying the live exporter at each step commit and the end.
pub struct Tee {
    /// The observer that renders progress.
    pub inner: Arc<dyn Observer>,
    /// The live exporter.
    pub live: Live,
}

impl Observer for Tee {
    fn on_event(&self, event: &RunEvent) -> Flow {
        if let RunEvent::StepCommitted { run_id, .. } | RunEvent::Finished { run_id, .. } = event {
            #[cfg(feature = "otel")]
            self.live.notify(*run_id);
            #[cfg(not(feature = "otel"))]
            let _ = (run_id, &self.live);
        }
        self.inner.on_event(event)
    }
}
