//! Provider text on its way to a tenant: anything that looks like a credential (`sk-…`,
//! `sk-ant-…`, `Bearer …`, Google's `AIza…`, the deployment's configured key itself) is
//! replaced by `[redacted]`. Providers and proxies do echo keys, masked or not, in their
//! error messages; a tenant must never read the operator's key there.

use bytes::Bytes;

/// What a credential becomes.
const REDACTED: &str = "[redacted]";
/// The shortest run after a prefix taken for a key: `sk-ab` in prose stays.
const MIN_TOKEN: usize = 6;
/// Prefixes that start a credential, and whether the prefix itself is kept.
const PREFIXES: [(&str, bool); 4] = [("sk-", false), ("AIza", false), ("Bearer ", true), ("bearer ", true)];

/// `body` with every credential-looking run replaced (as UTF-8, invalid bytes replaced).
#[must_use]
pub fn scrub_bytes(body: &[u8], key: Option<&str>) -> Bytes {
    Bytes::from(scrub(&String::from_utf8_lossy(body), key))
}

/// `text` with `key` (when given) and every credential-looking run replaced.
#[must_use]
pub fn scrub(text: &str, key: Option<&str>) -> String {
    let mut text = match key.map(str::trim).filter(|k| k.len() >= MIN_TOKEN) {
        Some(key) => text.replace(key, REDACTED),
        None => text.to_owned(),
    };
    for (prefix, keep) in PREFIXES {
        text = redact_after(&text, prefix, keep);
    }
    text
}

/// Characters a key, token or masked key is made of (JWTs and base64 included).
fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/' | '+' | '=' | '*')
}

/// Replaces each `prefix` that starts a word and is followed by a token of at least
/// [`MIN_TOKEN`] characters.
fn redact_after(text: &str, prefix: &str, keep_prefix: bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        out.push_str(&rest[..at]);
        let after = &rest[at + prefix.len()..];
        let len = after.find(|c: char| !is_token_char(c)).unwrap_or(after.len());
        let starts_word = out.chars().next_back().is_none_or(|c| !c.is_ascii_alphanumeric());
        if starts_word && len >= MIN_TOKEN {
            if keep_prefix {
                out.push_str(prefix);
            }
            out.push_str(REDACTED);
            rest = &after[len..];
        } else {
            out.push_str(prefix);
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::scrub;

    #[test]
    fn keys_of_every_known_shape_are_redacted() {
        let text = "Incorrect API key provided: sk-proj-abc123XYZ. Also sk-ant-api03-Zz_9-qq, \
                    AIzaSyA1b2C3d4, Authorization: Bearer eyJhbGciOi.J9.x and sk-prov****0000";
        let clean = scrub(text, None);
        for secret in ["abc123XYZ", "api03", "SyA1b2", "eyJhbGciOi", "****0000"] {
            assert!(!clean.contains(secret), "{secret} left in {clean}");
        }
        assert!(clean.starts_with("Incorrect API key provided: [redacted]"), "{clean}");
        assert!(clean.contains("Bearer [redacted]"), "{clean}");
    }

    #[test]
    fn the_configured_key_goes_whatever_its_shape_and_prose_stays() {
        let clean = scrub(r#"{"error":{"message":"key 9f8e7d6c5b4a rejected"}}"#, Some("9f8e7d6c5b4a"));
        assert_eq!(clean, r#"{"error":{"message":"key [redacted] rejected"}}"#);
        let prose = "a task-force asked for sk-ab and a Bearer token";
        assert_eq!(scrub(prose, None), prose);
    }
}
