//! Audio durations: from the WAV header when there is one, else from the byte size at a
//! deliberately low bitrate (so that the guess errs long).

use super::b64::Base64;

/// Bitrate assumed for compressed audio whose duration is not read: 32 kbit/s, the low
/// end of speech MP3/Opus/AAC, so real files (usually 64–192 kbit/s) come out shorter.
pub(crate) const COMPRESSED_BYTES_PER_SECOND: u64 = 4_000;
/// Chunks walked before giving up on a WAV header.
const MAX_WAV_CHUNKS: usize = 16;

/// Seconds of audio (rounded up) in base64 `data` of the given `format` (`wav`, `mp3`, ...).
pub(crate) fn seconds(data: &Base64<'_>, format: Option<&str>) -> u64 {
    let bytes = data.decoded_len();
    if let Some(secs) = wav_seconds(data, bytes) {
        return secs;
    }
    // A WAV whose header cannot be read: 16-bit mono at 16 kHz is the leanest common PCM.
    let per_second = if format == Some("wav") { 32_000 } else { COMPRESSED_BYTES_PER_SECOND };
    bytes.div_ceil(per_second)
}

/// A RIFF/WAVE file's duration: the `data` chunk's length (capped by the bytes present,
/// as streamed files declare huge sizes) over the `fmt ` chunk's byte rate.
fn wav_seconds(data: &Base64<'_>, total: u64) -> Option<u64> {
    let head = data.read(0, 12)?;
    if head.get(0..4)? != b"RIFF" || head.get(8..12)? != b"WAVE" {
        return None;
    }
    let (mut at, mut byte_rate) = (12u64, None);
    for _ in 0..MAX_WAV_CHUNKS {
        let chunk = data.read(at, 20)?;
        let size = u64::from(u32::from_le_bytes(chunk.get(4..8)?.try_into().ok()?));
        match chunk.get(0..4)? {
            b"fmt " => byte_rate = Some(u32::from_le_bytes(chunk.get(16..20)?.try_into().ok()?)),
            b"data" => {
                let rate = u64::from(byte_rate.filter(|&r| r > 0)?);
                let len = size.min(total.saturating_sub(at + 8));
                return Some(len.div_ceil(rate));
            }
            _ => {}
        }
        at += 8 + size + size % 2; // chunks are padded to even sizes
    }
    None
}

#[cfg(test)]
pub(crate) mod tests {
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
}
