//! Rate limits over real HTTP: pacing below the limits never sees a 429; bursts do, on the
//! right dimension, with the providers' headers and a `retry-after` that works.

mod common;

use std::time::Duration;

use common::*;
use serde_json::Value;
use sluice_sim::tokens::{Encoding, Tokenizer};
use tokio::time::{Instant, sleep_until};

/// Sends requests at a fixed pace for `run` and returns (ok, 429, other) counts.
async fn paced(
    sim: &sluice_sim::SimHandle,
    path: &str,
    body: &Value,
    per_second: f64,
    run: Duration,
) -> (u64, u64, u64) {
    let client = client();
    let start = Instant::now();
    let step = Duration::from_secs_f64(1.0 / per_second);
    let (mut ok, mut limited, mut other) = (0, 0, 0);
    let mut next = start;
    while next < start + run {
        sleep_until(next).await;
        let response = post(&client, sim, path, body).await;
        match response.status().as_u16() {
            200 => ok += 1,
            429 => limited += 1,
            _ => other += 1,
        }
        let _ = response.bytes().await;
        next += step;
    }
    (ok, limited, other)
}

fn openai_cost_100(model: &str) -> Value {
    // prompt = 3 + "user" + content + 3 reply priming; max_tokens makes the cost exactly 100.
    let t = Tokenizer::new(Encoding::for_openai_model(model));
    let content = "count me in";
    let prompt = 3 + t.count("user") + t.count(content) + 3;
    chat(model, content, 100 - prompt)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_paced_at_99_percent_of_every_limit_never_see_a_429() {
    // time_scale 60: a simulated minute lasts one real second, so 5 s = 5 simulated minutes.
    let openai = start(
        r#"time_scale = 60.0
        seed = 1
        [[models]]
        name = "gpt-4o-mini"
        limits = { rpm = 120, tpm = 12000 }
        "#,
    )
    .await;
    let anthropic = start(
        r#"time_scale = 60.0
        seed = 1
        [[models]]
        name = "claude-test"
        shape = "anthropic"
        completion = { dist = "fixed", tokens = 50 }
        limits = { rpm = 120, itpm = 2400, otpm = 6000 }
        "#,
    )
    .await;
    // Anthropic input: 3 per message + content tokens (cl100k); pad the content to 20 tokens.
    let t = Tokenizer::new(Encoding::Cl100kBase);
    let content =
        "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen";
    assert_eq!(3 + t.count(content), 20);
    let openai_body = openai_cost_100("gpt-4o-mini");
    let anthropic_body = message("claude-test", content, 100);
    let run = Duration::from_secs(5);
    // 99 % of 120 requests per simulated minute = 118.8 per real second; each request costs
    // 100 TPM tokens (99 % of 12,000), 20 input (99 % of 2,400) and 50 output (99 % of 6,000).
    let (a, b) = tokio::join!(
        paced(&openai, "/v1/chat/completions", &openai_body, 118.8, run),
        paced(&anthropic, "/v1/messages", &anthropic_body, 118.8, run),
    );
    for (name, (ok, limited, other), sim) in [("openai", a, &openai), ("anthropic", b, &anthropic)] {
        assert_eq!(limited, 0, "{name}: 429s while pacing at 99 %");
        assert_eq!(other, 0, "{name}: unexpected statuses");
        assert!(ok >= 550, "{name}: only {ok} requests in 5 s");
        let stats = sim.stats();
        assert_eq!(stats.rate_limited.total(), 0, "{name}");
        assert_eq!(stats.served, ok, "{name}");
    }
    // The budget was really used: admitted tokens are ~99 % of 5 simulated minutes of TPM.
    let admitted = openai.stats().tokens.admitted;
    assert!(admitted >= 55_000, "{admitted}");
}

#[tokio::test]
async fn a_burst_of_a_minute_budget_gets_429s_with_headers_and_a_working_retry_after() {
    let sim = start(
        r#"seed = 2
        [[models]]
        name = "gpt-4o"
        limits = { rpm = 60, tpm = 1000000 }
        "#,
    )
    .await;
    let client = client();
    let body = chat("gpt-4o", "hi", 10);
    let mut ok = 0;
    let mut last_429 = None;
    for _ in 0..60 {
        let response = post(&client, &sim, "/v1/chat/completions", &body).await;
        match response.status().as_u16() {
            200 => ok += 1,
            429 => last_429 = Some(response),
            s => panic!("status {s}"),
        }
    }
    // The short window lets 10 % of the minute's budget through in any second.
    assert!((6..=7).contains(&ok), "{ok} admitted in the burst");
    let response = last_429.expect("the burst was limited");
    assert_eq!(header(&response, "x-ratelimit-limit-requests"), "60");
    assert_eq!(header(&response, "x-ratelimit-remaining-requests"), "0");
    assert_eq!(header(&response, "x-ratelimit-limit-tokens"), "1000000");
    let reset = parse_go_duration(header(&response, "x-ratelimit-reset-requests"));
    assert!(reset > Duration::from_secs(50) && reset <= Duration::from_secs(60), "{reset:?}");
    assert!(header(&response, "x-request-id").starts_with("req_"));
    let retry_after: u64 = header(&response, "retry-after").parse().unwrap();
    let retry_after_ms: u64 = header(&response, "retry-after-ms").parse().unwrap();
    assert!((1..=2).contains(&retry_after), "{retry_after}");
    assert!(retry_after_ms <= retry_after * 1000 && retry_after_ms > 0, "{retry_after_ms}");
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["type"], "requests");
    assert_eq!(error["error"]["code"], "rate_limit_exceeded");
    assert_eq!(error["error"]["param"], Value::Null);
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("requests per min (RPM): Limit 60"), "{message}");

    tokio::time::sleep(Duration::from_secs(retry_after)).await;
    let after = post(&client, &sim, "/v1/chat/completions", &body).await;
    assert_eq!(after.status(), 200, "a request after retry-after succeeds");
    let stats = stats_over_http(&client, &sim).await;
    assert_eq!(stats.rate_limited.requests, 60 - ok);
    assert_eq!(stats.rate_limited.tokens, 0);
    assert_eq!(stats.served, ok + 1);
}

#[tokio::test]
async fn tpm_bound_work_is_rejected_on_tokens_and_rpm_bound_on_requests() {
    let sim = start(
        r#"[[models]]
        name = "tpm-bound"
        limits = { rpm = 10000, tpm = 6000 }
        [[models]]
        name = "rpm-bound"
        limits = { rpm = 20, tpm = 10000000 }
        "#,
    )
    .await;
    let client = client();
    // 500 tokens each: the 1 s window holds 600 tokens, so the second is refused on tokens.
    let big = chat("tpm-bound", "hello", 490);
    let first = post(&client, &sim, "/v1/chat/completions", &big).await;
    assert_eq!(first.status(), 200);
    let second = post(&client, &sim, "/v1/chat/completions", &big).await;
    assert_eq!(second.status(), 429);
    assert_eq!(header(&second, "x-ratelimit-limit-tokens"), "6000");
    let body: Value = second.json().await.unwrap();
    assert_eq!(body["error"]["type"], "tokens");
    assert!(body["error"]["message"].as_str().unwrap().contains("tokens per min (TPM)"));

    let small = chat("rpm-bound", "hello", 5);
    let statuses: Vec<u16> = {
        let mut v = Vec::new();
        for _ in 0..5 {
            v.push(post(&client, &sim, "/v1/chat/completions", &small).await.status().as_u16());
        }
        v
    };
    assert_eq!(statuses[..2], [200, 200], "{statuses:?}");
    let limited = post(&client, &sim, "/v1/chat/completions", &small).await;
    assert_eq!(limited.status(), 429);
    let body: Value = limited.json().await.unwrap();
    assert_eq!(body["error"]["type"], "requests");

    let stats = stats_over_http(&client, &sim).await;
    assert_eq!(stats.models["tpm-bound"].rate_limited, 1);
    assert!(stats.models["rpm-bound"].rate_limited >= 1);
    assert_eq!(stats.rate_limited.tokens, 1);
    assert_eq!(stats.rate_limited.requests, stats.models["rpm-bound"].rate_limited);
}

#[tokio::test]
async fn one_large_request_fits_an_empty_window_but_never_more_than_the_bucket() {
    let sim = start("[[models]]\nname = \"gpt-4\"\nlimits = { tpm = 6000 }\n").await;
    let client = client();
    // 3,000 tokens: five times the window allowance, admitted because the window is empty.
    let large = post(&client, &sim, "/v1/chat/completions", &chat("gpt-4", "hi", 2990)).await;
    assert_eq!(large.status(), 200);
    // 7,000 tokens can never fit a 6,000 bucket: 429 without retry-after.
    let too_large = post(&client, &sim, "/v1/chat/completions", &chat("gpt-4", "hi", 7000)).await;
    assert_eq!(too_large.status(), 429);
    assert!(too_large.headers().get("retry-after").is_none());
    let body: Value = too_large.json().await.unwrap();
    assert!(body["error"]["message"].as_str().unwrap().starts_with("Request too large"));
}

#[tokio::test]
async fn anthropic_limits_use_their_own_dimensions_and_headers() {
    let sim = start(
        r#"[[models]]
        name = "claude-a"
        shape = "anthropic"
        limits = { rpm = 1000, itpm = 600, otpm = 100000 }
        cached_input_fraction = 0.5
        [[models]]
        name = "claude-b"
        shape = "anthropic"
        completion = { dist = "fixed", tokens = 400 }
        limits = { rpm = 1000, itpm = 100000, otpm = 600 }
        "#,
    )
    .await;
    let client = client();
    let long = "word ".repeat(200);
    let input = 3 + Tokenizer::new(Encoding::Cl100kBase).count(&long);
    let cached = input / 2;
    // ~200 input tokens, half of them cache reads: ~100 uncached count against 600 ITPM.
    let ok = post(&client, &sim, "/v1/messages", &message("claude-a", &long, 10)).await;
    assert_eq!(ok.status(), 200);
    assert_eq!(header(&ok, "anthropic-ratelimit-input-tokens-limit"), "600");
    let remaining: u64 = header(&ok, "anthropic-ratelimit-input-tokens-remaining").parse().unwrap();
    assert_eq!(remaining, 600 - (input - cached));
    let reset = header(&ok, "anthropic-ratelimit-input-tokens-reset");
    assert!(reset.ends_with('Z') && reset.contains('T'), "{reset}");
    assert!(header(&ok, "request-id").starts_with("req_"));
    let body: Value = ok.json().await.unwrap();
    let usage = &body["usage"];
    assert_eq!(usage["cache_read_input_tokens"].as_u64().unwrap(), cached);
    assert_eq!(usage["input_tokens"].as_u64().unwrap(), input - cached);
    let limited = post(&client, &sim, "/v1/messages", &message("claude-a", &long, 10)).await;
    assert_eq!(limited.status(), 429);
    assert!(limited.headers().contains_key("retry-after"));
    let error: Value = limited.json().await.unwrap();
    assert_eq!(error["type"], "error");
    assert_eq!(error["error"]["type"], "rate_limit_error");
    assert!(error["error"]["message"].as_str().unwrap().contains("input tokens per min"));

    // OTPM counts actual output after generation: 400 > 60 (window), the next is refused.
    let first = post(&client, &sim, "/v1/messages", &message("claude-b", "hi", 1000)).await;
    assert_eq!(first.status(), 200);
    let second = post(&client, &sim, "/v1/messages", &message("claude-b", "hi", 1000)).await;
    assert_eq!(second.status(), 429);
    assert_eq!(header(&second, "anthropic-ratelimit-output-tokens-remaining"), "200");
    let stats = sim.stats();
    assert_eq!(stats.rate_limited.input_tokens, 1);
    assert_eq!(stats.rate_limited.output_tokens, 1);
    assert_eq!(stats.tokens.cached_input_used, cached);
}

#[tokio::test]
async fn concurrency_cap_answers_529_when_configured() {
    let sim = start(
        r#"[[models]]
        name = "claude-c"
        shape = "anthropic"
        latency = { ttft_ms = 300.0 }
        limits = { max_concurrency = 2, concurrency_status = 529 }
        "#,
    )
    .await;
    let client = client();
    let body = message("claude-c", "hi", 5);
    let requests = (0..4).map(|_| post(&client, &sim, "/v1/messages", &body));
    let statuses: Vec<u16> =
        futures_util::future::join_all(requests).await.iter().map(|r| r.status().as_u16()).collect();
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 2, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 529).count(), 2, "{statuses:?}");
    assert_eq!(sim.stats().rate_limited.concurrency, 2);
}

#[tokio::test]
async fn limits_change_at_runtime_and_reset_refills() {
    let sim = start("[[models]]\nname = \"gpt-4o\"\nlimits = { rpm = 10, window_fraction = 1.0 }\n").await;
    let client = client();
    let body = chat("gpt-4o", "hi", 5);
    for _ in 0..10 {
        assert_eq!(post(&client, &sim, "/v1/chat/completions", &body).await.status(), 200);
    }
    assert_eq!(post(&client, &sim, "/v1/chat/completions", &body).await.status(), 429);
    // A tier upgrade over HTTP: 1,000 RPM, keeping the 10 used (the refused request found
    // the bucket empty and a rejected request never pushes it into debt).
    let upgrade = serde_json::json!({"model": "gpt-4o", "limits": {"rpm": 1000, "window_fraction": 1.0}});
    let response = client.post(format!("{}/_limits", sim.url())).json(&upgrade).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let ok = post(&client, &sim, "/v1/chat/completions", &body).await;
    assert_eq!(ok.status(), 200);
    assert_eq!(header(&ok, "x-ratelimit-limit-requests"), "1000");
    assert_eq!(header(&ok, "x-ratelimit-remaining-requests"), "989");
    let limits: Value = client.get(format!("{}/_limits", sim.url())).send().await.unwrap().json().await.unwrap();
    assert_eq!(limits["gpt-4o"]["rpm"], 1000);
    let bad = serde_json::json!({"model": "nope", "limits": {}});
    assert_eq!(client.post(format!("{}/_limits", sim.url())).json(&bad).send().await.unwrap().status(), 400);
    // Reset clears stats and refills.
    assert_eq!(client.post(format!("{}/_reset", sim.url())).send().await.unwrap().status(), 200);
    assert_eq!(sim.stats().requests, 0);
    let fresh = post(&client, &sim, "/v1/chat/completions", &body).await;
    assert_eq!(header(&fresh, "x-ratelimit-remaining-requests"), "999");
}

#[tokio::test]
async fn model_timeline_counts_each_model_and_its_busiest_minute() {
    let config = "model_timeline = true\n[[models]]\nname = \"a\"\nlimits = { rpm = 3, window_fraction = 1.0 }\n[[models]]\nname = \"b\"\n";
    let sim = start(config).await;
    let client = client();
    for _ in 0..4 {
        post(&client, &sim, "/v1/chat/completions", &chat("a", "hi", 5)).await;
    }
    post(&client, &sim, "/v1/chat/completions", &chat("b", "hi", 5)).await;
    let stats: Value = client.get(format!("{}/_stats", sim.url())).send().await.unwrap().json().await.unwrap();
    // The refused fourth request of `a` is not an admission.
    assert_eq!(stats["busiest_minute"]["a"], 3);
    assert_eq!(stats["busiest_minute"]["b"], 1);
    let seconds: u64 = stats["model_timeline"]["a"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(seconds, 3);
    // A reset keeps the per-model accounting on and starts it over.
    sim.reset();
    post(&client, &sim, "/v1/chat/completions", &chat("b", "hi", 5)).await;
    let snap = sim.stats();
    assert_eq!(snap.busiest_minute.get("a"), None);
    assert_eq!(snap.busiest_minute["b"], 1);
    // Off by default: `/_stats` has neither field.
    let plain = start("[[models]]\nname = \"a\"\n").await;
    post(&client, &plain, "/v1/chat/completions", &chat("a", "hi", 5)).await;
    let stats: Value = client.get(format!("{}/_stats", plain.url())).send().await.unwrap().json().await.unwrap();
    assert!(stats.get("busiest_minute").is_none() && stats.get("model_timeline").is_none(), "{stats}");
}
