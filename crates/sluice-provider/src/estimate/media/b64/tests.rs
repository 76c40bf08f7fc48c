//! Tests of the base64 reader, and `encode` for building base64 inputs elsewhere.

use ::base64::Engine as _;

use super::*;

/// Base64 of `bytes` (standard alphabet, padded), for building test inputs.
pub(crate) fn encode(bytes: &[u8]) -> String {
    ::base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[test]
fn reads_any_range() {
    let bytes: Vec<u8> = (0..=255).collect();
    for len in [0, 1, 2, 3, 4, 100, 256] {
        let data = encode(&bytes[..len]);
        let b64 = Base64::new(&data);
        assert_eq!(b64.decoded_len(), len as u64, "len {len}");
        assert_eq!(b64.read(0, len).unwrap(), &bytes[..len]);
    }
    let data = encode(&bytes);
    let b64 = Base64::new(&data);
    assert_eq!(b64.read(7, 5).unwrap(), &bytes[7..12]);
    assert_eq!(b64.read(254, 10).unwrap(), &bytes[254..]);
    assert_eq!(b64.read(300, 10).unwrap(), Vec::<u8>::new());
}

#[test]
fn data_urls_and_bad_text() {
    let url = format!("data:image/png;base64,{}", encode(b"hello"));
    assert_eq!(Base64::new(&url).read(0, 5).unwrap(), b"hello");
    assert!(Base64::new("ab c").read(0, 3).is_none());
    assert_eq!(Base64::new("data:nothing").decoded_len(), 0);
}
