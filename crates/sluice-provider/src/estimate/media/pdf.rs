//! PDF page counts from one bounded pass over the decoded bytes.
//!
//! Page objects carry `/Type /Page` (the page tree's inner nodes say `/Pages`). Files
//! written with compressed object streams (PDF 1.5+) hide those dictionaries, so when the
//! pass finds none the count falls back to the size: one page per [`BYTES_PER_PAGE`],
//! deliberately small so that the guess errs towards more pages. The pass decodes
//! [`CHUNK`] bytes at a time, keeping [`OVERLAP`] bytes so a match across two chunks is
//! seen once; its cost is linear in the body, which the gateway's body limit bounds.

use super::b64::Base64;

/// Bytes decoded per step of the scan.
const CHUNK: usize = 48 * 1024;
/// Bytes carried from one chunk to the next: the longest match (`/Type`, up to
/// [`MAX_GAP`] spaces, `/Page`, one byte after).
const OVERLAP: usize = 5 + MAX_GAP + 5 + 1;
/// Whitespace allowed between `/Type` and `/Page`.
const MAX_GAP: usize = 8;
/// Size-based fallback: one page per this many bytes (text pages with embedded fonts run
/// 20–100 KB; scans far more).
pub(crate) const BYTES_PER_PAGE: u64 = 16 * 1024;

/// Pages of a base64 PDF: the `/Type /Page` objects found, or the size-based guess (at
/// least 1).
pub(crate) fn pages(data: &Base64<'_>) -> u64 {
    let found = count_page_objects(data);
    if found > 0 { found } else { pages_from_size(data.decoded_len()) }
}

/// The size-based guess for `bytes` of document, at least 1.
pub(crate) fn pages_from_size(bytes: u64) -> u64 {
    bytes.div_ceil(BYTES_PER_PAGE).max(1)
}

/// `/Type /Page` occurrences; 0 when the data is not readable base64.
fn count_page_objects(data: &Base64<'_>) -> u64 {
    let mut count = 0;
    let mut window: Vec<u8> = Vec::with_capacity(CHUNK + OVERLAP);
    let mut offset = 0;
    loop {
        let Some(chunk) = data.read(offset, CHUNK) else { return 0 };
        if chunk.is_empty() {
            return count;
        }
        offset += chunk.len() as u64;
        let carried = window.len();
        window.extend_from_slice(&chunk);
        count += matches_ending_after(&window, carried);
        let keep = window.len().saturating_sub(OVERLAP);
        window.drain(..keep);
    }
}

/// Matches in `buf` whose byte after `/Page` lies at or past `fresh` (so each match is
/// counted in exactly one window).
fn matches_ending_after(buf: &[u8], fresh: usize) -> u64 {
    let mut count = 0;
    for i in 0..buf.len().saturating_sub(5) {
        if &buf[i..i + 5] != b"/Page" || i + 5 < fresh {
            continue;
        }
        if buf[i + 5].is_ascii_alphanumeric() {
            continue; // /Pages, /PageLabels, /PageMode ...
        }
        let before = &buf[i.saturating_sub(MAX_GAP + 5)..i];
        let trimmed = before.trim_ascii_end();
        if before.len() - trimmed.len() <= MAX_GAP && trimmed.ends_with(b"/Type") {
            count += 1;
        }
    }
    count
}

#[cfg(test)]
pub(crate) mod tests;
