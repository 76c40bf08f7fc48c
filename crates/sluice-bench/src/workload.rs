//! The seed-000 workload: interactive users with think time and one long batch job, and
//! the request bodies they send.

use std::time::Duration;

use bytes::Bytes;
use rand::Rng;
use serde::Serialize;
use serde_json::json;

/// Words of about one token each (with their leading space) in the OpenAI tokenizers.
const WORDS: [&str; 48] = [
    "the", "river", "report", "customer", "order", "market", "quarter", "growth", "team", "project", "data", "model",
    "review", "summary", "invoice", "account", "policy", "change", "risk", "plan", "service", "budget", "result",
    "issue", "sales", "region", "price", "cost", "product", "support", "ticket", "email", "meeting", "contract",
    "update", "status", "delivery", "quality", "system", "user", "request", "answer", "question", "time", "week",
    "month", "year", "value",
];

/// Who sends a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One of the interactive users.
    Interactive,
    /// The batch job.
    Batch,
}

/// What the users and the batch job send, and how often.
#[derive(Debug, Clone, Serialize)]
pub struct Workload {
    /// Model name in the requests (the simulated provider's and the gateway profile's).
    pub model: String,
    /// Interactive users.
    pub users: usize,
    /// Shortest think time between a user's answer and the next question.
    #[serde(with = "millis")]
    pub think_min: Duration,
    /// Longest think time.
    #[serde(with = "millis")]
    pub think_max: Duration,
    /// Prompt size of an interactive request, in tokens (approximately).
    pub interactive_prompt_tokens: usize,
    /// `max_tokens` of an interactive request.
    pub interactive_max_tokens: u64,
    /// Requests in the batch job.
    pub batch_requests: usize,
    /// Prompt size of a batch request, in tokens (approximately).
    pub batch_prompt_tokens: usize,
    /// `max_tokens` of a batch request.
    pub batch_max_tokens: u64,
    /// Batch requests outstanding at once.
    pub batch_concurrency: usize,
}

impl Workload {
    /// A user's think time.
    pub fn think(&self, rng: &mut impl Rng) -> Duration {
        if self.think_max <= self.think_min {
            return self.think_min;
        }
        rng.random_range(self.think_min..=self.think_max)
    }

    /// The body of the `n`-th request of `user` (`batch` for the batch job).
    pub fn body(&self, kind: Kind, user: &str, n: usize, rng: &mut impl Rng) -> Bytes {
        let (tokens, max_tokens) = match kind {
            Kind::Interactive => (self.interactive_prompt_tokens, self.interactive_max_tokens),
            Kind::Batch => (self.batch_prompt_tokens, self.batch_max_tokens),
        };
        chat_body(&self.model, user, &prose(tokens, rng), max_tokens, &format!("{user}-{n}"))
    }
}

/// An OpenAI chat request whose last message carries a `req-id:` marker.
#[must_use]
pub fn chat_body(model: &str, user: &str, prompt: &str, max_tokens: u64, id: &str) -> Bytes {
    let body = json!({
        "model": model,
        "user": user,
        "max_tokens": max_tokens,
        "messages": [
            {"role": "system", "content": "You are a concise assistant."},
            {"role": "user", "content": format!("{prompt}\nreq-id:{id}")},
        ],
    });
    Bytes::from(body.to_string())
}

/// About `tokens` tokens of filler text.
pub fn prose(tokens: usize, rng: &mut impl Rng) -> String {
    let words = tokens.saturating_sub(WORDS_OVERHEAD);
    let mut text = String::with_capacity(words * 8);
    for i in 0..words {
        if i > 0 {
            text.push(' ');
        }
        text.push_str(WORDS[rng.random_range(0..WORDS.len())]);
    }
    text
}

/// Tokens of a request besides the filler words: message framing, system prompt, marker.
const WORDS_OVERHEAD: usize = 25;

mod millis {
    use std::time::Duration;

    pub fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u128(d.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    #[test]
    fn bodies_carry_user_marker_and_size() {
        let mut rng = StdRng::seed_from_u64(1);
        let body = chat_body("m", "u1", &prose(200, &mut rng), 100, "u1-3");
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["user"], "u1");
        assert_eq!(v["max_tokens"], 100);
        let text = v["messages"][1]["content"].as_str().unwrap();
        assert!(text.ends_with("req-id:u1-3"));
        assert_eq!(text.split_whitespace().count(), 200 - WORDS_OVERHEAD + 1);
    }
}
