//! The request-path counters, summed for the dashboard from the same text Prometheus
//! scrapes (so the dashboard and Grafana can never disagree).

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// One sample of the text exposition: `name{labels} value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The sample's name (`sluice_requests_total`, `sluice_queue_wait_seconds_bucket`, ...).
    pub name: String,
    /// Its labels, in order.
    pub labels: Vec<(String, String)>,
    /// Its value.
    pub value: f64,
}

impl Sample {
    /// The value of label `name`, or `""`.
    #[must_use]
    pub fn label(&self, name: &str) -> &str {
        self.labels.iter().find(|(k, _)| k == name).map_or("", |(_, v)| v.as_str())
    }
}

/// Every sample line of a Prometheus/OpenMetrics text exposition (comments skipped).
#[must_use]
pub fn parse_samples(text: &str) -> Vec<Sample> {
    text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()).filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    let (head, labels, rest) = match line.find('{') {
        Some(open) => {
            let close = line.rfind('}')?;
            (&line[..open], parse_labels(&line[open + 1..close]), &line[close + 1..])
        }
        None => {
            let (name, rest) = line.split_once(' ')?;
            (name, Vec::new(), rest)
        }
    };
    let value = rest.split_whitespace().next()?.parse().ok()?;
    Some(Sample { name: head.to_owned(), labels, value })
}

fn parse_labels(text: &str) -> Vec<(String, String)> {
    let mut labels = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        let name: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if name.is_empty() || chars.next() != Some('"') {
            return labels;
        }
        let mut value = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => value.extend(chars.next().map(|n| if n == 'n' { '\n' } else { n })),
                '"' => break,
                c => value.push(c),
            }
        }
        labels.push((name.trim_start_matches(',').trim().to_owned(), value));
        if chars.peek() == Some(&',') {
            chars.next();
        }
    }
}

fn sum(samples: &[Sample], name: &str, keep: impl Fn(&Sample) -> bool) -> f64 {
    samples.iter().filter(|s| s.name == name && keep(s)).map(|s| s.value).sum()
}

fn by_label(samples: &[Sample], name: &str, label: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for s in samples.iter().filter(|s| s.name == name) {
        *out.entry(s.label(label).to_owned()).or_insert(0.0) += s.value;
    }
    out
}

/// The dashboard's counters: requests by status class, 429s prevented (gateway
/// refusals and requests that waited instead) vs seen (provider 429s), fallbacks by
/// reason, retries, tokens reserved vs used, and the queue wait histogram.
#[must_use]
pub fn summarize(samples: &[Sample]) -> Value {
    let hits = "sluice_rate_limit_hits_total";
    let mut statuses = BTreeMap::new();
    for s in samples.iter().filter(|s| s.name == "sluice_requests_total") {
        let status = s.label("status");
        let class = if status == "429" { "429".to_owned() } else { format!("{}xx", &status[..1.min(status.len())]) };
        *statuses.entry(class).or_insert(0.0) += s.value;
    }
    let mut wait: BTreeMap<String, f64> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.name == "sluice_queue_wait_seconds_bucket") {
        *wait.entry(s.label("le").to_owned()).or_insert(0.0) += s.value;
    }
    let mut wait: Vec<(f64, f64)> = wait
        .into_iter()
        .map(|(le, n)| (if le == "+Inf" { f64::INFINITY } else { le.parse().unwrap_or(0.0) }, n))
        .collect();
    wait.sort_by(|a, b| a.0.total_cmp(&b.0));
    let wait: Vec<Value> =
        wait.into_iter().map(|(le, n)| json!([if le.is_finite() { json!(le) } else { json!("+Inf") }, n])).collect();
    json!({
        "requests": statuses,
        "provider_429": sum(samples, hits, |s| s.label("limit_type") == "provider"),
        "gateway_refusals": sum(samples, hits, |s| s.label("limit_type") != "provider"),
        "queued": sum(samples, "sluice_queue_wait_seconds_count", |_| true),
        "queue_depth": sum(samples, "sluice_queue_depth", |_| true),
        "fallbacks": by_label(samples, "sluice_fallbacks_total", "reason"),
        "retries": sum(samples, "sluice_retries_total", |_| true),
        "duplicates_suppressed": sum(samples, "sluice_duplicate_suppressed_total", |_| true),
        "tokens_reserved": sum(samples, "sluice_tokens_reserved_total", |_| true),
        "tokens_used": sum(samples, "sluice_tokens_used_total", |_| true),
        "decisions": by_label(samples, "sluice_decisions_total", "limiter"),
        "queue_wait_buckets": wait,
    })
}

/// The dashboard's spend panel: `sluice_spend_total` per tenant from the process's metric
/// `samples` (this instance, since it started), most spent first, in `currency`.
#[must_use]
pub fn per_tenant(samples: &[Sample], currency: &str) -> Value {
    let mut tenants: Vec<(&str, f64)> =
        samples.iter().filter(|s| s.name == "sluice_spend_total").map(|s| (s.label("tenant"), s.value)).collect();
    tenants.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    let rows: Vec<Value> =
        tenants.into_iter().map(|(tenant, spend)| json!({"tenant": tenant, "spend": spend})).collect();
    json!({"currency": currency, "tenants": rows})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_samples_with_escaped_labels_and_sums_them() {
        let text = "# HELP x y\n\
            sluice_requests_total{provider=\"p\",model=\"m\",status=\"200\"} 3\n\
            sluice_requests_total{provider=\"p\",model=\"a\\\"b\",status=\"429\"} 2\n\
            sluice_rate_limit_hits_total{provider=\"p\",model=\"m\",limit_type=\"provider\"} 1\n\
            sluice_rate_limit_hits_total{provider=\"p\",model=\"m\",limit_type=\"tpm\"} 4\n\
            sluice_queue_wait_seconds_bucket{priority=\"i\",task_type=\"d\",le=\"0.5\"} 2\n\
            sluice_queue_wait_seconds_bucket{priority=\"i\",task_type=\"d\",le=\"+Inf\"} 3\n\
            sluice_store_degraded 0\n# EOF\n";
        let samples = parse_samples(text);
        assert_eq!(samples.len(), 7);
        assert_eq!(samples[1].label("model"), "a\"b");
        assert_eq!(samples[6], Sample { name: "sluice_store_degraded".into(), labels: vec![], value: 0.0 });
        let summary = summarize(&samples);
        assert_eq!(summary["requests"]["2xx"], 3.0);
        assert_eq!(summary["requests"]["429"], 2.0);
        assert_eq!(summary["provider_429"], 1.0);
        assert_eq!(summary["gateway_refusals"], 4.0);
        assert_eq!(summary["queue_wait_buckets"], json!([[0.5, 2.0], ["+Inf", 3.0]]));
    }

    #[test]
    fn the_spend_panel_lists_tenants_most_spent_first() {
        let metrics = sluice_server::spend::SpendMetrics::default();
        let mut registry = prometheus_client::registry::Registry::default();
        metrics.register(&mut registry);
        metrics.of("small", "USD").inc_by(0.5);
        metrics.of("big", "USD").inc_by(2.25);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        let panel = per_tenant(&parse_samples(&text), "EUR");
        assert_eq!(panel["currency"], "EUR");
        assert_eq!(panel["tenants"][0]["tenant"], "big");
        assert_eq!(panel["tenants"][0]["spend"], 2.25);
        assert_eq!(panel["tenants"][1]["tenant"], "small");
    }
}
