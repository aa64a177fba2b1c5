//! `io-harness export-otlp <run> [--endpoint URL]`: the run's trace, built from the
//! store, sent to an OpenTelemetry collector over OTLP/HTTP JSON. The endpoint is the
//! flag, else `OTEL_EXPORTER_OTLP_ENDPOINT`; headers come from
//! `OTEL_EXPORTER_OTLP_HEADERS` and are never printed.

use super::{CliError, ExportOtlpArgs, store_path};

#[cfg(feature = "otel")]
pub async fn execute(args: ExportOtlpArgs) -> Result<i32, CliError> {
    use io_harness::otel::{self, Endpoint, Exporter, OtelError};

    let usage_or_internal = |e: OtelError| {
        if e.is_usage() {
            CliError::Usage(e.to_string())
        } else {
            CliError::Internal(e.to_string())
        }
    };
    let endpoint = Endpoint::resolve(args.endpoint.as_deref()).map_err(usage_or_internal)?;
    let headers = match std::env::var(otel::send::HEADERS_ENV) {
        Ok(text) => otel::send::parse_headers(&text).map_err(usage_or_internal)?,
        Err(_) => Vec::new(),
    };
    let store = store_path::open_existing(&args.store)?;
    // The header values are credentials: nothing the store writes from here may hold
    // them.
    store.redact_secrets(&otel::send::secret_values(&headers));
    let exporter = Exporter::new(endpoint, &headers).map_err(usage_or_internal)?;
    let done = otel::export(
        &store,
        args.run_id,
        &exporter,
        otel::TraceOptions::from_env(args.otlp_content),
    )
    .await
    .map_err(usage_or_internal)?;
    if args.json {
        outln!(
            "{}",
            serde_json::json!({
                "object": "otlp_export",
                "schema_version": 1,
                "run_id": args.run_id,
                "trace_id": done.trace_id,
                "spans": done.sent.spans,
                "endpoint": exporter.endpoint().url.as_str(),
                "status": done.sent.status,
            })
        );
    } else {
        outln!(
            "run {}: exported {} spans of trace {} to {} (HTTP {})",
            args.run_id,
            done.sent.spans,
            done.trace_id,
            exporter.endpoint().url,
            done.sent.status
        );
    }
    Ok(0)
}

#[cfg(not(feature = "otel"))]
pub async fn execute(args: ExportOtlpArgs) -> Result<i32, CliError> {
    let _ = (args, store_path::open_existing);
    Err(CliError::Usage(
        "export-otlp needs the `otel` feature, which this build lacks".into(),
    ))
}
