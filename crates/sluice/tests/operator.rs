//! What an operator meets first: the container image's instructions, `sluice healthcheck`,
//! `sluice hash-key` on standard input, the quick-start config served with only an OpenAI
//! key, plain (uncoloured) logs when standard error is a file, the access log and the
//! traces exported over OTLP.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

use sluice_sim::config::{ModelConfig, SimConfig};

const BINARY: &str = env!("CARGO_BIN_EXE_sluice");
/// The prompt the tests send: it must never appear in a log.
const PROMPT: &str = "Say hi to the access log";
/// The quick start's gateway key.
const KEY: &str = "sk-local-quickstart";

fn repo_file(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::read_to_string(root.join(path)).unwrap()
}

/// A `sluice serve` child in its own working directory, with exactly the environment
/// given (nothing inherited); killed when dropped.
struct Served {
    url: String,
    admin_url: String,
    child: Child,
    dir: tempfile::TempDir,
}

impl Served {
    /// Starts it, or returns what it printed when it exits before listening.
    fn start(config: &str, env: &[(&str, &str)]) -> Result<Self, String> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("sluice.toml"), config).unwrap();
        let mut child = Command::new(BINARY)
            .args(["serve", "--config", "sluice.toml", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
            .current_dir(dir.path())
            .env_clear()
            .envs(env.iter().copied())
            .env("SLUICE_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.path().join("stderr.log")).unwrap())
            .spawn()
            .unwrap();
        let (mut line, mut admin) = (String::new(), String::new());
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        stdout.read_line(&mut line).unwrap();
        stdout.read_line(&mut admin).unwrap();
        let mut served = Self { url: String::new(), admin_url: String::new(), child, dir };
        match (
            line.trim().strip_prefix("sluice listening on "),
            admin.trim().strip_prefix("sluice admin listening on "),
        ) {
            (Some(url), Some(admin)) => {
                served.url = url.to_owned();
                served.admin_url = admin.to_owned();
                Ok(served)
            }
            _ => Err(served.stderr()),
        }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr.log")).unwrap()
    }

    /// The log once it contains `text` (it is written just after the listening line), or
    /// as it is after 20 s.
    fn stderr_once(&self, text: &str) -> String {
        for _ in 0..200 {
            let log = self.stderr();
            if log.contains(text) {
                return log;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        self.stderr()
    }
}

impl Served {
    /// Sends SIGTERM and waits (up to 30 s) for the process to exit.
    fn terminate(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        for _ in 0..300 {
            if self.child.try_wait().unwrap().is_some() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("the gateway did not exit on SIGTERM:\n{}", self.stderr());
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(BINARY)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// The Dockerfile's instructions, continuation lines joined, comments dropped.
fn instructions(dockerfile: &str) -> Vec<String> {
    let joined = dockerfile.replace("\\\n", " ");
    joined.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(str::to_owned).collect()
}

#[test]
fn the_image_checks_health_with_sluice_runs_unprivileged_and_keeps_jobs_on_a_volume() {
    let lines = instructions(&repo_file("deploy/Dockerfile"));
    let stage = lines.iter().rposition(|l| l.starts_with("FROM ")).unwrap();
    let last = &lines[stage..];
    let find = |word: &str| last.iter().filter(|l| l.starts_with(word)).cloned().collect::<Vec<_>>();
    // Exec form, no shell: the old `/bin/sh -c "exec 3<>/dev/tcp/…"` failed under dash.
    let health = find("HEALTHCHECK ");
    assert_eq!(health.len(), 1, "{health:?}");
    let cmd = health[0].split_once(" CMD ").unwrap().1.trim();
    assert!(cmd.starts_with(r#"["/usr/local/bin/sluice", "healthcheck""#), "{cmd}");
    assert!(!cmd.contains("/bin/sh") && cmd.contains("/healthz"), "{cmd}");
    let user = find("USER ");
    assert_eq!(user.len(), 1);
    let uid = user[0]["USER ".len()..].split(':').next().unwrap();
    assert!(uid != "root" && uid != "0", "{uid}");
    assert_eq!(find("WORKDIR "), ["WORKDIR /var/lib/sluice"]);
    assert_eq!(find("VOLUME "), [r#"VOLUME ["/var/lib/sluice"]"#]);
    assert_eq!(find("EXPOSE "), ["EXPOSE 8080 9090"]);
    assert!(find("ENV ").iter().any(|l| l.contains("SLUICE_LISTEN=0.0.0.0:8080")), "{:?}", find("ENV "));
    // The admin plane on a port of its own, for the platform's network rules to keep apart.
    assert!(find("ENV ").iter().any(|l| l.contains("SLUICE_ADMIN_LISTEN=0.0.0.0:9090")), "{:?}", find("ENV "));
    // Dependencies compile once: later builds reuse the cached target directory.
    let build = lines[..stage].iter().find(|l| l.contains("cargo build")).unwrap();
    assert!(build.contains("--mount=type=cache,target=/src/target") && build.contains("--locked"), "{build}");
}

#[test]
fn the_build_context_leaves_build_output_and_local_state_out() {
    let ignore = repo_file(".dockerignore");
    let patterns: Vec<&str> = ignore.lines().map(str::trim).filter(|l| !l.starts_with('#')).collect();
    for needed in ["target/", "**/target/", ".git/", "*.redb"] {
        assert!(patterns.contains(&needed), "{needed} is not excluded");
    }
    // Nothing the build reads is excluded.
    for kept in ["Cargo.toml", "Cargo.lock", "crates", "crates/"] {
        assert!(!patterns.contains(&kept), "{kept} is excluded");
    }
}

#[test]
fn healthcheck_passes_on_a_ready_gateway_and_fails_on_a_closed_port() {
    let sim = SimProcess::start();
    let gateway = Served::start(&quickstart_on(&sim.url), &[("OPENAI_API_KEY", "sk-test")]).unwrap();
    let ready = run(&["healthcheck", "--url", &format!("{}/readyz", gateway.url), "--timeout", "10s"], "");
    assert_eq!(ready.status.code(), Some(0), "{}", String::from_utf8_lossy(&ready.stderr));
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let down = run(&["healthcheck", "--url", &format!("http://{closed}/readyz")], "");
    assert_eq!(down.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&down.stderr).contains("unhealthy"));
    // A server that answers, but not 200, is not healthy either.
    let missing = run(&["healthcheck", "--url", &format!("{}/no-such-path", gateway.url), "--timeout", "10s"], "");
    assert_eq!(missing.status.code(), Some(1), "{}", String::from_utf8_lossy(&missing.stderr));
}

#[test]
fn logs_written_to_a_file_carry_no_colour_codes() {
    let sim = SimProcess::start();
    let gateway = Served::start(&quickstart_on(&sim.url), &[("OPENAI_API_KEY", "sk-test")]).unwrap();
    let log = gateway.stderr_once("serving");
    assert!(log.contains("serving"), "{log}");
    assert!(!log.contains('\u{1b}'), "ANSI escape codes in a log file:\n{log:?}");
}

#[test]
fn a_streams_access_line_says_whether_it_completed_or_its_client_cut_it() {
    use sluice_sim::config::Completion;
    use sluice_sim::latency::LatencyConfig;
    let latency = LatencyConfig { per_token_ms: 20.0, chunk_tokens: 1, ..LatencyConfig::default() };
    let model = ModelConfig {
        completion: Completion::Fixed { tokens: 40 },
        latency: Some(latency),
        ..ModelConfig::openai("gpt-4o-mini")
    };
    let sim = SimProcess::start_with(SimConfig { models: vec![model], ..SimConfig::default() });
    let env = [("OPENAI_API_KEY", "sk-test"), ("SLUICE_LOG_JSON", "true")];
    let gateway = Served::start(&quickstart_on(&sim.url), &env).unwrap();
    let (whole, cut) = ("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb2");
    assert_eq!(sim.stream(&gateway.url, whole, false), 200);
    assert_eq!(sim.stream(&gateway.url, cut, true), 200);
    let log = gateway.stderr_once(cut);
    let lines = access_lines(&log);
    let line = |trace: &str| lines.iter().find(|l| l["trace_id"] == trace).unwrap_or_else(|| panic!("{log}")).clone();
    let (whole, cut) = (line(whole), line(cut));
    // Every field docs/operations.md documents is on a whole stream's line (the stream
    // has them all: a time to first token, usage, a provider).
    let docs = repo_file("docs/operations.md");
    let section = docs.split("### Access log").nth(1).unwrap();
    let table = section.split("\n\n").find(|block| block.starts_with("| field |")).unwrap();
    let documented: Vec<&str> = table
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .flat_map(|l| l.split(" |").next().unwrap().split(", "))
        .map(|f| f.trim_matches('`'))
        .collect();
    assert!(documented.len() >= 25, "{documented:?}");
    for field in documented {
        // `cost` and `currency` need a priced deployment (the quick start's has a preset).
        assert!(whole.get(field).is_some(), "documented field `{field}` missing from {whole}");
    }
    assert_eq!(whole["stream"], "completed", "{whole}");
    assert_eq!(cut["stream"], "client_cut", "{cut}");
    // Both were answered 200 and admitted: the stream field is what tells them apart.
    for l in [&whole, &cut] {
        assert_eq!(l["status"], 200);
        assert_eq!(l["decision"], "admitted");
        assert!(l["output_tokens"].as_u64().unwrap() > 0, "{l}");
    }
}

#[test]
fn hash_key_reads_the_key_from_standard_input_as_from_an_argument() {
    let from_arg = run(&["hash-key", "sk-local-quickstart"], "");
    let from_stdin = run(&["hash-key"], "sk-local-quickstart\n");
    assert!(from_arg.status.success() && from_stdin.status.success());
    assert_eq!(from_arg.stdout, from_stdin.stdout);
    let expected = format!("{}\n", hex::encode(sluice_config::hash_key("sk-local-quickstart")));
    assert_eq!(String::from_utf8(from_stdin.stdout).unwrap(), expected);
    let empty = run(&["hash-key"], "");
    assert!(!empty.status.success());
    assert!(String::from_utf8_lossy(&empty.stderr).contains("no key given"));
}

/// The quick-start config with its provider pointed at `url` (the simulator).
fn quickstart_on(url: &str) -> String {
    let config = repo_file("examples/quickstart.toml");
    assert!(config.contains("base_url = \"https://api.openai.com\""));
    config.replace("https://api.openai.com", url)
}

/// The simulated provider on a runtime of its own (these tests are synchronous).
struct SimProcess {
    url: String,
    handle: sluice_sim::SimHandle,
    runtime: tokio::runtime::Runtime,
}

impl SimProcess {
    fn start() -> Self {
        Self::start_with(SimConfig { models: vec![ModelConfig::openai("gpt-4o-mini")], ..SimConfig::default() })
    }

    fn start_with(config: SimConfig) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let handle = runtime.block_on(sluice_sim::SimProvider::start(config)).unwrap();
        Self { url: handle.url(), handle, runtime }
    }

    /// A stream of about `tokens` output tokens, 20 ms apart, through `gateway`: read to its
    /// end, or (`cut`) left after its first piece.
    fn stream(&self, gateway: &str, trace: &str, cut: bool) -> u16 {
        self.runtime.block_on(async {
            let body = serde_json::json!({"model": "gpt-4o-mini", "stream": true,
                "messages": [{"role": "user", "content": PROMPT}]});
            let traceparent = format!("00-{trace}-00f067aa0ba902b7-01");
            let mut response = reqwest::Client::new()
                .post(format!("{gateway}/v1/chat/completions"))
                .bearer_auth(KEY)
                .header("traceparent", traceparent)
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            if cut {
                assert!(response.chunk().await.unwrap().is_some(), "a first piece");
                drop(response);
            } else {
                while response.chunk().await.unwrap().is_some() {}
            }
            status
        })
    }

    /// `POST {gateway}/v1/chat/completions` with `key`: the status and body.
    fn chat(&self, gateway: &str, key: &str) -> (u16, String) {
        self.chat_as(gateway, key, "gpt-4o-mini", &[])
    }

    /// [`chat`](Self::chat) naming `model`, with more `headers`.
    fn chat_as(&self, gateway: &str, key: &str, model: &str, headers: &[(&str, &str)]) -> (u16, String) {
        let body = serde_json::json!({"model": model, "messages": [{"role": "user", "content": PROMPT}]});
        self.post(gateway, key, &body, headers)
    }

    /// `POST {gateway}/v1/chat/completions` with `body`, read to its end.
    fn post(&self, gateway: &str, key: &str, body: &serde_json::Value, headers: &[(&str, &str)]) -> (u16, String) {
        self.runtime.block_on(async {
            let mut request = reqwest::Client::new().post(format!("{gateway}/v1/chat/completions")).bearer_auth(key);
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            let response = request.json(body).send().await.unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        })
    }
}

#[test]
fn the_quick_start_serves_with_only_an_openai_key() {
    let sim = SimProcess::start();
    let only_openai = [("OPENAI_API_KEY", "sk-test")];
    let check = Command::new(BINARY)
        .args(["check-config", "quickstart.toml"])
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples"))
        .env_clear()
        .envs(only_openai)
        .output()
        .unwrap();
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stderr));
    let gateway = Served::start(&quickstart_on(&sim.url), &only_openai).unwrap();
    let (status, body) = sim.chat(&gateway.url, "sk-local-quickstart");
    assert_eq!(status, 200, "{body}");
    assert_eq!(sim.handle.stats().requests, 1);
    // The full example needs an Anthropic key file as well: it is not the quick start.
    let full = repo_file("examples/sluice.toml").replace("https://api.openai.com", &sim.url);
    let refused = Served::start(&full, &only_openai).err().expect("the full example served without its key file");
    assert!(refused.contains("anthropic"), "{refused}");
    let readme = repo_file("README.md");
    assert!(readme.contains("sluice serve --config examples/quickstart.toml"), "the README's quick start");
}

/// The access-log lines (JSON) in `log`.
fn access_lines(log: &str) -> Vec<serde_json::Value> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["target"] == "sluice::access")
        .collect()
}

#[test]
fn a_request_leaves_one_access_log_line_with_its_trace_tenant_and_status_and_no_secret() {
    let sim = SimProcess::start();
    let env = [("OPENAI_API_KEY", "sk-test-provider-secret"), ("SLUICE_LOG_JSON", "true")];
    let gateway = Served::start(&quickstart_on(&sim.url), &env).unwrap();
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let traceparent = format!("00-{trace}-00f067aa0ba902b7-01");
    let (status, body) = sim.chat_as(&gateway.url, KEY, "gpt-4o-mini", &[("traceparent", &traceparent)]);
    assert_eq!(status, 200, "{body}");
    let log = gateway.stderr_once(trace);
    let lines = access_lines(&log);
    assert_eq!(lines.len(), 1, "{log}");
    let fields = &lines[0];
    assert_eq!(fields["trace_id"], trace);
    assert_eq!(fields["tenant"], "me");
    assert_eq!(fields["key_id"], "me-1");
    assert_eq!(fields["model_profile"], "gpt-4o-mini");
    assert_eq!(fields["deployments"], "openai-gpt-4o-mini");
    assert_eq!(fields["status"], 200);
    assert_eq!(fields["decision"], "admitted");
    assert_eq!(fields["retries"], 0);
    assert!(fields["tokens_estimated"].as_u64().unwrap() > 0, "{fields}");
    assert!(fields["tokens_used"].as_u64().unwrap() > 0, "{fields}");
    // Flat, as a log query filters: no nested `fields`, the route and the usage split.
    assert!(fields.get("fields").is_none(), "{fields}");
    assert_eq!(fields["method"], "POST");
    assert_eq!(fields["route"], "/v1/chat/completions");
    assert_eq!(fields["provider"], "openai");
    let (input, output) = (fields["input_tokens"].as_u64().unwrap(), fields["output_tokens"].as_u64().unwrap());
    assert_eq!(input + output, fields["tokens_used"].as_u64().unwrap(), "{fields}");
    assert_eq!(fields["cached_tokens"], 0);
    assert_eq!(fields["stream"], "", "not a stream");
    for secret in [KEY, "sk-test-provider-secret", PROMPT] {
        assert!(!log.contains(secret), "{secret:?} in the log:\n{log}");
    }
}

#[test]
fn requests_beside_the_proxied_road_leave_their_access_line_too() {
    let sim = SimProcess::start();
    let env = [("OPENAI_API_KEY", "sk-test"), ("SLUICE_LOG_JSON", "true")];
    let gateway = Served::start(&quickstart_on(&sim.url), &env).unwrap();
    let traces = ["0af7651916cd43dd8448eb211c80319c", "1bf7651916cd43dd8448eb211c80319d"];
    let calls = [
        (reqwest::Method::POST, "/v1/images/generations", traces[0]),
        (reqwest::Method::GET, "/v1/responses/resp_unknown", traces[1]),
    ];
    for (method, path, trace) in calls {
        let status = sim.runtime.block_on(async {
            let body = serde_json::json!({"model": "gpt-4o-mini", "prompt": PROMPT});
            let request = reqwest::Client::new()
                .request(method, format!("{}{path}", gateway.url))
                .bearer_auth(KEY)
                .header("traceparent", format!("00-{trace}-00f067aa0ba902b7-01"));
            let request = if path.contains("images") { request.json(&body) } else { request };
            request.send().await.unwrap().status().as_u16()
        });
        assert_eq!(status, 404, "{path}");
    }
    let log = gateway.stderr_once(traces[1]);
    let lines = access_lines(&log);
    for trace in traces {
        let mine: Vec<_> = lines.iter().filter(|l| l["trace_id"] == trace).collect();
        assert_eq!(mine.len(), 1, "one line for {trace}:\n{log}");
        assert_eq!(mine[0]["status"], 404);
        assert_eq!(mine[0]["tenant"], "me");
    }
    assert!(!log.contains(KEY) && !log.contains(PROMPT), "no key or prompt in the log:\n{log}");
}

#[test]
fn with_the_access_log_off_refusals_are_still_logged_and_successes_are_not() {
    let sim = SimProcess::start();
    let env = [("OPENAI_API_KEY", "sk-test"), ("SLUICE_LOG_JSON", "true")];
    let config = quickstart_on(&sim.url).replace("[server]\n", "[server]\naccess_log = false\n");
    let gateway = Served::start(&config, &env).unwrap();
    assert_eq!(sim.chat(&gateway.url, KEY).0, 200);
    let (status, body) = sim.chat_as(&gateway.url, KEY, "no-such-model", &[]);
    assert_eq!(status, 404, "{body}");
    // The 404's line is written before its answer; the 200's, had it been, before that.
    let log = gateway.stderr_once("sluice::access");
    let lines = access_lines(&log);
    assert_eq!(lines.len(), 1, "{log}");
    assert_eq!(lines[0]["status"], 404);
    assert_eq!(lines[0]["decision"], "none");
    assert_eq!(lines[0]["tenant"], "me");
}

#[test]
fn a_stream_leaves_one_access_log_line_once_it_ends_with_its_first_piece_time_and_usage() {
    let sim = SimProcess::start();
    let env = [("OPENAI_API_KEY", "sk-test"), ("SLUICE_LOG_JSON", "true")];
    let gateway = Served::start(&quickstart_on(&sim.url), &env).unwrap();
    let body = serde_json::json!({
        "model": "gpt-4o-mini", "stream": true, "max_tokens": 16,
        "messages": [{"role": "user", "content": PROMPT}],
    });
    let (status, text) = sim.post(&gateway.url, KEY, &body, &[]);
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("data: [DONE]"), "{text}");
    let log = gateway.stderr_once("sluice::access");
    let lines = access_lines(&log);
    assert_eq!(lines.len(), 1, "{log}");
    let fields = &lines[0];
    assert_eq!(fields["status"], 200);
    let ttft = fields["ttft_ms"].as_u64().unwrap_or_else(|| panic!("no ttft_ms: {fields}"));
    assert!(ttft <= fields["total_ms"].as_u64().unwrap(), "{fields}");
    // Written when the stream ended: the settled usage is in it.
    assert!(fields["tokens_used"].as_u64().unwrap() > 0, "{fields}");
    assert!(!log.contains(PROMPT));
}

/// One span an OTLP collector received: trace id, span id, parent span id (hex), name,
/// kind, attributes (values as text) and events (name and attributes).
#[derive(Debug, Clone)]
struct Received {
    trace: String,
    span: String,
    parent: String,
    name: String,
    kind: i32,
    attributes: std::collections::BTreeMap<String, String>,
    events: Vec<(String, std::collections::BTreeMap<String, String>)>,
}

/// OTLP attributes as text.
fn attribute_map(
    attributes: &[opentelemetry_proto::tonic::common::v1::KeyValue],
) -> std::collections::BTreeMap<String, String> {
    use opentelemetry_proto::tonic::common::v1::any_value::Value;
    let text = |v: &Option<Value>| match v {
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::IntValue(i)) => i.to_string(),
        Some(Value::BoolValue(b)) => b.to_string(),
        Some(Value::DoubleValue(d)) => d.to_string(),
        // An array of strings as its items joined by commas.
        Some(Value::ArrayValue(items)) => items
            .values
            .iter()
            .map(|item| match &item.value {
                Some(Value::StringValue(s)) => s.clone(),
                other => format!("{other:?}"),
            })
            .collect::<Vec<_>>()
            .join(","),
        other => format!("{other:?}"),
    };
    attributes.iter().map(|kv| (kv.key.clone(), text(&kv.value.as_ref().and_then(|v| v.value.clone())))).collect()
}

/// A collector stub: `POST /v1/traces` (OTLP/HTTP protobuf) on 127.0.0.1, recording spans.
async fn collector() -> (String, Arc<Mutex<Vec<Received>>>) {
    use prost::Message as _;
    let spans: Arc<Mutex<Vec<Received>>> = Arc::default();
    let recorded = Arc::clone(&spans);
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| async move {
            let request = ExportTraceServiceRequest::decode(body).unwrap();
            let spans = request.resource_spans.iter().flat_map(|r| &r.scope_spans).flat_map(|s| &s.spans);
            recorded.lock().unwrap().extend(spans.map(|s| Received {
                trace: hex(&s.trace_id),
                span: hex(&s.span_id),
                parent: hex(&s.parent_span_id),
                name: s.name.clone(),
                kind: s.kind,
                attributes: attribute_map(&s.attributes),
                events: s.events.iter().map(|e| (e.name.clone(), attribute_map(&e.attributes))).collect(),
            }));
            ([("content-type", "application/x-protobuf")], Vec::<u8>::new())
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, spans)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn a_request_with_a_client_traceparent_is_one_access_line_and_one_trace_with_the_same_id() {
    let sim = SimProcess::start();
    let (endpoint, spans) = sim.runtime.block_on(collector());
    let env = [("OPENAI_API_KEY", "sk-test"), ("SLUICE_LOG_JSON", "true"), ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)];
    let mut gateway = Served::start(&quickstart_on(&sim.url), &env).unwrap();
    let trace = "0af7651916cd43dd8448eb211c80319c";
    let traceparent = format!("00-{trace}-b7ad6b7169203331-01");
    let (status, body) = sim.chat_as(&gateway.url, KEY, "gpt-4o-mini", &[("traceparent", &traceparent)]);
    assert_eq!(status, 200, "{body}");
    let lines = access_lines(&gateway.stderr_once(trace));
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["trace_id"], trace);
    // Shutdown exports what is still queued.
    gateway.terminate();
    let spans = spans.lock().unwrap().clone();
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    for name in ["POST /v1/chat/completions", "admission", "chat gpt-4o-mini", "settlement"] {
        assert_eq!(names.iter().filter(|n| **n == name).count(), 1, "{name} in {spans:?}");
    }
    assert!(spans.iter().all(|s| s.trace == trace), "{spans:?}");
    let request = spans.iter().find(|s| s.name == "POST /v1/chat/completions").unwrap();
    assert_eq!(request.parent, "b7ad6b7169203331", "the client's span is the parent");
    assert!(spans.iter().filter(|s| s.span != request.span).all(|s| s.parent == request.span), "{spans:?}");
    // The HTTP server and GenAI conventions on the request's span (SpanKind::Server = 2).
    let a = &request.attributes;
    assert_eq!(request.kind, 2);
    for (key, value) in [
        ("http.request.method", "POST"),
        ("http.route", "/v1/chat/completions"),
        ("http.response.status_code", "200"),
        ("gen_ai.operation.name", "chat"),
        ("gen_ai.provider.name", "openai"),
        ("gen_ai.request.model", "gpt-4o-mini"),
        ("gen_ai.response.model", "gpt-4o-mini"),
    ] {
        assert_eq!(a.get(key).map(String::as_str), Some(value), "{key} in {a:?}");
    }
    for key in ["gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"] {
        assert!(a[key].parse::<u64>().unwrap() > 0, "{key} in {a:?}");
    }
    // Why the model stopped, as the client was told it.
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    let told = answer["choices"][0]["finish_reason"].as_str().unwrap();
    assert_eq!(a.get("gen_ai.response.finish_reasons").map(String::as_str), Some(told), "{a:?}");
    assert_eq!(lines[0]["finish_reasons"], told);
    // The call to the provider: a client span (3) naming where it went.
    let call = spans.iter().find(|s| s.name == "chat gpt-4o-mini").unwrap();
    assert_eq!(call.kind, 3);
    assert_eq!(call.attributes["server.address"], "127.0.0.1");
    assert_eq!(call.attributes["server.port"], sim.url.rsplit(':').next().unwrap().trim_end_matches('/'));
    assert_eq!(call.attributes["gen_ai.provider.name"], "openai");
}

#[test]
fn a_request_refused_by_admission_has_no_client_span_and_says_why_in_an_event() {
    let sim = SimProcess::start();
    let (endpoint, spans) = sim.runtime.block_on(collector());
    let env = [("OPENAI_API_KEY", "sk-test"), ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)];
    // One request a minute for the tenant; the client will not wait.
    let config = quickstart_on(&sim.url).replace("name = \"me\"\n", "name = \"me\"\nlimits = { rpm = 1 }\n");
    assert!(config.contains("rpm = 1 }"), "{config}");
    let mut gateway = Served::start(&config, &env).unwrap();
    let (first, refused) = ("11111111111111111111111111111111", "22222222222222222222222222222222");
    for (trace, expected) in [(first, 200), (refused, 429)] {
        let traceparent = format!("00-{trace}-b7ad6b7169203331-01");
        let headers = [("traceparent", traceparent.as_str()), ("x-sluice-max-wait-ms", "0")];
        let (status, body) = sim.chat_as(&gateway.url, KEY, "gpt-4o-mini", &headers);
        assert_eq!(status, expected, "{body}");
    }
    gateway.terminate();
    let spans = spans.lock().unwrap().clone();
    let of = |trace: &str| spans.iter().filter(|s| s.trace == trace).cloned().collect::<Vec<_>>();
    assert!(of(first).iter().any(|s| s.kind == 3), "the admitted one was sent: {spans:?}");
    let refused = of(refused);
    assert!(!refused.is_empty() && refused.iter().all(|s| s.kind != 3), "nothing was sent: {refused:?}");
    let request = refused.iter().find(|s| s.kind == 2).unwrap();
    assert_eq!(request.attributes["http.response.status_code"], "429");
    let (name, event) = &request.events[0];
    assert_eq!(name, "sluice.admission.refused");
    assert_eq!(event["sluice.decision"], "rejected_before_send");
    assert_eq!(event["sluice.scope_kind"], "tenant");
    assert_eq!(event["sluice.scope"], "me");
    assert_eq!(event["sluice.dimension"], "requests");
}

#[test]
fn serve_puts_the_admin_plane_on_its_own_listener_with_metrics_behind_the_token() {
    let sim = SimProcess::start();
    let config = format!("{}\n[admin]\nmetrics_token_env = \"SLUICE_METRICS_TOKEN\"\n", quickstart_on(&sim.url));
    let env = [("OPENAI_API_KEY", "sk-test"), ("SLUICE_METRICS_TOKEN", "scrape-token-1")];
    let gateway = Served::start(&config, &env).unwrap();
    assert_ne!(gateway.url, gateway.admin_url, "two listeners");
    let get = |url: String, token: Option<&str>| {
        sim.runtime.block_on(async {
            let request = reqwest::Client::new().get(url);
            let request = match token {
                Some(token) => request.bearer_auth(token),
                None => request,
            };
            let response = request.send().await.unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        })
    };
    let (status, body) = get(format!("{}/metrics", gateway.url), Some("scrape-token-1"));
    assert_eq!(status, 404, "the public port serves no metrics: {body}");
    assert!(body.contains("unknown_route"), "{body}");
    assert_eq!(get(format!("{}/metrics", gateway.admin_url), None).0, 401);
    assert_eq!(get(format!("{}/metrics", gateway.admin_url), Some("wrong")).0, 401);
    let (status, body) = get(format!("{}/metrics", gateway.admin_url), Some("scrape-token-1"));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("sluice_"), "{body}");
    assert_eq!(get(format!("{}/healthz", gateway.url), None).0, 200);
    assert_eq!(get(format!("{}/v1/models", gateway.admin_url), Some(KEY)).0, 404, "no API on the admin port");
}

#[test]
fn serve_refuses_to_start_when_the_metrics_token_is_missing() {
    let sim = SimProcess::start();
    let config = format!("{}\n[admin]\nmetrics_token_env = \"SLUICE_METRICS_TOKEN\"\n", quickstart_on(&sim.url));
    let refused = Served::start(&config, &[("OPENAI_API_KEY", "sk-test")]).err().expect("served without its token");
    assert!(refused.contains("SLUICE_METRICS_TOKEN"), "{refused}");
}
