//! Paced streaming bodies: a shape-specific [`Render`] driven by the latency model.

use std::io;
use std::sync::Arc;

use axum::body::Body;
use bytes::Bytes;

use crate::faults::FaultKind;
use crate::flow::Prepared;
use crate::sim::{Sim, Ticket};

/// Pause before a stream is cut, so the chunks sent so far reach the client first.
const FLUSH_BEFORE_DROP: std::time::Duration = std::time::Duration::from_millis(5);

/// Writes the events of one shape's stream.
pub trait Render: Send + 'static {
    /// Events before the first content (role chunk, `message_start`, ...).
    fn head(&mut self, out: &mut Vec<u8>);
    /// One content chunk.
    fn chunk(&mut self, text: &str, out: &mut Vec<u8>);
    /// Events after the content (finish reason, usage, `[DONE]` / `message_stop`).
    fn tail(&mut self, output: u64, out: &mut Vec<u8>);
}

/// Accounting of a stream: completes on the tail, settles what was emitted if cut short.
struct Finish {
    sim: Arc<Sim>,
    prepared: Prepared,
    ticket: Ticket,
    emitted: u64,
    done: bool,
}

impl Finish {
    fn complete(&mut self) {
        self.done = true;
        let served = self.prepared.served(self.emitted);
        self.sim.complete(&self.prepared.model, self.ticket.reserved_output, &served);
    }
}

impl Drop for Finish {
    fn drop(&mut self) {
        if !self.done {
            self.sim.settle_output(&self.prepared.model, self.ticket.reserved_output, self.emitted);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Head,
    Chunks,
    Done,
}

struct Stream<R> {
    render: R,
    finish: Finish,
    drop_after: Option<u32>,
    /// A `stall` fault: content chunks sent first, and how long the silence lasts.
    stall: Option<(u32, std::time::Duration)>,
    chunk_tokens: u64,
    chunks: u32,
    phase: Phase,
}

/// A streaming body for an admitted request; a `stream_drop` fault cuts it after
/// the ticket's `drop_after` content chunks by closing the connection mid-body; a `stall`
/// fault sends nothing after `stall_after_chunks` of them, for `stall_ms`, then cuts it.
pub fn body<R: Render>(sim: Arc<Sim>, prepared: Prepared, ticket: Ticket, render: R) -> Body {
    let model = Arc::clone(&prepared.model);
    let drop_after = (ticket.fault == Some(FaultKind::StreamDrop)).then_some(ticket.drop_after);
    let stall = (ticket.fault == Some(FaultKind::Stall)).then(|| {
        let faults = model.faults();
        (faults.stall_after_chunks, std::time::Duration::from_millis(faults.stall_ms))
    });
    let stream = Stream {
        render,
        finish: Finish { sim, prepared, ticket, emitted: 0, done: false },
        drop_after,
        stall,
        chunk_tokens: u64::from(model.latency.chunk_tokens),
        chunks: 0,
        phase: Phase::Head,
    };
    Body::from_stream(futures_util::stream::unfold(stream, step))
}

async fn step<R: Render>(mut s: Stream<R>) -> Option<(io::Result<Bytes>, Stream<R>)> {
    let mut out = Vec::with_capacity(256);
    let delays = s.finish.ticket.delays;
    let total = s.finish.ticket.output;
    match s.phase {
        Phase::Done => return None,
        Phase::Head => {
            sleep(delays.ttft).await;
            s.render.head(&mut out);
            s.phase = Phase::Chunks;
        }
        Phase::Chunks => {
            let sent = s.finish.emitted;
            if let Some((_, wait)) = s.stall.filter(|(after, _)| s.chunks >= *after || sent >= total) {
                sleep(wait).await;
                s.phase = Phase::Done;
                return Some((Err(io::Error::other("stream stalled by an injected fault")), s));
            }
            if s.drop_after.is_some_and(|after| s.chunks >= after || sent >= total) {
                // Let hyper flush the chunks already written, then fail the body: the
                // connection closes without the terminating chunk. A FIN rather than a reset,
                // so the client reads the partial stream before it sees the cut.
                sleep(FLUSH_BEFORE_DROP).await;
                s.phase = Phase::Done;
                return Some((Err(io::Error::other("stream dropped by an injected fault")), s));
            }
            if sent >= total {
                s.render.tail(total, &mut out);
                s.finish.complete();
                s.phase = Phase::Done;
            } else {
                let n = s.chunk_tokens.min(total - sent);
                sleep(delays.per_token.saturating_mul(u32::try_from(n).unwrap_or(u32::MAX))).await;
                let mut text = String::with_capacity(usize::try_from(n).unwrap_or(0) * 7);
                crate::text::filler_into(&mut text, sent, n);
                s.render.chunk(&text, &mut out);
                s.finish.emitted += n;
                s.chunks += 1;
            }
        }
    }
    Some((Ok(Bytes::from(out)), s))
}

async fn sleep(d: std::time::Duration) {
    if !d.is_zero() {
        tokio::time::sleep(d).await;
    }
}

/// Appends one SSE `data:` line with a JSON payload.
pub fn data(out: &mut Vec<u8>, payload: &impl serde::Serialize) {
    out.extend_from_slice(b"data: ");
    let _ = serde_json::to_writer(&mut *out, payload);
    out.extend_from_slice(b"\n\n");
}

/// Appends one SSE event with a name and a JSON payload.
pub fn event(out: &mut Vec<u8>, name: &str, payload: &impl serde::Serialize) {
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(name.as_bytes());
    out.push(b'\n');
    data(out, payload);
}
