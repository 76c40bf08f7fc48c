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
pub(crate) mod tests {
    use super::super::b64::tests::encode;
    use super::*;

    /// A PNG signature and IHDR chunk of the given size (all a size reader needs).
    pub(crate) fn png_header(w: u32, h: u32) -> Vec<u8> {
        let mut b = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
        b.extend_from_slice(&w.to_be_bytes());
        b.extend_from_slice(&h.to_be_bytes());
        b.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
        b
    }

    /// SOI, an APP0 segment, a large APP1 (as EXIF would be), then SOF0.
    pub(crate) fn jpeg_header(w: u16, h: u16) -> Vec<u8> {
        let mut b = vec![0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10];
        b.extend_from_slice(b"JFIF\0\x01\x01\0\0\x01\0\x01\0\0");
        b.extend_from_slice(&[0xFF, 0xE1, 0x10, 0x02]);
        b.extend(std::iter::repeat_n(0u8, 0x1000));
        b.extend_from_slice(&[0xFF, 0xC0, 0x00, 0x11, 0x08]);
        b.extend_from_slice(&h.to_be_bytes());
        b.extend_from_slice(&w.to_be_bytes());
        b.extend_from_slice(&[3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1]);
        b
    }

    fn read(bytes: &[u8]) -> Option<Size> {
        size(&Base64::new(&encode(bytes)))
    }

    #[test]
    fn png_and_jpeg() {
        assert_eq!(read(&png_header(1920, 1080)), Some((1920, 1080)));
        assert_eq!(read(&jpeg_header(4032, 3024)), Some((4032, 3024)));
    }

    #[test]
    fn gif_and_webp() {
        assert_eq!(read(b"GIF89a\x40\x01\xf0\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"), Some((320, 240)));
        let mut vp8x = b"RIFF\0\0\0\0WEBPVP8X\x0a\0\0\0\0\0\0\0".to_vec();
        vp8x.extend_from_slice(&[0x7F, 0x07, 0x00, 0x37, 0x04, 0x00, 0, 0, 0]);
        assert_eq!(read(&vp8x), Some((1920, 1080)));
        let mut vp8 = b"RIFF\0\0\0\0WEBPVP8 \0\0\0\0\0\0\0\x9d\x01\x2a".to_vec();
        vp8.extend_from_slice(&[0x80, 0x02, 0xE0, 0x01, 0, 0]);
        assert_eq!(read(&vp8), Some((640, 480)));
        let bits: u32 = 99 | (49 << 14);
        let mut vp8l = b"RIFF\0\0\0\0WEBPVP8L\0\0\0\0\x2f".to_vec();
        vp8l.extend_from_slice(&bits.to_le_bytes());
        vp8l.extend_from_slice(&[0; 8]);
        assert_eq!(read(&vp8l), Some((100, 50)));
    }

    #[test]
    fn garbage_has_no_size() {
        assert_eq!(read(b"not an image at all, just some text here"), None);
        assert_eq!(read(&[0xFF, 0xD8, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0]), None);
        assert_eq!(read(&png_header(0, 10)), None);
        assert_eq!(size(&Base64::new("!!!!")), None);
    }
}
