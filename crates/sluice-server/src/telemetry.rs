//! Trace export over OTLP (off unless an endpoint is configured). Each request's spans are
//! built from its access-log [`Line`](crate::access::Line) when the line is let go — an
//! HTTP server span continuing the client's `traceparent`, and within it `admission`,
//! `queue_wait`, one GenAI client span per call sent to a provider and `settlement`
//! (see [`crate::spans`]) — and handed
//! to [`Spans`]: a bounded queue that an exporter task drains in batches. The request path
//! never waits on export: a full queue drops the spans and counts them
//! (`sluice_trace_spans_dropped_total`).

use std::time::Duration;

use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use prometheus_client::metrics::counter::Counter;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// Spans waiting for export, at most this many; more are dropped.
pub const QUEUE: usize = 4096;
/// Spans sent in one export call, at most.
pub const BATCH: usize = 512;
/// How long a batch may wait to fill before it is sent.
pub const DELAY: Duration = Duration::from_secs(1);

/// Where finished spans go. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Spans {
    queue: mpsc::Sender<SpanData>,
    dropped: Counter,
}

impl Spans {
    /// Queues `span` for export, or drops and counts it when the queue is full.
    pub fn send(&self, span: SpanData) {
        if self.queue.try_send(span).is_err() {
            self.dropped.inc();
        }
    }
}

/// The export task: [`Exporting::finish`] exports what is queued and stops it.
#[derive(Debug)]
pub struct Exporting {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl Exporting {
    /// Exports every span queued so far and shuts the exporter down, waiting at most
    /// `within` (a collector that does not answer must not hold the process up).
    pub async fn finish(self, within: Duration) {
        let _ = self.stop.send(());
        if tokio::time::timeout(within, self.task).await.is_err() {
            tracing::warn!("trace export did not finish in time; queued spans are lost");
        }
    }
}

/// Starts the task that exports what [`Spans`] receive with `exporter`; `dropped` counts
/// spans the full queue refused.
pub fn spawn<E: SpanExporter + 'static>(exporter: E, dropped: Counter) -> (Spans, Exporting) {
    let (queue, received) = mpsc::channel(QUEUE);
    let (stop, stopped) = oneshot::channel();
    let task = tokio::spawn(export(exporter, received, stopped));
    (Spans { queue, dropped }, Exporting { stop, task })
}

async fn export<E: SpanExporter>(exporter: E, mut received: mpsc::Receiver<SpanData>, mut stop: oneshot::Receiver<()>) {
    let mut batch = Vec::with_capacity(BATCH);
    let mut open = true;
    while open {
        open = tokio::select! {
            open = fill(&mut received, &mut batch) => open,
            _ = &mut stop => false,
        };
        if !open {
            while let Ok(span) = received.try_recv() {
                batch.push(span);
            }
        }
        for chunk in batch.chunks(BATCH) {
            report(exporter.export(chunk.to_vec()).await);
        }
        batch.clear();
    }
    report(exporter.shutdown());
}

/// Waits for a first span, then gathers more until the batch is full or [`DELAY`] passed;
/// `false` once the queue is closed and empty.
async fn fill(received: &mut mpsc::Receiver<SpanData>, batch: &mut Vec<SpanData>) -> bool {
    let Some(first) = received.recv().await else { return false };
    batch.push(first);
    let deadline = tokio::time::sleep(DELAY);
    tokio::pin!(deadline);
    while batch.len() < BATCH {
        tokio::select! {
            span = received.recv() => match span {
                Some(span) => batch.push(span),
                None => return false,
            },
            () = &mut deadline => break,
        }
    }
    true
}

fn report(result: OTelSdkResult) {
    if let Err(e) = result {
        tracing::warn!(error = %e, "trace export failed; those spans are lost");
    }
}

/// The OTLP exporter (HTTP, protobuf) to `endpoint` — a base URL, `/v1/traces` appended —
/// or, without one, to what the standard `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` /
/// `OTEL_EXPORTER_OTLP_ENDPOINT` variables name. The service is `OTEL_SERVICE_NAME`, else
/// `sluice`. HTTPS collectors are verified against the webpki roots.
///
/// # Errors
/// When the endpoint is not a URL.
pub fn otlp(
    endpoint: Option<&str>,
) -> Result<opentelemetry_otlp::SpanExporter, opentelemetry_otlp::ExporterBuildError> {
    use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
    let client = Collector(sluice_upstream::Upstream::new(EXPORT_TIMEOUT));
    let mut builder = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_http_client(client)
        .with_timeout(EXPORT_TIMEOUT);
    if let Some(base) = endpoint {
        builder = builder.with_endpoint(format!("{}/v1/traces", base.trim_end_matches('/')));
    }
    let mut exporter = builder.build()?;
    let named = std::env::var_os("OTEL_SERVICE_NAME").is_some_and(|n| !n.is_empty());
    let resource = opentelemetry_sdk::Resource::builder();
    let resource = if named { resource } else { resource.with_service_name("sluice") };
    exporter.set_resource(&resource.build());
    Ok(exporter)
}

/// Bound on one export call.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The OTLP exporter's HTTP client: the gateway's own upstream client (HTTP/1.1, rustls).
#[derive(Debug)]
struct Collector(sluice_upstream::Upstream);

impl opentelemetry_http::HttpClient for Collector {
    fn send_bytes<'a, 'f>(
        &'a self,
        request: http::Request<bytes::Bytes>,
    ) -> std::pin::Pin<
        Box<dyn Future<Output = Result<http::Response<bytes::Bytes>, opentelemetry_http::HttpError>> + Send + 'f>,
    >
    where
        'a: 'f,
        Self: 'f,
    {
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let request = http::Request::from_parts(parts, http_body_util::Full::new(body));
            let response = self.0.send(request, EXPORT_TIMEOUT).await.map_err(|e| e.to_string())?;
            let (parts, body) = response.into_parts();
            let limited = http_body_util::Limited::new(body, MAX_ANSWER);
            let body = http_body_util::BodyExt::collect(limited).await?.to_bytes();
            Ok(http::Response::from_parts(parts, body))
        })
    }
}

/// A collector's answer is small; more is refused.
const MAX_ANSWER: usize = 1 << 20;

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use parking_lot::Mutex;
    use sluice_quota::Nanos;

    use super::*;
    use crate::spans::Anchor;
    use crate::trace::Trace;

    /// An exporter that records each batch's size, or never answers when `stalled`.
    #[derive(Debug, Default)]
    struct Recorder {
        batches: Arc<Mutex<Vec<usize>>>,
        stalled: bool,
    }

    impl SpanExporter for Recorder {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            if self.stalled {
                std::future::pending::<()>().await;
            }
            self.batches.lock().push(batch.len());
            Ok(())
        }
    }

    fn span() -> SpanData {
        let anchor = Anchor { trace: Trace::from_headers(&http::HeaderMap::new()), started: Nanos(0), unix_millis: 0 };
        anchor.spans(&[], Nanos(1), &crate::spans::Summary { status: 200, ..Default::default() }).remove(0)
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_queue_drops_and_counts_and_never_waits() {
        let dropped = Counter::default();
        let (spans, _exporting) = spawn(Recorder { stalled: true, ..Recorder::default() }, dropped.clone());
        // The exporter task has not run yet on this thread: the queue alone takes spans.
        for _ in 0..QUEUE + 7 {
            spans.send(span());
        }
        assert_eq!(dropped.get(), 7);
    }

    #[tokio::test(start_paused = true)]
    async fn finishing_exports_what_is_queued_in_batches() {
        let recorder = Recorder::default();
        let batches = Arc::clone(&recorder.batches);
        let (spans, exporting) = spawn(recorder, Counter::default());
        for _ in 0..BATCH + 3 {
            spans.send(span());
        }
        exporting.finish(Duration::from_secs(5)).await;
        assert_eq!(batches.lock().iter().sum::<usize>(), BATCH + 3);
        assert!(batches.lock().iter().all(|n| *n <= BATCH), "{:?}", batches.lock());
    }
}
