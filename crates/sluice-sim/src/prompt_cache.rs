//! Prompt caches: one per model that sets `prompt_cache = true`, since a served model
//! stands for one provider deployment and providers cache prompts per deployment.
//!
//! Pure: time is passed in as simulated seconds. A request is seen as a chain of segments
//! (tools, system, then messages or their content blocks, in that order), each with its
//! tokens; the key of the prefix ending at a segment is a running hash over the segments up
//! to it (seeded with OpenAI's `prompt_cache_key` when given). The rules the providers
//! document:
//! - OpenAI caches every prompt prefix of at least [`MIN_TOKENS`] automatically; a hit
//!   reports the longest cached prefix in [`OPENAI_STEP`]-token increments;
//! - Anthropic caches only up to explicit `cache_control` breakpoints (prefixes of at least
//!   [`MIN_TOKENS`]); a request reads the longest cached prefix found at the block
//!   boundaries up to [`LOOKBACK_BLOCKS`] before each breakpoint, and writes the rest up to
//!   its last breakpoint (`cache_creation_input_tokens`).
//!
//! Entries live [`TTL_SECS`] simulated seconds and a hit refreshes them. The cache is bounded
//! by [`MAX_ENTRIES`]: when full, expired entries go first, then those closest to expiry.
//!
//! What it is not: a token-exact model. Prefixes end at segment boundaries (a prefix shared
//! up to the middle of a message counts up to the message before), and the context of a
//! Responses `previous_response_id` or conversation is one segment keyed by its id and size.

use std::collections::HashMap;
use std::hash::Hasher as _;

/// How long an unused entry lives, in simulated seconds (five minutes).
pub const TTL_SECS: f64 = 300.0;
/// The shortest cacheable prefix, in tokens.
pub const MIN_TOKENS: u64 = 1024;
/// OpenAI reports cache hits in steps of this many tokens.
pub const OPENAI_STEP: u64 = 128;
/// Entries one model keeps at most.
pub const MAX_ENTRIES: usize = 4096;
/// Anthropic looks for hits at this many block boundaries before each breakpoint.
pub const LOOKBACK_BLOCKS: usize = 20;

/// Whose caching rules apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Automatic prefix caching in 128-token steps.
    Openai,
    /// Caching up to explicit `cache_control` breakpoints.
    Anthropic,
}

/// The end of one segment: the prompt's tokens up to it and the key of that prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Boundary {
    /// Tokens of the prefix ending here.
    pub tokens: u64,
    /// Hash of the prefix ending here.
    pub key: u64,
    /// Whether the segment carries a `cache_control` breakpoint (Anthropic).
    pub breakpoint: bool,
}

/// A request's prompt as the cache sees it: its segment boundaries, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The rules in force.
    pub rule: Rule,
    boundaries: Vec<Boundary>,
    key: u64,
    tokens: u64,
}

impl Plan {
    /// An empty prompt under `rule`, its keys seeded with `seed` (OpenAI's `prompt_cache_key`).
    #[must_use]
    pub fn new(rule: Rule, seed: Option<&str>) -> Self {
        let key = seed.map_or(0, |seed| chain(0, &["prompt_cache_key", seed]));
        Self { rule, boundaries: Vec::new(), key, tokens: 0 }
    }

    /// Appends a segment of `tokens` tokens whose content is `parts`.
    pub fn push(&mut self, parts: &[&str], tokens: u64, breakpoint: bool) {
        self.key = chain(self.key, parts);
        self.tokens += tokens;
        self.boundaries.push(Boundary { tokens: self.tokens, key: self.key, breakpoint });
    }

    /// Tokens of all segments.
    #[must_use]
    pub fn tokens(&self) -> u64 {
        self.tokens
    }

    /// The boundaries, in order.
    #[must_use]
    pub fn boundaries(&self) -> &[Boundary] {
        &self.boundaries
    }

    /// The boundaries this request would write: every cacheable one (OpenAI) or its
    /// cacheable breakpoints (Anthropic).
    fn writes(&self) -> impl Iterator<Item = &Boundary> {
        let rule = self.rule;
        self.boundaries.iter().filter(move |b| b.tokens >= MIN_TOKENS && (rule == Rule::Openai || b.breakpoint))
    }

    /// The boundaries a lookup may read.
    fn reads(&self) -> Vec<&Boundary> {
        let cacheable = |b: &&Boundary| b.tokens >= MIN_TOKENS;
        match self.rule {
            Rule::Openai => self.boundaries.iter().filter(cacheable).collect(),
            Rule::Anthropic => {
                let mut reads: Vec<&Boundary> = Vec::new();
                let breakpoints = self.boundaries.iter().enumerate().filter(|(_, b)| b.breakpoint).map(|(i, _)| i);
                for i in breakpoints {
                    let first = i.saturating_sub(LOOKBACK_BLOCKS - 1);
                    reads.extend(self.boundaries[first..=i].iter().filter(cacheable));
                }
                reads
            }
        }
    }
}

fn chain(key: u64, parts: &[&str]) -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    hasher.write_u64(key);
    for part in parts {
        hasher.write(part.as_bytes());
        hasher.write_u8(0xff);
    }
    hasher.finish()
}

/// How a request fared with the cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing of it could be cached (too short, or no breakpoint).
    #[default]
    Uncacheable,
    /// Cacheable, nothing read.
    Miss,
    /// A cached prefix was read.
    Hit,
}

/// What a lookup found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lookup {
    /// Input tokens read from the cache.
    pub read: u64,
    /// Input tokens written to the cache (Anthropic's `cache_creation_input_tokens`).
    pub created: u64,
    /// Hit, miss or uncacheable.
    pub outcome: Outcome,
    hit: Option<u64>,
}

/// A request's plan and what its lookup found, committed once it is admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheUse {
    /// The request's prefixes.
    pub plan: Plan,
    /// The lookup.
    pub lookup: Lookup,
}

/// One model's cache: prefix keys and when they expire (simulated seconds).
#[derive(Debug, Clone, Default)]
pub struct PromptCache {
    entries: HashMap<u64, f64>,
}

impl PromptCache {
    /// Looks `plan` up at `now` without changing anything.
    #[must_use]
    pub fn peek(&self, now: f64, plan: &Plan) -> Lookup {
        let live = |b: &&&Boundary| self.entries.get(&b.key).is_some_and(|expires| *expires > now);
        let reads = plan.reads();
        let hit = reads.iter().filter(live).max_by_key(|b| b.tokens).copied();
        let read = match (hit, plan.rule) {
            (None, _) => 0,
            (Some(b), Rule::Openai) => b.tokens / OPENAI_STEP * OPENAI_STEP,
            (Some(b), Rule::Anthropic) => b.tokens,
        };
        let written = plan.writes().map(|b| b.tokens).max();
        let created = match plan.rule {
            Rule::Openai => 0,
            Rule::Anthropic => written.unwrap_or(0).saturating_sub(read),
        };
        let outcome = match (hit, written.is_some() || !reads.is_empty()) {
            (Some(_), _) => Outcome::Hit,
            (None, true) => Outcome::Miss,
            (None, false) => Outcome::Uncacheable,
        };
        Lookup { read, created, outcome, hit: hit.map(|b| b.key) }
    }

    /// Refreshes what `lookup` read and writes what `plan` caches, all to expire at
    /// `now + TTL_SECS`.
    pub fn commit(&mut self, now: f64, plan: &Plan, lookup: &Lookup) {
        let expires = now + TTL_SECS;
        for key in lookup.hit.into_iter().chain(plan.writes().map(|b| b.key)) {
            self.put(now, key, expires);
        }
    }

    fn put(&mut self, now: f64, key: u64, expires: f64) {
        if !self.entries.contains_key(&key) && self.entries.len() >= MAX_ENTRIES {
            self.entries.retain(|_, e| *e > now);
            if self.entries.len() >= MAX_ENTRIES
                && let Some(oldest) = self.entries.iter().min_by(|a, b| a.1.total_cmp(b.1)).map(|(k, _)| *k)
            {
                self.entries.remove(&oldest);
            }
        }
        self.entries.insert(key, expires);
    }

    /// Entries kept (expired ones included until they are pushed out).
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it keeps nothing.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn openai(segments: &[(&str, u64)], key: Option<&str>) -> Plan {
        let mut plan = Plan::new(Rule::Openai, key);
        for (text, tokens) in segments {
            plan.push(&[text], *tokens, false);
        }
        plan
    }

    fn use_once(cache: &mut PromptCache, now: f64, plan: &Plan) -> Lookup {
        let lookup = cache.peek(now, plan);
        cache.commit(now, plan, &lookup);
        lookup
    }

    #[test]
    fn openai_reads_the_longest_cached_prefix_in_steps() {
        let mut cache = PromptCache::default();
        let first = openai(&[("tools", 600), ("system", 700), ("user 1", 50)], None);
        let miss = use_once(&mut cache, 0.0, &first);
        assert_eq!((miss.read, miss.outcome), (0, Outcome::Miss));
        let second = openai(&[("tools", 600), ("system", 700), ("user 1", 50), ("user 2", 10)], None);
        let hit = use_once(&mut cache, 1.0, &second);
        // 1,350 tokens cached, reported as 10 steps of 128.
        assert_eq!((hit.read, hit.outcome), (1280, Outcome::Hit));
        let keyed = openai(&[("tools", 600), ("system", 700), ("user 1", 50)], Some("k"));
        assert_eq!(cache.peek(1.0, &keyed).outcome, Outcome::Miss);
    }

    #[test]
    fn short_prompts_never_cache_and_entries_expire() {
        let mut cache = PromptCache::default();
        let short = openai(&[("system", 1000)], None);
        use_once(&mut cache, 0.0, &short);
        assert_eq!(use_once(&mut cache, 1.0, &short).outcome, Outcome::Uncacheable);
        let long = openai(&[("system", 2000)], None);
        use_once(&mut cache, 0.0, &long);
        assert_eq!(cache.peek(TTL_SECS - 1.0, &long).outcome, Outcome::Hit);
        assert_eq!(cache.peek(TTL_SECS, &long).outcome, Outcome::Miss);
    }

    #[test]
    fn anthropic_reads_at_breakpoints_and_creates_up_to_the_last() {
        let mut cache = PromptCache::default();
        let mut first = Plan::new(Rule::Anthropic, None);
        first.push(&["system"], 1500, true);
        first.push(&["user 1"], 20, false);
        let created = use_once(&mut cache, 0.0, &first);
        assert_eq!((created.read, created.created, created.outcome), (0, 1500, Outcome::Miss));
        let mut second = Plan::new(Rule::Anthropic, None);
        second.push(&["system"], 1500, false);
        second.push(&["user 1"], 20, false);
        second.push(&["assistant"], 500, true);
        let hit = use_once(&mut cache, 1.0, &second);
        assert_eq!((hit.read, hit.created, hit.outcome), (1500, 520, Outcome::Hit));
        let mut unmarked = Plan::new(Rule::Anthropic, None);
        unmarked.push(&["system"], 1500, false);
        assert_eq!(cache.peek(1.0, &unmarked).outcome, Outcome::Uncacheable);
    }

    #[test]
    fn a_full_cache_pushes_out_the_entry_closest_to_expiry() {
        let mut cache = PromptCache::default();
        for i in 0..=MAX_ENTRIES {
            let plan = openai(&[(&i.to_string(), 2000)], None);
            #[expect(clippy::cast_precision_loss, reason = "small test numbers")]
            use_once(&mut cache, i as f64 * 0.001, &plan);
        }
        assert_eq!(cache.len(), MAX_ENTRIES);
        assert_eq!(cache.peek(1.0, &openai(&[("0", 2000)], None)).outcome, Outcome::Miss);
        assert_eq!(cache.peek(1.0, &openai(&[("1", 2000)], None)).outcome, Outcome::Hit);
    }
}
