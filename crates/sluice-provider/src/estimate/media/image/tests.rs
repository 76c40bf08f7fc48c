//! Tests of the image size readers, and builders of PNG and JPEG headers for tests
//! elsewhere.

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
