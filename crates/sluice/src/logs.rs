//! Where log lines go: standard error, written in batches.
//!
//! A busy gateway logs a line per request (the access log). Written one `write` each, those
//! lines were about a tenth of the gateway's CPU under load (docs/benchmarks.md, "Where a
//! request's CPU goes"). Here a line is appended to a shared buffer instead, and the buffer
//! goes out in one `write` when it holds [`BATCH_BYTES`], every [`FLUSH_EVERY`] (a small
//! thread), at once for a warning or an error (with everything before it, so the order
//! stays), before a panic's message and when the command ends. A line reaches the log at
//! most [`FLUSH_EVERY`] late; a `kill -9` loses at most that much. A person at a terminal
//! gets every line at once, unbatched.

use std::io::Write as _;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use tracing::{Level, Metadata};
use tracing_subscriber::fmt::MakeWriter;

/// The most a line waits before it is written.
pub const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// Waiting lines are written once they hold this much.
pub const BATCH_BYTES: usize = 64 * 1024;

/// The process's batched standard error (one, shared by every thread that logs).
fn buffer() -> &'static Mutex<Vec<u8>> {
    static BUFFER: OnceLock<Mutex<Vec<u8>>> = OnceLock::new();
    BUFFER.get_or_init(|| Mutex::new(Vec::with_capacity(BATCH_BYTES * 2)))
}

fn lock() -> MutexGuard<'static, Vec<u8>> {
    buffer().lock().unwrap_or_else(PoisonError::into_inner)
}

/// Writes `waiting` out and empties it. A failed write (standard error closed) drops the
/// batch: a log must never stop the gateway.
fn write_out(waiting: &mut Vec<u8>) {
    if !waiting.is_empty() {
        let _ = std::io::stderr().lock().write_all(waiting);
        waiting.clear();
    }
}

/// Writes every waiting line now (at exit, before a panic's message, and from the flusher).
pub fn flush() {
    write_out(&mut lock());
}

/// The [`MakeWriter`] of the log subscriber: batched, or straight through for a terminal.
#[derive(Debug, Clone, Copy)]
pub struct Stderr {
    batched: bool,
}

impl Stderr {
    /// Batched unless standard error is a terminal. Starts the flusher thread and makes a
    /// panic write the waiting lines before its own message.
    #[must_use]
    pub fn new() -> Self {
        use std::io::IsTerminal as _;
        let batched = !std::io::stderr().is_terminal();
        if batched {
            start_flusher();
        }
        Self { batched }
    }
}

fn start_flusher() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        let spawned = std::thread::Builder::new().name("sluice-log-flush".into()).spawn(|| {
            loop {
                std::thread::sleep(FLUSH_EVERY);
                flush();
            }
        });
        if spawned.is_err() {
            // No thread for the flusher: lines still go out with each full batch, each
            // warning and at exit; say so once, straight to standard error.
            let _ = writeln!(std::io::stderr(), "sluice: no log flusher thread; log lines may wait longer");
        }
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // `try_lock`: a panic while the buffer is held must not wait for itself.
            if let Ok(mut waiting) = buffer().try_lock() {
                write_out(&mut waiting);
            }
            previous(info);
        }));
    });
}

impl<'a> MakeWriter<'a> for Stderr {
    type Writer = Line;

    fn make_writer(&'a self) -> Line {
        Line { batched: self.batched, urgent: false }
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> Line {
        // Warnings and errors go out at once (more verbose levels compare greater).
        Line { batched: self.batched, urgent: *meta.level() <= Level::WARN }
    }
}

/// One log line's writer.
#[derive(Debug)]
pub struct Line {
    batched: bool,
    urgent: bool,
}

impl std::io::Write for Line {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if !self.batched {
            return std::io::stderr().lock().write(bytes);
        }
        let mut waiting = lock();
        waiting.extend_from_slice(bytes);
        if waiting.len() >= BATCH_BYTES {
            write_out(&mut waiting);
        }
        Ok(bytes.len())
    }

    /// Writes the batch out now (the subscriber does not ask; a warning's drop does).
    fn flush(&mut self) -> std::io::Result<()> {
        if self.batched {
            flush();
        }
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        if self.urgent {
            std::io::Write::flush(self).ok();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_wait_for_a_full_batch_a_flush_or_a_warning() {
        flush();
        let mut line = Line { batched: true, urgent: false };
        line.write_all(b"one info line\n").unwrap();
        drop(line);
        assert!(lock().ends_with(b"one info line\n"), "an info line waits for its batch");
        flush();
        assert!(lock().is_empty(), "a flush writes the batch out");
        let mut big = Line { batched: true, urgent: false };
        big.write_all(&vec![b'x'; BATCH_BYTES]).unwrap();
        assert!(lock().is_empty(), "a full batch is written at once");
        // A warning goes out at once, with the lines before it.
        let mut info = Line { batched: true, urgent: false };
        info.write_all(b"before\n").unwrap();
        drop(info);
        let mut warning = Line { batched: true, urgent: true };
        warning.write_all(b"warning\n").unwrap();
        drop(warning);
        assert!(lock().is_empty(), "a warning flushes the batch it ends");
    }
}
