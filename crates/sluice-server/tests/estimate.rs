//! Admission sees what documents cost: a large PDF is priced by its pages, so a token
//! limit that a text-only estimate would have slipped under refuses or holds it, over real
//! HTTP against the simulated provider (which reports the same media rule as usage).
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

mod common;

use base64::Engine as _;
use common::{Env, KEY, sha, start};
use serde_json::{Value, json};
use sluice_sim::config::{Completion, ModelConfig, SimConfig};

/// `gpt-4o-mini` behind a 20,000 TPM deployment; `claude-sonnet-4-5` behind 60,000 input TPM,
/// and behind 5,000 output TPM for `thinker`.
async fn env() -> Env {
    let openai = ModelConfig { completion: Completion::Fixed { tokens: 8 }, ..ModelConfig::openai("gpt-4o-mini") };
    let claude =
        ModelConfig { completion: Completion::Fixed { tokens: 8 }, ..ModelConfig::anthropic("claude-sonnet-4-5") };
    let policy = format!(
        r#"
[[deployments]]
name = "mini"
provider = "sim"
model = "gpt-4o-mini"
limits = {{ rpm = 1000, tpm = 20000 }}

[[deployments]]
name = "sonnet"
provider = "sim-anthropic"
model = "claude-sonnet-4-5"
limits = {{ rpm = 1000, input_tpm = 60000, output_tpm = 100000 }}

[[deployments]]
name = "sonnet-tight"
provider = "sim-anthropic"
model = "claude-sonnet-4-5"
limits = {{ rpm = 1000, output_tpm = 5000 }}

[[models]]
name = "fast"
deployment = "mini"
default_max_tokens = 16

[[models]]
name = "thinker"
deployment = "sonnet-tight"
default_max_tokens = 1024

[[models]]
name = "smart"
deployment = "sonnet"

[[tenants]]
name = "acme"

[[keys]]
id = "acme-1"
tenant = "acme"
sha256 = "{}"
"#,
        sha(KEY)
    );
    start(SimConfig { models: vec![openai, claude], ..SimConfig::default() }, &policy).await
}

/// A well-formed PDF of `pages` pages, about 20 KB each (240 KB for 12).
fn pdf(pages: usize) -> String {
    let mut doc = String::from("%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n");
    doc += &format!("2 0 obj << /Type /Pages /Count {pages} >> endobj\n");
    let text = "lorem ipsum ".repeat(20 * 1024 / 12);
    for i in 0..pages {
        doc +=
            &format!("{} 0 obj << /Type /Page /Parent 2 0 R >> stream\nBT ({text}) Tj ET\nendstream endobj\n", 3 + i);
    }
    doc += "trailer << /Root 1 0 R >>\n%%EOF\n";
    base64::engine::general_purpose::STANDARD.encode(doc)
}

fn openai_chat(with_pdf: bool) -> Value {
    let mut content = vec![json!({"type": "text", "text": "Summarize the report."})];
    if with_pdf {
        let data = format!("data:application/pdf;base64,{}", pdf(12));
        content.push(json!({"type": "file", "file": {"filename": "report.pdf", "file_data": data}}));
    }
    json!({"model": "fast", "max_tokens": 16, "messages": [{"role": "user", "content": content}]})
}

#[tokio::test]
async fn a_240_kb_pdf_is_refused_by_a_tpm_limit_its_text_fits_under() {
    let env = env().await;
    // 12 pages at 1,765 tokens each: more than the deployment's whole minute.
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &openai_chat(true)).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("request_exceeds_limit")), "{body}");
    assert_eq!(body["error"]["limiter"], "tpm");
    assert_eq!(body["error"]["gateway_decision"], "rejected_before_send");
    let estimated = body["error"]["estimated_input_tokens"].as_u64().unwrap();
    assert!(estimated >= 12 * 1_765, "{estimated}");
    assert_eq!(env.sim.stats().requests, 0, "nothing was sent");
    // Its text alone is admitted and served.
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &openai_chat(false)).await;
    assert_eq!(status, 200, "{body}");
    env.shutdown().await;
}

#[tokio::test]
async fn a_served_pdf_holds_the_input_budget_until_it_refills() {
    let env = env().await;
    let source = json!({"type": "base64", "media_type": "application/pdf", "data": pdf(12)});
    let body = json!({"model": "smart", "max_tokens": 16, "messages": [{"role": "user", "content": [
        {"type": "document", "source": source}, {"type": "text", "text": "Summarize the report."}]}]});
    // 12 pages at 3,000 tokens: 36,000 of the 60,000 input tokens a minute, as
    // count_tokens (admission's estimate, answered by the gateway) says too.
    let (status, _, counted) = env.post("/v1/messages/count_tokens", KEY, &body).await;
    assert_eq!(status, 200, "{counted}");
    let estimate = counted["input_tokens"].as_u64().unwrap();
    assert!((12 * 3_000..12 * 3_000 + 50).contains(&estimate), "{estimate}");
    let (status, _, first) = env.post("/v1/messages", KEY, &body).await;
    assert_eq!(status, 200, "{first}");
    let used = first["usage"]["input_tokens"].as_u64().unwrap();
    // The simulated provider prices the document by its pages too (not as base64 text).
    assert!((12 * 3_000..12 * 3_000 + 50).contains(&used), "{used}");
    // Settled at what the provider reported, the bucket has no room for a second copy.
    let (status, _, second) = env.post("/v1/messages", KEY, &body).await;
    assert_eq!(status, 429, "{second}");
    assert_eq!(second["error"]["limiter"], "input_tpm", "{second}");
    assert_eq!(second["error"]["gateway_decision"], "rejected_before_send", "{second}");
    assert_eq!(env.sim.stats().requests, 1);
    env.shutdown().await;
}

#[tokio::test]
async fn an_openai_request_thinking_on_claude_reserves_its_thinking_budget_too() {
    let env = env().await;
    let ask = |effort: &str| json!({"model": "thinker", "reasoning_effort": effort, "messages": [{"role": "user", "content": "Think."}]});
    // No limit from the client: Claude is asked for the default 1,024 plus the budget of
    // `high` (4,096), 5,120 output tokens, more than the deployment's whole minute.
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &ask("high")).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("request_exceeds_limit")), "{body}");
    assert_eq!(body["error"]["limiter"], "output_tpm", "{body}");
    assert_eq!(env.sim.stats().requests, 0, "nothing was sent");
    // `low` asks for 1,024 + 1,024 and is served.
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &ask("low")).await;
    assert_eq!(status, 200, "{body}");
    assert!(body["choices"][0]["message"]["reasoning_content"].is_string(), "{body}");
    env.shutdown().await;
}
