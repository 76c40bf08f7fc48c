//! How a text log line's fields are written: exactly as tracing-subscriber's
//! [`DefaultFields`] writes them (`name=value`, strings quoted, separated by spaces), with
//! fewer formatting calls when no colours are written.
//!
//! The access log writes a line of seventeen fields per request. The default visitor
//! formats each through three `Display` arguments, two of them colour wrappers that are
//! empty without a terminal; that was about a twentieth of the gateway's CPU under load
//! (docs/benchmarks.md, "Against a bare reverse proxy"). Here a plain field is its name,
//! `=` and one formatted value; a string that needs no escaping is written as it is,
//! between quotes; numbers and booleans come through `record_debug` as the default's do.
//! Anything else — the message, `r#` and `log.` names, errors, and every field when
//! colours are on — goes to [`DefaultVisitor`], so the output is the same.

use std::fmt;

use tracing::field::{Field, Visit};
use tracing_subscriber::field::{RecordFields, VisitOutput as _};
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::{DefaultFields, DefaultVisitor, Writer};

/// The [`FormatFields`] of the text log.
#[derive(Debug, Default, Clone, Copy)]
pub struct Fields;

impl<'writer> FormatFields<'writer> for Fields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'writer>, fields: R) -> fmt::Result {
        if writer.has_ansi_escapes() {
            return DefaultFields::new().format_fields(writer, fields);
        }
        let mut visitor = Plain { writer, is_empty: true, result: Ok(()) };
        fields.record(&mut visitor);
        visitor.result
    }
}

/// Writes one line's fields without colours.
struct Plain<'a> {
    writer: Writer<'a>,
    /// Whether nothing was written yet (no space before the first field).
    is_empty: bool,
    result: fmt::Result,
}

impl Plain<'_> {
    /// Whether `field` is written here rather than by the default visitor.
    fn plain(field: &Field) -> bool {
        let name = field.name();
        name != "message" && !name.starts_with("r#") && !name.starts_with("log.")
    }

    /// `field` as the default visitor writes it.
    fn delegate(&mut self, field: &Field, visit: impl FnOnce(&mut DefaultVisitor<'_>)) {
        if self.result.is_err() {
            return;
        }
        let mut default = DefaultVisitor::new(self.writer.by_ref(), self.is_empty);
        visit(&mut default);
        self.result = default.finish();
        // The default visitor skips `log.` fields (the `log` crate's metadata) and writes
        // every other one.
        if !field.name().starts_with("log.") {
            self.is_empty = false;
        }
    }

    /// The separator and `name=`; then the value is written by `value`.
    fn write(&mut self, field: &Field, value: impl FnOnce(&mut Writer<'_>) -> fmt::Result) {
        if self.result.is_err() {
            return;
        }
        let separator = if std::mem::take(&mut self.is_empty) { "" } else { " " };
        self.result = (|| {
            self.writer.write_str(separator)?;
            self.writer.write_str(field.name())?;
            self.writer.write_char('=')?;
            value(&mut self.writer)
        })();
    }
}

/// Whether `value`'s `Debug` form is `value` between quotes: printable ASCII with no quote
/// or backslash, which `Debug` would escape.
fn verbatim(value: &str) -> bool {
    value.bytes().all(|b| (b' '..=b'~').contains(&b) && b != b'"' && b != b'\\')
}

impl Visit for Plain<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if Self::plain(field) {
            self.write(field, |w| write!(w, "{value:?}"));
        } else {
            self.delegate(field, |d| d.record_debug(field, value));
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if !Self::plain(field) {
            self.delegate(field, |d| d.record_str(field, value));
        } else if verbatim(value) {
            self.write(field, |w| {
                w.write_char('"')?;
                w.write_str(value)?;
                w.write_char('"')
            });
        } else {
            self.write(field, |w| write!(w, "{value:?}"));
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.delegate(field, |d| d.record_error(field, value));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::fmt::MakeWriter;

    use super::*;

    /// A writer into a shared buffer.
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Buffer {
        type Writer = Self;

        fn make_writer(&'a self) -> Self {
            self.clone()
        }
    }

    /// An error with a source.
    #[derive(Debug)]
    struct Outer(std::io::Error);

    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("outer \"failure\"")
        }
    }

    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    /// Every shape of field a line may carry, logged once.
    fn log_everything() {
        let error = Outer(std::io::Error::other("inner"));
        let missing: Option<u64> = None;
        let tenant: &str = "acme";
        tracing::info!(
            target: "sluice::access",
            trace_id = %"4bf92f3577b34da6a3ce929d0e0e4736",
            tenant = %tenant,
            decision = "admitted",
            limiter = "",
            quoted = "say \"hi\"\\ now",
            newline = "two\nlines\t\u{7}",
            unicode = "grüße ✓",
            status = 200_u64,
            negative = -3_i64,
            big = u128::MAX,
            ratio = 0.25_f64,
            flag = true,
            off = false,
            upstream_ms = missing,
            ttft_ms = Some(12_u64),
            r#type = "chat",
            debugged = ?vec!["a", "b"],
            error = &error as &(dyn std::error::Error + 'static),
            "request {} done", 7
        );
        tracing::warn!(log.target = "other", plain = 1_u64, "from log");
        tracing::info!("only a message with \u{1b}[31m an escape");
        tracing::info!(first = "no message");
    }

    fn output(ansi: bool, fields: bool) -> String {
        let buffer = Buffer::default();
        let builder = tracing_subscriber::fmt().with_writer(buffer.clone()).with_ansi(ansi).without_time();
        let dispatch = if fields {
            tracing::Dispatch::new(builder.fmt_fields(Fields).finish())
        } else {
            tracing::Dispatch::new(builder.finish())
        };
        tracing::dispatcher::with_default(&dispatch, log_everything);
        let bytes = buffer.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn lines_are_written_exactly_as_the_default_fields_write_them() {
        let default = output(false, false);
        assert!(default.contains("status=200"), "the events were logged: {default}");
        assert!(default.contains("decision=\"admitted\""), "{default}");
        assert_eq!(output(false, true), default);
    }

    #[test]
    fn coloured_lines_are_the_default_ones() {
        let default = output(true, false);
        assert!(default.contains('\u{1b}'), "colours are on: {default}");
        assert_eq!(output(true, true), default);
    }

    #[test]
    fn only_printable_ascii_without_quotes_or_backslashes_is_verbatim() {
        assert!(verbatim("acme-prod_1 ok"));
        assert!(verbatim(""));
        // Printable non-ASCII is not escaped by `Debug`, but takes the general path all the same.
        assert!(!verbatim("grüße"));
        for escaped in ["a\"b", "a\\b", "a\nb", "\u{7f}"] {
            assert!(!verbatim(escaped), "{escaped:?}");
            assert_ne!(format!("{escaped:?}"), format!("\"{escaped}\""), "Debug escapes {escaped:?}");
        }
    }
}
