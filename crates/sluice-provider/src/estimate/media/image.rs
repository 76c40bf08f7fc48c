//! Image dimensions from the first bytes of PNG, JPEG, GIF and WebP files.
//!
//! Each parser reads a bounded number of header bytes through [`Base64::read`]; nothing
//! decodes pixels. JPEG is the one format whose size is not at a fixed offset: its
//! segments are walked (at most [`MAX_JPEG_SEGMENTS`], reading 9 bytes each) until a
//! start-of-frame marker.

use super::b64::Base64;

/// Width and height in pixels.
pub(crate) type Size = (u32, u32);

/// Segments walked before giving up on a JPEG (real files reach SOF within ~20).
const MAX_JPEG_SEGMENTS: usize = 64;

/// The size of a base64 image, if its header is one of the four formats and readable.
pub(crate) fn size(data: &Base64<'_>) -> Option<Size> {
    let head = data.read(0, 30)?;
    let found = if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        png(&head)
    } else if head.starts_with(b"GIF8") {
        gif(&head)
    } else if head.starts_with(b"RIFF") && head.get(8..12) == Some(b"WEBP") {
        webp(&head)
    } else if head.starts_with(&[0xFF, 0xD8]) {
        jpeg(data)
    } else {
        None
    };
    found.filter(|&(w, h)| w > 0 && h > 0)
}

fn be16(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?)))
}

fn le16(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?)))
}

fn le24(b: &[u8], at: usize) -> Option<u32> {
    let x = b.get(at..at + 3)?;
    Some(u32::from(x[0]) | (u32::from(x[1]) << 8) | (u32::from(x[2]) << 16))
}

/// `IHDR` is the first chunk: width and height at bytes 16..24.
fn png(b: &[u8]) -> Option<Size> {
    if b.get(12..16)? != b"IHDR" {
        return None;
    }
    let w = u32::from_be_bytes(b.get(16..20)?.try_into().ok()?);
    let h = u32::from_be_bytes(b.get(20..24)?.try_into().ok()?);
    Some((w, h))
}

/// The logical screen size at bytes 6..10.
fn gif(b: &[u8]) -> Option<Size> {
    Some((le16(b, 6)?, le16(b, 8)?))
}

/// `VP8 ` (lossy), `VP8L` (lossless) or `VP8X` (extended) as the first chunk.
fn webp(b: &[u8]) -> Option<Size> {
    match b.get(12..16)? {
        b"VP8 " => Some((le16(b, 26)? & 0x3FFF, le16(b, 28)? & 0x3FFF)),
        b"VP8L" => {
            let bits = u32::from_le_bytes(b.get(21..25)?.try_into().ok()?);
            Some(((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1))
        }
        b"VP8X" => Some((le24(b, 24)? + 1, le24(b, 27)? + 1)),
        _ => None,
    }
}

/// Walks `FF xx <len>` segments from offset 2 to the first SOFn (height, then width).
fn jpeg(data: &Base64<'_>) -> Option<Size> {
    let mut at: u64 = 2;
    for _ in 0..MAX_JPEG_SEGMENTS {
        let seg = data.read(at, 9)?;
        if seg.first() != Some(&0xFF) {
            return None;
        }
        let marker = *seg.get(1)?;
        if marker == 0xFF {
            at += 1; // fill byte
            continue;
        }
        // SOF0..SOF15, except DHT (C4), JPG (C8) and DAC (CC).
        if (0xC0..=0xCF).contains(&marker) && ![0xC4, 0xC8, 0xCC].contains(&marker) {
            return Some((be16(&seg, 7)?, be16(&seg, 5)?));
        }
        at += 2 + u64::from(be16(&seg, 2)?);
    }
    None
}

#[cfg(test)]
pub(crate) mod tests;
