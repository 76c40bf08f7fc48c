//! Configuration errors: each names the field and the line it is on.

use std::fmt;
use std::ops::Range;

/// A problem with the configuration, located in the source text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// The field, as a dotted path (`deployments[1].limits.tpm`), when known.
    pub field: String,
    /// 1-based line of the problem, when known.
    pub line: Option<usize>,
    /// What is wrong and, where possible, what would be right.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.field.is_empty()) {
            (Some(line), false) => write!(f, "line {line}: `{}`: {}", self.field, self.message),
            (Some(line), true) => write!(f, "line {line}: {}", self.message),
            (None, false) => write!(f, "`{}`: {}", self.field, self.message),
            (None, true) => f.write_str(&self.message),
        }
    }
}

/// Turns byte offsets into line numbers for one source text.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Source<'a> {
    pub text: &'a str,
}

impl Source<'_> {
    pub fn line_of(&self, offset: usize) -> usize {
        let end = offset.min(self.text.len());
        self.text.as_bytes()[..end].iter().filter(|&&b| b == b'\n').count() + 1
    }

    pub fn error(&self, field: impl Into<String>, span: Range<usize>, message: impl Into<String>) -> ConfigError {
        ConfigError { field: field.into(), line: Some(self.line_of(span.start)), message: message.into() }
    }
}

/// Converts a TOML syntax or shape error (unknown field, wrong type) into a [`ConfigError`].
pub(crate) fn from_toml(source: Source<'_>, err: &toml::de::Error) -> ConfigError {
    let line = err.span().map(|s| source.line_of(s.start));
    let message = err.message().trim().to_owned();
    let unknown = message.split('`').nth(1).filter(|_| message.starts_with("unknown field")).map(str::to_owned);
    let field = unknown.or_else(|| err.span().and_then(|s| key_before(source.text, s.start))).unwrap_or_default();
    ConfigError { field, line, message }
}

/// The key whose value starts at `offset`: the name just before the `=` that precedes it on
/// its line (`rpm` in `limits = { rpm = "many" }`), so type errors name their field too.
fn key_before(text: &str, offset: usize) -> Option<String> {
    let head = text.get(..offset)?;
    let line = &head[head.rfind('\n').map_or(0, |i| i + 1)..];
    let before_value = line.trim_end().strip_suffix('=')?.trim_end();
    let start = before_value
        .char_indices()
        .rev()
        .find(|&(_, c)| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .map_or(0, |(i, c)| i + c.len_utf8());
    let key = &before_value[start..];
    (!key.is_empty()).then(|| key.to_owned())
}

#[cfg(test)]
mod tests {
    use super::key_before;

    #[test]
    fn key_before_a_multi_byte_character_is_found_without_splitting_it() {
        // Found by the `config` fuzz target: a byte-order mark (3 bytes) before the key
        // made the slice start inside it and panicked.
        assert_eq!(key_before("\u{feff}server = 5", "\u{feff}server = ".len()), Some("server".to_owned()));
        assert_eq!(key_before("é=1", "é=".len()), None);
        assert_eq!(key_before("a.é_b = 1", "a.é_b = ".len()), Some("_b".to_owned()));
    }

    #[test]
    fn fuzz_crash_config_93ed14f5_is_an_error_not_a_panic() {
        let input = "\u{feff}rvertlse = \u{0}0.0.\u{c}\u{0}0.\u{c}\u{0}\u{0}\u{0}\u{0}\u{0}80s\"\nurl = \"i6:s3rbf7\n";
        assert!(crate::parse(input).is_err());
        assert!(crate::parse("\u{feff}[server]\nlisten = 5\n").is_err());
    }
}
