//! Tests of the audio duration readers, and a builder of WAV files for tests elsewhere.

use super::super::b64::tests::encode;
use super::*;

/// A 16-bit PCM WAV of `secs` seconds of silence at `rate` Hz, `channels` channels.
pub(crate) fn wav(secs: u32, rate: u32, channels: u16) -> Vec<u8> {
    let byte_rate = rate * u32::from(channels) * 2;
    let data_len = byte_rate * secs;
    let mut b = b"RIFF".to_vec();
    b.extend_from_slice(&(36 + data_len).to_le_bytes());
    b.extend_from_slice(b"WAVEfmt \x10\0\0\0\x01\0");
    b.extend_from_slice(&channels.to_le_bytes());
    b.extend_from_slice(&rate.to_le_bytes());
    b.extend_from_slice(&byte_rate.to_le_bytes());
    b.extend_from_slice(&(channels * 2).to_le_bytes());
    b.extend_from_slice(&16u16.to_le_bytes());
    b.extend_from_slice(b"data");
    b.extend_from_slice(&data_len.to_le_bytes());
    b.resize(b.len() + data_len as usize, 0);
    b
}

fn secs(bytes: &[u8], format: &str) -> u64 {
    seconds(&Base64::new(&encode(bytes)), Some(format))
}

#[test]
fn wav_duration_from_the_header() {
    assert_eq!(secs(&wav(3, 16_000, 1), "wav"), 3);
    assert_eq!(secs(&wav(2, 44_100, 2), "wav"), 2);
    let mut truncated = wav(10, 8_000, 1);
    truncated.truncate(44 + 8_000 * 2 * 4);
    assert_eq!(secs(&truncated, "wav"), 4, "a declared size past the end is capped");
}

#[test]
fn other_audio_by_size() {
    assert_eq!(secs(&vec![0u8; 40_000], "mp3"), 10);
    assert_eq!(secs(&vec![0u8; 64_000], "wav"), 2, "unreadable WAV header");
}
