//! Random-access reads from base64 text, decoding only the bytes asked for.
//!
//! Media parts arrive as base64 (often megabytes). Their headers sit in the first bytes and
//! base64 maps every 4 characters to 3 bytes, so any byte range can be decoded on its own:
//! the size of an image, the format of a WAV file or the chunks of a PDF scan cost no more
//! than the bytes they read. Whitespace or other stray characters make a read fail
//! (`None`), and the caller falls back to a size-based figure.

/// Base64 text (standard or URL-safe alphabet, padding optional) read lazily.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Base64<'a> {
    text: &'a [u8],
}

impl<'a> Base64<'a> {
    /// The payload of a `data:<media type>;base64,<data>` URL or of bare base64 text.
    pub(crate) fn new(text: &'a str) -> Self {
        let data = match text.strip_prefix("data:") {
            Some(rest) => rest.split_once(',').map_or("", |(_, data)| data),
            None => text,
        };
        Self { text: data.trim_end_matches('=').as_bytes() }
    }

    /// The number of bytes the text decodes to (exact for well-formed base64).
    pub(crate) fn decoded_len(&self) -> u64 {
        let len = self.text.len() as u64;
        len / 4 * 3 + (len % 4).saturating_sub(1)
    }

    /// Up to `len` decoded bytes starting at byte `offset` (fewer at the end of the data);
    /// `None` if a character in the range is not base64.
    pub(crate) fn read(&self, offset: u64, len: usize) -> Option<Vec<u8>> {
        let group = usize::try_from(offset / 3).ok()?;
        let skip = usize::try_from(offset % 3).ok()?;
        let start = group.checked_mul(4)?.min(self.text.len());
        let chars = (skip + len).div_ceil(3).checked_mul(4)?;
        let end = start.saturating_add(chars).min(self.text.len());
        let mut out = Vec::with_capacity(chars / 4 * 3);
        for quad in self.text.get(start..end)?.chunks(4) {
            decode_quad(quad, &mut out)?;
        }
        Some(out.into_iter().skip(skip).take(len).collect())
    }
}

/// Decodes up to 4 characters (a final group may be short) onto `out`.
fn decode_quad(quad: &[u8], out: &mut Vec<u8>) -> Option<()> {
    let mut acc: u32 = 0;
    for &c in quad {
        acc = (acc << 6) | u32::from(sextet(c)?);
    }
    let bytes = match quad.len() {
        4 => 3,
        3 => 2,
        2 => 1,
        _ => return None,
    };
    acc <<= 6 * (4 - quad.len() as u32);
    out.extend_from_slice(&acc.to_be_bytes()[1..=bytes]);
    Some(())
}

fn sextet(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' | b'-' => Some(62),
        b'/' | b'_' => Some(63),
        _ => None,
    }
}

#[cfg(test)]
pub(crate) mod tests;
