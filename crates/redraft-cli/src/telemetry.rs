//! Logs and traces. Logs go to stderr as text (coloured only on a terminal) or as one JSON
//! object per line. Traces — the runner's spans for the run, each attempt, provider call and
//! evaluator, with the OpenTelemetry GenAI attributes — go over OTLP/HTTP (protobuf) when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set or the
//! config names `[telemetry] otlp_endpoint`.
//!
//! Key design decision: the two are separate layers with their own filters, so `-v`/`RUST_LOG`
//! decide what is logged and never what is traced. Spans are batched on the tokio runtime and
//! sent over the project's reqwest client; [`Telemetry::shutdown`] sends what is left before
//! the process exits. Neither carries a known secret: log lines are written through
//! [`LogWriter`](crate::redacted::LogWriter) and spans exported through [`RedactingExporter`],
//! both redacting every known value ([`redraft::core::secrets`]).

use std::borrow::Cow;
use std::io::IsTerminal;
use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, bail};
use opentelemetry::trace::{Status, TracerProvider as _};
use opentelemetry::{Array, KeyValue, StringValue, Value};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use redraft::core::secrets;
use tracing::Level;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use crate::args::LogFormat;
use crate::redacted::LogWriter;

/// The service name traces carry when `OTEL_SERVICE_NAME` is not set.
const SERVICE_NAME: &str = "redraft";

/// How long the spans left at exit may take to be sent.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(15);

/// What must be shut down before the process exits: the trace exporter, when there is one.
#[derive(Debug)]
#[must_use = "call `shutdown` before exiting, or the last spans are lost"]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

/// Where traces go.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Destination {
    /// The standard `OTEL_EXPORTER_OTLP_*` variables name it (the exporter reads them).
    Environment,
    /// `[telemetry] otlp_endpoint`: the traces URL under it.
    Config(String),
}

/// Set up logging and, when an OTLP endpoint is configured, tracing. Call it inside the tokio
/// runtime: the span batches are sent from a task on it.
pub fn init(format: LogFormat, verbose: u8, config: Option<&Path>) -> anyhow::Result<Telemetry> {
    let (otel, provider) = match destination(config)? {
        None => (None, None),
        Some(destination) => {
            let provider = tracer_provider(&destination)?;
            let layer = tracing_opentelemetry::layer()
                .with_tracer(provider.tracer("redraft"))
                .with_filter(Targets::new().with_target("redraft", Level::INFO));
            (Some(layer), Some(provider))
        }
    };
    // Without a subscriber yet, a second one cannot be there: ignore the impossible error.
    let _ = tracing_subscriber::registry().with(log_layer(format, verbose)).with(otel).try_init();
    Ok(Telemetry { provider })
}

impl Telemetry {
    /// Send the spans not sent yet and stop the exporter (waiting at most 15 s).
    pub async fn shutdown(self) {
        let Some(provider) = self.provider else { return };
        // The processor's shutdown blocks until its task on the runtime has sent the last
        // batch: block a thread of the blocking pool, never a worker.
        let flushed = tokio::task::spawn_blocking(move || provider.shutdown());
        match tokio::time::timeout(FLUSH_TIMEOUT, flushed).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => tracing::warn!("the last traces could not be sent: {e}"),
            Ok(Err(e)) => tracing::warn!("the last traces could not be sent: {e}"),
            Err(_) => tracing::warn!("the last traces could not be sent within {}s", FLUSH_TIMEOUT.as_secs()),
        }
    }
}

/// Log lines on stderr, filtered by `RUST_LOG` or else by `-v`.
fn log_layer(format: LogFormat, verbose: u8) -> Box<dyn Layer<Registry> + Send + Sync> {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let layer = tracing_subscriber::fmt::layer().with_writer(LogWriter).with_target(false);
    match format {
        LogFormat::Text => {
            let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
            layer.with_ansi(colour).with_filter(filter).boxed()
        }
        LogFormat::Json => layer.json().flatten_event(true).with_ansi(false).with_filter(filter).boxed(),
    }
}

/// Where traces go: the environment's OTLP endpoint, else the config's, else nowhere. The
/// config is read quietly; the command reads it again and reports what is wrong with it.
fn destination(config: Option<&Path>) -> anyhow::Result<Option<Destination>> {
    let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
    if std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    if set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
        return Ok(Some(Destination::Environment));
    }
    let loaded = tracing::subscriber::with_default(tracing::subscriber::NoSubscriber::default(), || {
        redraft::Config::load(config)
    });
    let Some(endpoint) = loaded.ok().and_then(|c| c.telemetry.otlp_endpoint).filter(|e| !e.trim().is_empty()) else {
        return Ok(None);
    };
    let endpoint = endpoint.trim();
    if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
        bail!(
            "`telemetry.otlp_endpoint` must be an http:// or https:// URL, not `{endpoint}`\nhint: name the collector's OTLP/HTTP address, e.g. `http://127.0.0.1:4318`"
        );
    }
    Ok(Some(Destination::Config(format!("{}/v1/traces", endpoint.trim_end_matches('/')))))
}

/// The tracer provider: spans batched on the tokio runtime, sent as OTLP/HTTP protobuf.
fn tracer_provider(destination: &Destination) -> anyhow::Result<SdkTracerProvider> {
    // The exporter reads its headers (an authorization, often) from these: they are secrets.
    for name in ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"] {
        if let Ok(headers) = std::env::var(name) {
            register_header_values(&headers);
        }
    }
    let mut exporter = opentelemetry_otlp::SpanExporter::builder().with_http().with_protocol(Protocol::HttpBinary);
    let target = match destination {
        Destination::Environment => String::new(),
        Destination::Config(url) => {
            exporter = exporter.with_endpoint(url.clone());
            format!(" to `{url}` (`telemetry.otlp_endpoint`)")
        }
    };
    let exporter = exporter.build().map_err(|e| {
        anyhow!("cannot send traces{target}: {e}\nhint: name an OTLP/HTTP collector such as `http://127.0.0.1:4318`")
    })?;
    let service = std::env::var("OTEL_SERVICE_NAME").ok().filter(|s| !s.trim().is_empty());
    let resource = Resource::builder()
        .with_service_name(service.unwrap_or_else(|| SERVICE_NAME.to_owned()))
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build();
    let processor = BatchSpanProcessor::builder(RedactingExporter(exporter), opentelemetry_sdk::runtime::Tokio).build();
    Ok(SdkTracerProvider::builder().with_span_processor(processor).with_resource(resource).build())
}

/// Make the values of `OTEL_EXPORTER_OTLP_HEADERS` (`name=value,…`, values percent-encoded)
/// known secrets, as written and decoded.
fn register_header_values(headers: &str) {
    for (_, value) in headers.split(',').filter_map(|pair| pair.split_once('=')) {
        secrets::register_percent_encoded(value);
    }
}

/// A span exporter that takes every known secret out of what it sends: span and event names,
/// attribute values, status descriptions.
#[derive(Debug)]
struct RedactingExporter<E>(E);

impl<E: SpanExporter> SpanExporter for RedactingExporter<E> {
    fn export(&self, mut batch: Vec<SpanData>) -> impl Future<Output = OTelSdkResult> + Send {
        if secrets::active() {
            batch.iter_mut().for_each(redact_span);
        }
        self.0.export(batch)
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.0.set_resource(resource);
    }
}

fn redact_span(span: &mut SpanData) {
    redact_cow(&mut span.name);
    span.attributes.iter_mut().for_each(redact_attribute);
    for event in span.events.events.iter_mut() {
        redact_cow(&mut event.name);
        event.attributes.iter_mut().for_each(redact_attribute);
    }
    if let Status::Error { description } = &mut span.status {
        redact_cow(description);
    }
}

fn redact_cow(text: &mut Cow<'static, str>) {
    if let Cow::Owned(redacted) = secrets::redact(text) {
        *text = Cow::Owned(redacted);
    }
}

fn redact_string_value(value: &mut StringValue) {
    if let Cow::Owned(redacted) = secrets::redact(value.as_str()) {
        *value = StringValue::from(redacted);
    }
}

fn redact_attribute(attribute: &mut KeyValue) {
    match &mut attribute.value {
        Value::String(value) => redact_string_value(value),
        Value::Array(Array::String(values)) => values.iter_mut().for_each(redact_string_value),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::SystemTime;

    use opentelemetry::trace::{Event, SpanContext, SpanId, SpanKind};
    use opentelemetry_sdk::trace::{SpanEvents, SpanLinks};

    use super::*;

    /// An exporter that keeps what it is given.
    #[derive(Debug, Clone, Default)]
    struct Kept(Arc<Mutex<Vec<SpanData>>>);

    impl SpanExporter for Kept {
        fn export(&self, batch: Vec<SpanData>) -> impl Future<Output = OTelSdkResult> + Send {
            self.0.lock().unwrap().extend(batch);
            std::future::ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn exported_spans_carry_no_known_secret() {
        const KEY: &str = "sk-exporter-test-4455";
        secrets::register(KEY);
        let text = format!("Bearer {KEY}");
        let mut events = SpanEvents::default();
        events.events.push(Event::new(
            text.clone(),
            SystemTime::UNIX_EPOCH,
            vec![KeyValue::new("body", text.clone())],
            0,
        ));
        let span = SpanData {
            span_context: SpanContext::empty_context(),
            parent_span_id: SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: text.clone().into(),
            start_time: SystemTime::UNIX_EPOCH,
            end_time: SystemTime::UNIX_EPOCH,
            attributes: vec![
                KeyValue::new("error.message", text.clone()),
                KeyValue::new("list", Value::Array(Array::String(vec![text.clone().into()]))),
                KeyValue::new("n", 1),
            ],
            dropped_attributes_count: 0,
            events,
            links: SpanLinks::default(),
            status: Status::error(text),
            instrumentation_scope: Default::default(),
        };
        let kept = Kept::default();
        RedactingExporter(kept.clone()).export(vec![span]).await.unwrap();
        let exported = format!("{:?}", kept.0.lock().unwrap());
        assert!(!exported.contains(KEY), "{exported}");
        assert_eq!(exported.matches("Bearer [redacted]").count(), 6, "{exported}");
    }
}
