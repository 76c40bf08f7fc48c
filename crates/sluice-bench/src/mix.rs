//! A mixed workload for long runs: short and long chat completions, streams, and async
//! jobs, drawn at random with fixed weights; what each costs the provider and what it sends.

use bytes::Bytes;
use rand::Rng;
use serde_json::json;

use crate::workload::{chat_body, prose};

/// One kind of request in the mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A short question, answered in one body.
    Short,
    /// A long document to summarise, answered in one body.
    Long,
    /// A chat completion streamed back.
    Stream,
    /// A short question submitted as an async job (`POST /v1/jobs`).
    Job,
}

/// A kind's share of the mix and its size.
#[derive(Debug, Clone, Copy)]
pub struct Share {
    /// The kind.
    pub kind: Kind,
    /// Probability of a request being of this kind.
    pub weight: f64,
    /// Prompt size, tokens (approximately).
    pub prompt_tokens: usize,
    /// `max_tokens`.
    pub max_tokens: u64,
}

/// The mix: 40 % short, 20 % long, 30 % streamed, 10 % async jobs.
pub const MIX: [Share; 4] = [
    Share { kind: Kind::Short, weight: 0.4, prompt_tokens: 60, max_tokens: 64 },
    Share { kind: Kind::Long, weight: 0.2, prompt_tokens: 1200, max_tokens: 256 },
    Share { kind: Kind::Stream, weight: 0.3, prompt_tokens: 200, max_tokens: 128 },
    Share { kind: Kind::Job, weight: 0.1, prompt_tokens: 60, max_tokens: 64 },
];

/// Mean tokens a request of the mix costs at a provider that charges prompt + `max_tokens`
/// on arrival.
#[must_use]
pub fn mean_cost() -> f64 {
    MIX.iter().map(|s| s.weight * (s.prompt_tokens as f64 + s.max_tokens as f64)).sum()
}

/// Draws a kind by weight.
pub fn draw(rng: &mut impl Rng) -> Share {
    let mut at: f64 = rng.random();
    for share in MIX {
        if at < share.weight {
            return share;
        }
        at -= share.weight;
    }
    MIX[0]
}

/// The path and body of request `n` of `share`'s kind, for `model`, from `user`.
pub fn request(share: Share, model: &str, user: &str, n: u64, rng: &mut impl Rng) -> (&'static str, Bytes) {
    let id = format!("{user}-{n}");
    let chat = chat_body(model, user, &prose(share.prompt_tokens, rng), share.max_tokens, &id);
    match share.kind {
        Kind::Short | Kind::Long => ("/v1/chat/completions", chat),
        Kind::Stream => {
            let mut body: serde_json::Value = serde_json::from_slice(&chat).unwrap_or_default();
            body["stream"] = json!(true);
            ("/v1/chat/completions", Bytes::from(body.to_string()))
        }
        Kind::Job => {
            let body: serde_json::Value = serde_json::from_slice(&chat).unwrap_or_default();
            let job = json!({"endpoint": "/v1/chat/completions", "class": "batch", "body": body});
            ("/v1/jobs", Bytes::from(job.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    #[test]
    fn weights_sum_to_one_and_draws_follow_them() {
        assert!((MIX.iter().map(|s| s.weight).sum::<f64>() - 1.0).abs() < 1e-9);
        let mut rng = StdRng::seed_from_u64(3);
        let jobs = (0..10_000).filter(|_| draw(&mut rng).kind == Kind::Job).count();
        assert!((800..1200).contains(&jobs), "{jobs}");
    }

    #[test]
    fn jobs_wrap_a_chat_body_and_streams_ask_to_stream() {
        let mut rng = StdRng::seed_from_u64(3);
        let (path, body) = request(MIX[3], "m", "u", 1, &mut rng);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!((path, v["class"].as_str()), ("/v1/jobs", Some("batch")));
        assert_eq!(v["body"]["model"], "m");
        let (_, body) = request(MIX[2], "m", "u", 2, &mut rng);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["stream"], true);
    }
}
