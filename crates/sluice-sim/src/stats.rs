//! Accounting of what the simulator saw and did, served as `GET /_stats`.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::admission::LimitKind;
use crate::faults::FaultKind;
use crate::prompt_cache::{Lookup, Outcome};

/// Longest timeline kept, in seconds (one day).
const MAX_TIMELINE: usize = 86_400;

/// 429s by limit class.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateLimited {
    /// Requests per minute.
    pub requests: u64,
    /// Tokens per minute (OpenAI shape).
    pub tokens: u64,
    /// Input tokens per minute (Anthropic shape).
    pub input_tokens: u64,
    /// Output tokens per minute (Anthropic shape).
    pub output_tokens: u64,
    /// In-flight cap.
    pub concurrency: u64,
    /// Per-day limits.
    pub daily: u64,
}

impl RateLimited {
    /// All rate-limit rejections.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.requests + self.tokens + self.input_tokens + self.output_tokens + self.concurrency + self.daily
    }

    fn bump(&mut self, kind: LimitKind) {
        *match kind {
            LimitKind::Requests => &mut self.requests,
            LimitKind::Tokens => &mut self.tokens,
            LimitKind::InputTokens => &mut self.input_tokens,
            LimitKind::OutputTokens => &mut self.output_tokens,
            LimitKind::Concurrency => &mut self.concurrency,
            LimitKind::Daily => &mut self.daily,
        } += 1;
    }
}

/// Injected faults by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Faults {
    /// HTTP 500.
    pub error_500: u64,
    /// HTTP 502.
    pub error_502: u64,
    /// HTTP 503.
    pub error_503: u64,
    /// HTTP 529.
    pub error_529: u64,
    /// HTTP 400.
    #[serde(default)]
    pub error_400: u64,
    /// HTTP 401.
    #[serde(default)]
    pub error_401: u64,
    /// HTTP 429 (the injected fault, not a limit's refusal).
    #[serde(default)]
    pub error_429: u64,
    /// Connection resets.
    pub reset: u64,
    /// Hangs.
    pub hang: u64,
    /// Streams cut mid-way.
    pub stream_drop: u64,
    /// Slow headers (the response itself was normal).
    pub slow_headers: u64,
    /// Answers that stalled after their headers.
    #[serde(default)]
    pub stall: u64,
    /// Oversized answers.
    #[serde(default)]
    pub oversize: u64,
}

impl Faults {
    fn bump(&mut self, kind: FaultKind) {
        *match kind {
            FaultKind::Error500 => &mut self.error_500,
            FaultKind::Error502 => &mut self.error_502,
            FaultKind::Error503 => &mut self.error_503,
            FaultKind::Error529 => &mut self.error_529,
            FaultKind::Error400 => &mut self.error_400,
            FaultKind::Error401 => &mut self.error_401,
            FaultKind::Error429 => &mut self.error_429,
            FaultKind::Reset => &mut self.reset,
            FaultKind::Hang => &mut self.hang,
            FaultKind::StreamDrop => &mut self.stream_drop,
            FaultKind::SlowHeaders => &mut self.slow_headers,
            FaultKind::Stall => &mut self.stall,
            FaultKind::Oversize => &mut self.oversize,
        } += 1;
    }
}

/// Token totals.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    /// Tokens charged at admission (TPM cost, or ITPM + OTPM reservations).
    pub admitted: u64,
    /// Input tokens of served requests (cache reads included).
    pub input_used: u64,
    /// Of which cache reads.
    pub cached_input_used: u64,
    /// Output tokens of served requests.
    pub output_used: u64,
}

/// Served usage of a tenant or model.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Requests received (models only; tenants count served ones).
    pub requests: u64,
    /// Requests served successfully.
    pub served: u64,
    /// Requests rejected by a limit.
    pub rate_limited: u64,
    /// Input tokens served.
    pub input_tokens: u64,
    /// Output tokens served.
    pub output_tokens: u64,
}

/// Prompt-cache outcomes of one model (deployment), counted at admission.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptCacheUsage {
    /// Requests that read a cached prefix.
    pub hits: u64,
    /// Cacheable requests that read nothing.
    pub misses: u64,
    /// Requests with nothing cacheable (too short, or no breakpoint).
    pub uncacheable: u64,
    /// Input tokens read from the cache.
    pub read_tokens: u64,
    /// Input tokens written to the cache (Anthropic's cache creation).
    pub created_tokens: u64,
}

impl PromptCacheUsage {
    /// Hits among cacheable requests, 0 when there were none.
    #[must_use]
    #[expect(clippy::cast_precision_loss, reason = "request counts are far below 2^52")]
    pub fn hit_share(&self) -> f64 {
        let cacheable = self.hits + self.misses;
        if cacheable == 0 { 0.0 } else { self.hits as f64 / cacheable as f64 }
    }
}

/// Admissions during one real second.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Second {
    /// Real seconds since start or reset.
    pub second: u64,
    /// Requests admitted.
    pub requests: u64,
    /// Tokens admitted.
    pub tokens: u64,
}

/// Everything `GET /_stats` reports.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatsSnapshot {
    /// Requests that named a served model.
    pub requests: u64,
    /// Requests answered successfully (complete body or stream).
    pub served: u64,
    /// Requests refused as invalid (400, 404).
    pub invalid: u64,
    /// 429s (and concurrency 529s) by limit class.
    pub rate_limited: RateLimited,
    /// Injected faults by kind.
    pub faults: Faults,
    /// Token totals.
    pub tokens: Tokens,
    /// Served usage per tenant (`x-sim-tenant`, `user` or `metadata.user_id`; else `anonymous`).
    pub tenants: BTreeMap<String, Usage>,
    /// Usage per model.
    pub models: BTreeMap<String, Usage>,
    /// Prompt-cache outcomes per model that keeps a prompt cache.
    #[serde(default)]
    pub prompt_cache: BTreeMap<String, PromptCacheUsage>,
    /// Admitted requests and tokens per real second.
    pub timeline: Vec<Second>,
    /// Distinct `req-id:` markers served at least once.
    pub markers: u64,
    /// Markers served more than once.
    pub duplicates: u64,
    /// Served completions beyond the first, summed over all markers.
    pub duplicate_completions: u64,
    /// Requests admitted per model and real second since start or reset; kept only when
    /// the config asks for it (`model_timeline = true`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub model_timeline: BTreeMap<String, Vec<u64>>,
    /// Most requests each model admitted within one provider minute: the largest sum over
    /// any run of consecutive real seconds as long as a simulated minute; only with
    /// `model_timeline = true`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub busiest_minute: BTreeMap<String, u64>,
}

/// A served request, for accounting.
#[derive(Debug, Clone, Copy, Default)]
pub struct Served<'a> {
    /// Model name.
    pub model: &'a str,
    /// Tenant.
    pub tenant: &'a str,
    /// `req-id:` marker of the last message.
    pub marker: Option<&'a str>,
    /// Input tokens (cache reads included).
    pub input: u64,
    /// Of which cache reads.
    pub cached: u64,
    /// Output tokens.
    pub output: u64,
}

/// Mutable accounting state (behind the simulator's lock).
#[derive(Debug, Default)]
pub struct Stats {
    snap: StatsSnapshot,
    markers: HashMap<String, u64>,
    /// Real seconds in one provider minute, when admissions are kept per model and second.
    minute_seconds: Option<usize>,
}

/// The largest sum of `len` consecutive entries of `counts` (all of them when shorter).
#[must_use]
pub fn busiest_window(counts: &[u64], len: usize) -> u64 {
    let len = len.max(1);
    let mut sum: u64 = counts.iter().take(len).sum();
    let mut best = sum;
    for i in len..counts.len() {
        sum = sum + counts[i] - counts[i - len];
        best = best.max(sum);
    }
    best
}

/// Updates the entry of `key`, allocating the key only when it is new.
fn bump(map: &mut BTreeMap<String, Usage>, key: &str, update: impl FnOnce(&mut Usage)) {
    if let Some(usage) = map.get_mut(key) {
        update(usage);
    } else {
        let mut usage = Usage::default();
        update(&mut usage);
        map.insert(key.to_owned(), usage);
    }
}

impl Stats {
    /// Accounting that also keeps each model's admissions per real second and its busiest
    /// provider minute, `minute_seconds` real seconds long.
    #[must_use]
    pub fn per_model(minute_seconds: usize) -> Self {
        Self { minute_seconds: Some(minute_seconds.max(1)), ..Self::default() }
    }

    /// A request named `model`.
    pub fn on_request(&mut self, model: &str) {
        self.snap.requests += 1;
        bump(&mut self.snap.models, model, |u| u.requests += 1);
    }

    /// A request named `model`, refused by a limit.
    pub fn on_refused(&mut self, model: &str, kind: LimitKind) {
        self.on_request(model);
        self.on_rejected(model, kind);
    }

    /// A request named `model`, admitted at real second `second` for `tokens`, with its fault.
    pub fn on_admitted(&mut self, model: &str, second: u64, tokens: u64, fault: Option<FaultKind>) {
        self.on_request(model);
        self.on_admission(second, tokens);
        if self.minute_seconds.is_some()
            && let Ok(index) = usize::try_from(second)
            && index < MAX_TIMELINE
        {
            let seconds = self.snap.model_timeline.entry(model.to_owned()).or_default();
            if seconds.len() <= index {
                seconds.resize(index + 1, 0);
            }
            seconds[index] += 1;
        }
        if let Some(kind) = fault {
            self.on_fault(kind);
        }
    }

    /// An invalid request.
    pub fn on_invalid(&mut self) {
        self.snap.invalid += 1;
    }

    /// A rate-limit rejection.
    pub fn on_rejected(&mut self, model: &str, kind: LimitKind) {
        self.snap.rate_limited.bump(kind);
        bump(&mut self.snap.models, model, |u| u.rate_limited += 1);
    }

    /// An admission of `tokens` at real second `second`.
    pub fn on_admission(&mut self, second: u64, tokens: u64) {
        self.snap.tokens.admitted += tokens;
        let Ok(index) = usize::try_from(second) else { return };
        if index >= MAX_TIMELINE {
            return;
        }
        let timeline = &mut self.snap.timeline;
        while timeline.len() <= index {
            let second = timeline.len() as u64;
            timeline.push(Second { second, ..Second::default() });
        }
        timeline[index].requests += 1;
        timeline[index].tokens += tokens;
    }

    /// An admitted request's prompt-cache outcome on `model`.
    pub fn on_prompt_cache(&mut self, model: &str, lookup: &Lookup) {
        let update = |u: &mut PromptCacheUsage| {
            *match lookup.outcome {
                Outcome::Hit => &mut u.hits,
                Outcome::Miss => &mut u.misses,
                Outcome::Uncacheable => &mut u.uncacheable,
            } += 1;
            u.read_tokens += lookup.read;
            u.created_tokens += lookup.created;
        };
        if let Some(usage) = self.snap.prompt_cache.get_mut(model) {
            update(usage);
        } else {
            let mut usage = PromptCacheUsage::default();
            update(&mut usage);
            self.snap.prompt_cache.insert(model.to_owned(), usage);
        }
    }

    /// An injected fault.
    pub fn on_fault(&mut self, kind: FaultKind) {
        self.snap.faults.bump(kind);
    }

    /// A successful response.
    pub fn on_served(&mut self, s: &Served<'_>) {
        self.snap.served += 1;
        self.snap.tokens.input_used += s.input;
        self.snap.tokens.cached_input_used += s.cached;
        self.snap.tokens.output_used += s.output;
        let add = |u: &mut Usage| {
            u.served += 1;
            u.input_tokens += s.input;
            u.output_tokens += s.output;
        };
        bump(&mut self.snap.models, s.model, add);
        bump(&mut self.snap.tenants, s.tenant, |u| {
            add(u);
            u.requests += 1;
        });
        if let Some(marker) = s.marker {
            self.on_marker(marker);
        }
    }

    fn on_marker(&mut self, marker: &str) {
        let count = if let Some(count) = self.markers.get_mut(marker) {
            *count += 1;
            *count
        } else {
            self.markers.insert(marker.to_owned(), 1);
            1
        };
        match count {
            1 => self.snap.markers += 1,
            2 => {
                self.snap.duplicates += 1;
                self.snap.duplicate_completions += 1;
            }
            _ => self.snap.duplicate_completions += 1,
        }
    }

    /// A copy of the counters.
    #[must_use]
    pub fn snapshot(&self) -> StatsSnapshot {
        let mut snap = self.snap.clone();
        if let Some(len) = self.minute_seconds {
            snap.busiest_minute = snap
                .model_timeline
                .iter()
                .map(|(model, seconds)| (model.clone(), busiest_window(seconds, len)))
                .collect();
        }
        snap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_count_markers_served_more_than_once() {
        let mut s = Stats::default();
        let served = |marker| Served { model: "m", tenant: "t", marker: Some(marker), input: 1, output: 2, cached: 0 };
        for m in ["a", "b", "a", "a", "c", "c"] {
            s.on_served(&served(m));
        }
        let snap = s.snapshot();
        assert_eq!((snap.markers, snap.duplicates, snap.duplicate_completions), (3, 2, 3));
        assert_eq!(snap.served, 6);
        assert_eq!(snap.tenants["t"].output_tokens, 12);
        assert_eq!(snap.tenants["t"].requests, 6);
    }

    #[test]
    fn timeline_has_one_entry_per_second() {
        let mut s = Stats::default();
        s.on_admission(0, 10);
        s.on_admission(2, 5);
        s.on_admitted("m", 2, 5, None);
        let t = s.snapshot().timeline;
        assert_eq!(t.len(), 3);
        assert_eq!((t[1].requests, t[2].requests, t[2].tokens), (0, 2, 10));
    }

    #[test]
    fn busiest_window_is_the_largest_run_of_consecutive_seconds() {
        assert_eq!(busiest_window(&[], 60), 0);
        assert_eq!(busiest_window(&[3, 4], 60), 7);
        assert_eq!(busiest_window(&[5, 1, 1, 9, 0, 2], 2), 10);
        assert_eq!(busiest_window(&[5, 1, 1, 9, 0, 2], 3), 11);
        assert_eq!(busiest_window(&[5, 1, 1, 9, 0, 2], 0), 9);
    }

    #[test]
    fn per_model_timeline_is_opt_in_and_counts_each_model_alone() {
        let mut plain = Stats::default();
        plain.on_admitted("a", 0, 1, None);
        let snap = plain.snapshot();
        assert!(snap.model_timeline.is_empty() && snap.busiest_minute.is_empty());
        assert!(!serde_json::to_string(&snap).unwrap().contains("busiest_minute"));

        let mut s = Stats::per_model(2);
        for second in [0, 0, 1, 3, 3, 3] {
            s.on_admitted("a", second, 1, None);
        }
        s.on_admitted("b", 2, 1, None);
        s.on_refused("b", LimitKind::Requests);
        let snap = s.snapshot();
        assert_eq!(snap.model_timeline["a"], vec![2, 1, 0, 3]);
        assert_eq!(snap.model_timeline["b"], vec![0, 0, 1]);
        assert_eq!(snap.busiest_minute["a"], 3);
        assert_eq!(snap.busiest_minute["b"], 1);
        assert_eq!(snap.requests, 8);
    }

    #[test]
    fn rejections_and_faults_are_counted_by_kind() {
        let mut s = Stats::default();
        s.on_request("m");
        s.on_rejected("m", LimitKind::Tokens);
        s.on_fault(FaultKind::Reset);
        let snap = s.snapshot();
        assert_eq!(snap.rate_limited.tokens, 1);
        assert_eq!(snap.rate_limited.total(), 1);
        assert_eq!(snap.faults.reset, 1);
        assert_eq!(snap.models["m"].rate_limited, 1);
    }
}
