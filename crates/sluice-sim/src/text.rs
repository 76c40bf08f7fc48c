//! Request details shared by both shapes: filler text, tenants, `req-id:` markers.

use http::HeaderMap;

/// Header naming the tenant (wins over the body's `user` / `metadata.user_id`).
pub const TENANT_HEADER: &str = "x-sim-tenant";
/// Tenant of requests that name none.
pub const ANONYMOUS: &str = "anonymous";
/// Marker prefix counted by the duplicate detector.
pub const MARKER: &str = "req-id:";

/// Filler words, each one token with its leading space in cl100k_base and o200k_base.
const WORDS: [&str; 16] = [
    "the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", "and", "then", "runs", "back", "to", "its",
    "home",
];

/// Appends generated tokens `start..start + n` (one word per token).
pub fn filler_into(out: &mut String, start: u64, n: u64) {
    for i in start..start + n {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(WORDS[usize::try_from(i % WORDS.len() as u64).unwrap_or(0)]);
    }
}

/// Generated text of `n` tokens.
#[must_use]
pub fn filler(n: u64) -> String {
    let mut out = String::with_capacity(usize::try_from(n).unwrap_or(0) * 6);
    filler_into(&mut out, 0, n);
    out
}

/// The tenant: header `x-sim-tenant`, else the body's user field, else `anonymous`.
#[must_use]
pub fn tenant(headers: &HeaderMap, body_user: Option<&str>) -> String {
    headers
        .get(TENANT_HEADER)
        .and_then(|v| v.to_str().ok())
        .or(body_user)
        .filter(|t| !t.is_empty())
        .unwrap_or(ANONYMOUS)
        .to_owned()
}

/// The `req-id:<id>` marker in `text`, if any (the id runs to the next whitespace).
#[must_use]
pub fn marker(text: &str) -> Option<String> {
    let at = text.find(MARKER)? + MARKER.len();
    let id: &str = text[at..].split(char::is_whitespace).next()?;
    (!id.is_empty()).then(|| id.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::{Encoding, Tokenizer};

    #[test]
    fn filler_is_one_token_per_word() {
        for enc in [Encoding::Cl100kBase, Encoding::O200kBase] {
            let t = Tokenizer::new(enc);
            for n in [1, 5, 16, 40] {
                assert_eq!(t.count(&filler(n)), n, "{enc:?} {n}");
            }
        }
        let mut s = filler(3);
        filler_into(&mut s, 3, 2);
        assert_eq!(s, filler(5));
    }

    #[test]
    fn tenant_prefers_the_header() {
        let mut h = HeaderMap::new();
        assert_eq!(tenant(&h, None), "anonymous");
        assert_eq!(tenant(&h, Some("u1")), "u1");
        h.insert(TENANT_HEADER, "t9".parse().unwrap());
        assert_eq!(tenant(&h, Some("u1")), "t9");
    }

    #[test]
    fn markers_are_found_anywhere() {
        assert_eq!(marker("please req-id:abc-1 now").as_deref(), Some("abc-1"));
        assert_eq!(marker("req-id:x").as_deref(), Some("x"));
        assert_eq!(marker("req-id: x"), None);
        assert_eq!(marker("nothing"), None);
    }
}
