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
pub(crate) mod tests;
