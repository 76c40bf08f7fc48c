//! The Files and Batches API over HTTP: upload, batch creation, every line run once as a
//! job of the batch class, output and error files, invalid input, cancel, ownership, bad
//! requests, and a restart of the gateway in the middle of a batch — against the strict
//! simulated provider, with the embedded job store in a temp dir and real workers.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use sluice_jobs::{EmbeddedJobStore, JobStore, RedisJobConfig, RedisJobStore};
use sluice_quota::clock::FAKE_UNIX_ORIGIN_MS;
use sluice_quota::{Clock, FakeClock, MemoryStore, SystemClock};
use sluice_redis::Topology;
use sluice_redis::local::LocalRedis;
use sluice_server::AppState;
use sluice_sim::{SimConfig, SimHandle, SimProvider};

const ACME: &str = "sk-batches-acme";
const GLOBEX: &str = "sk-batches-globex";
/// A key of acme's whose class (`bulk`) is less urgent than `batch`.
const ACME_BULK: &str = "sk-batches-acme-bulk";
const SIM_MODELS: &str = "seed = 1\n[[models]]\nname = \"gpt-4o-mini\"\nshape = \"openai\"\n";
/// `[jobs] max_file_bytes` of the gateway under test.
const MAX_FILE: usize = 64 * 1024;
/// `[jobs] max_tenant_file_bytes` of the gateway under test: two of the largest files.
const TENANT_FILES: usize = 2 * MAX_FILE;

fn sha(key: &str) -> String {
    hex::encode(sluice_config::hash_key(key))
}

fn config(sim: &SimHandle, key_file: &Path, workers: usize) -> sluice_config::Config {
    let text = format!(
        r#"
[[providers]]
name = "sim"
kind = "openai"
base_url = "{url}"
api_key_file = "{file}"

[[deployments]]
name = "oa"
provider = "sim"
model = "gpt-4o-mini"
limits = {{ tpm = 10000000, input_tpm = 100000 }}

[[models]]
name = "chat"
deployment = "oa"
default_max_tokens = 16

[[deployments]]
name = "slow"
provider = "sim"
model = "gpt-4o-mini"
limits = {{ rpm = 60 }}

[[models]]
name = "slow-chat"
deployment = "slow"
default_max_tokens = 8

[[deployments]]
name = "ghost"
provider = "sim"
model = "not-served-by-the-sim"

[[models]]
name = "ghost"
deployment = "ghost"
default_max_tokens = 8

[[tenants]]
name = "acme"

[[tenants]]
name = "globex"

[[classes]]
name = "interactive"

[[classes]]
name = "batch"
max_wait = "10m"
priority = 5
retry_attempts = 1

[[classes]]
name = "bulk"
max_wait = "10m"
priority = 9
retry_attempts = 1

[[keys]]
id = "acme-bulk"
tenant = "acme"
class = "bulk"
sha256 = "{acme_bulk}"

[[keys]]
id = "acme-1"
tenant = "acme"
class = "interactive"
sha256 = "{acme}"

[[keys]]
id = "globex-1"
tenant = "globex"
class = "interactive"
sha256 = "{globex}"

[jobs]
workers = {workers}
visibility_timeout = "3s"
max_file_bytes = {MAX_FILE}
max_tenant_file_bytes = {TENANT_FILES}
max_batch_lines = 50
"#,
        url = sim.url(),
        file = key_file.display(),
        acme = sha(ACME),
        acme_bulk = sha(ACME_BULK),
        globex = sha(GLOBEX),
    );
    sluice_config::parse(&text).unwrap()
}

/// A gateway serving on 127.0.0.1 over the job store in `dir`.
struct Gateway {
    url: String,
    stop: tokio::sync::oneshot::Sender<()>,
    served: tokio::task::JoinHandle<std::io::Result<()>>,
    workers: Vec<tokio::task::JoinHandle<()>>,
}

/// The embedded job store in `dir`.
fn embedded(dir: &Path) -> Arc<dyn JobStore> {
    Arc::new(EmbeddedJobStore::open(&dir.join("jobs.redb"), Arc::new(SystemClock::new())).unwrap())
}

/// The Redis job store on `redis`.
fn in_redis(redis: &LocalRedis) -> Arc<dyn JobStore> {
    let config = RedisJobConfig {
        topology: Topology::Standalone(redis.url()),
        prefix: "batches".into(),
        timeout: Duration::from_secs(2),
        tls: sluice_redis::Tls::default(),
    };
    Arc::new(RedisJobStore::new(config))
}

impl Gateway {
    async fn start(sim: &SimHandle, dir: &Path, workers: usize) -> Self {
        Self::start_on(sim, dir, workers, embedded(dir)).await
    }

    async fn start_on(sim: &SimHandle, dir: &Path, workers: usize, jobs: Arc<dyn JobStore>) -> Self {
        Self::start_with_clock(sim, dir, workers, jobs, Arc::new(SystemClock::new())).await
    }

    async fn start_with_clock(
        sim: &SimHandle,
        dir: &Path,
        workers: usize,
        jobs: Arc<dyn JobStore>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let key_file = dir.join("provider-key");
        std::fs::write(&key_file, "sk-provider-batches").unwrap();
        let config = config(sim, &key_file, workers);
        let store = Arc::new(MemoryStore::new(Arc::clone(&clock)));
        let state = AppState::build_with_clock(&config, store, clock).unwrap().with_jobs(jobs, &config);
        let workers = sluice_server::jobs::worker::spawn(&state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = tokio::spawn(sluice_server::serve(listener, state, async {
            let _ = stopped.await;
        }));
        Self { url, stop, served, workers }
    }

    /// Stops serving and the workers, so the job store's file is closed.
    async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.served.await;
        for worker in self.workers {
            worker.abort();
            let _ = worker.await;
        }
    }
}

struct Env {
    sim: SimHandle,
    gateway: Gateway,
    http: reqwest::Client,
    dir: tempfile::TempDir,
}

async fn start(workers: usize) -> Env {
    let sim = SimProvider::start(SimConfig::from_toml_str(SIM_MODELS).unwrap()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let gateway = Gateway::start(&sim, dir.path(), workers).await;
    Env { sim, gateway, http: reqwest::Client::new(), dir }
}

/// [`start`] with the gateway and its embedded job store on tokio's clock: with
/// `#[tokio::test(start_paused = true)]`, admission's waits run on paused time.
async fn start_clocked(workers: usize) -> Env {
    let sim = SimProvider::start(SimConfig::from_toml_str(SIM_MODELS).unwrap()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let clock: Arc<dyn Clock> = common::TokioClock::new();
    let jobs = Arc::new(EmbeddedJobStore::open(&dir.path().join("jobs.redb"), Arc::clone(&clock)).unwrap());
    let gateway = Gateway::start_with_clock(&sim, dir.path(), workers, jobs, clock).await;
    Env { sim, gateway, http: reqwest::Client::new(), dir }
}

fn line(custom_id: &str, model: &str) -> String {
    let content = format!("hello req-id:{custom_id}");
    let body = json!({"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": 8});
    json!({"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}).to_string()
}

fn jsonl(lines: &[String]) -> Vec<u8> {
    lines.iter().flat_map(|l| format!("{l}\n").into_bytes()).collect()
}

const BOUNDARY: &str = "sluice-test-boundary";

fn form(purpose: Option<&str>, file: Option<&[u8]>) -> Vec<u8> {
    let mut body = Vec::new();
    if let Some(purpose) = purpose {
        let part = format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\n{purpose}\r\n");
        body.extend_from_slice(part.as_bytes());
    }
    if let Some(file) = file {
        let head = format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"input.jsonl\"\r\n\
             Content-Type: application/octet-stream\r\n\r\n"
        );
        body.extend_from_slice(head.as_bytes());
        body.extend_from_slice(file);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    body
}

impl Env {
    async fn send(&self, request: reqwest::RequestBuilder) -> (u16, Value) {
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.gateway.url)
    }

    async fn upload_form(&self, key: &str, body: Vec<u8>) -> (u16, Value) {
        let request = self
            .http
            .post(self.url("/v1/files"))
            .bearer_auth(key)
            .header("content-type", format!("multipart/form-data; boundary={BOUNDARY}"))
            .body(body);
        self.send(request).await
    }

    async fn upload(&self, key: &str, file: &[u8]) -> String {
        let (status, info) = self.upload_form(key, form(Some("batch"), Some(file))).await;
        assert_eq!(status, 200, "{info}");
        info["id"].as_str().unwrap().to_owned()
    }

    async fn get(&self, key: &str, path: &str) -> (u16, Value) {
        self.send(self.http.get(self.url(path)).bearer_auth(key)).await
    }

    async fn post(&self, key: &str, path: &str, body: &Value) -> (u16, Value) {
        self.send(self.http.post(self.url(path)).bearer_auth(key).json(body)).await
    }

    async fn create(&self, key: &str, file_id: &str) -> (u16, Value) {
        let body = json!({"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h",
            "metadata": {"run": "test"}});
        self.post(key, "/v1/batches", &body).await
    }

    async fn content(&self, key: &str, file_id: &str) -> String {
        let response =
            self.http.get(self.url(&format!("/v1/files/{file_id}/content"))).bearer_auth(key).send().await.unwrap();
        assert_eq!(response.status().as_u16(), 200);
        response.text().await.unwrap()
    }

    /// Polls the batch until it is no longer open (at most `within`).
    async fn finished(&self, key: &str, id: &str, within: Duration) -> Value {
        for _ in 0..within.as_millis() / 50 {
            let (status, batch) = self.get(key, &format!("/v1/batches/{id}")).await;
            assert_eq!(status, 200, "{batch}");
            if !["validating", "in_progress", "finalizing", "cancelling"].contains(&batch["status"].as_str().unwrap()) {
                return batch;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("batch {id} did not finish within {within:?}");
    }
}

fn parse_lines(text: &str) -> Vec<Value> {
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_runs_every_line_once_as_a_batch_job_and_its_output_is_in_input_order() {
    let env = start(2).await;
    let ids: Vec<String> = (0..12).map(|i| format!("req-{i:02}")).collect();
    let file_id = env.upload(ACME, &jsonl(&ids.iter().map(|id| line(id, "chat")).collect::<Vec<_>>())).await;
    let (status, info) = env.get(ACME, &format!("/v1/files/{file_id}")).await;
    assert_eq!((status, info["object"].as_str(), info["purpose"].as_str()), (200, Some("file"), Some("batch")));
    assert_eq!(info["status"], "processed");

    let (status, batch) = env.create(ACME, &file_id).await;
    assert_eq!(status, 200, "{batch}");
    assert_eq!((batch["object"].as_str(), batch["status"].as_str()), (Some("batch"), Some("in_progress")));
    assert_eq!(batch["request_counts"]["total"], 12);
    assert_eq!(batch["metadata"]["run"], "test");
    let id = batch["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("batch_"));

    let batch = env.finished(ACME, &id, Duration::from_secs(20)).await;
    assert_eq!(batch["status"], "completed", "{batch}");
    assert_eq!(batch["request_counts"], json!({"total": 12, "completed": 12, "failed": 0}));
    assert!(batch["completed_at"].as_u64().is_some() && batch["error_file_id"].is_null(), "{batch}");
    let output = parse_lines(&env.content(ACME, batch["output_file_id"].as_str().unwrap()).await);
    let answered: Vec<&str> = output.iter().map(|l| l["custom_id"].as_str().unwrap()).collect();
    assert_eq!(answered, ids, "each custom_id once, in input order");
    for l in &output {
        assert!(l["id"].as_str().unwrap().starts_with("batch_req_"));
        assert_eq!((l["response"]["status_code"].as_u64(), &l["error"]), (Some(200), &Value::Null), "{l}");
        assert_eq!(l["response"]["body"]["object"], "chat.completion");
    }
    let stats = env.sim.stats();
    assert_eq!((stats.requests, stats.markers, stats.duplicates), (12, 12, 0));
    // Each line ran as an async job of the batch class, which its owner can look up.
    let job_id = output[0]["response"]["request_id"].as_str().unwrap();
    let (status, job) = env.get(ACME, &format!("/v1/jobs/{job_id}")).await;
    assert_eq!((status, job["class"].as_str(), job["status"].as_str()), (200, Some("batch"), Some("completed")));
    // A second read changes nothing; the listing shows it newest first.
    let (_, again) = env.get(ACME, &format!("/v1/batches/{id}")).await;
    assert_eq!(again["output_file_id"], batch["output_file_id"]);
    let (status, listed) = env.get(ACME, "/v1/batches?limit=5").await;
    assert_eq!((status, listed["data"][0]["id"].as_str()), (200, Some(id.as_str())), "{listed}");
    let (_, after) = env.get(ACME, &format!("/v1/batches?after={id}")).await;
    assert_eq!((after["data"].clone(), after["has_more"].as_bool()), (json!([]), Some(false)));
    // The output file is listed with the input file, newest first, and filtered by purpose.
    let (_, files) = env.get(ACME, "/v1/files").await;
    let purposes: Vec<&str> =
        files["data"].as_array().unwrap().iter().map(|f| f["purpose"].as_str().unwrap()).collect();
    assert_eq!(purposes, ["batch_output", "batch"]);
    let (_, inputs) = env.get(ACME, "/v1/files?purpose=batch&limit=1").await;
    assert_eq!((inputs["data"][0]["id"].as_str(), inputs["has_more"].as_bool()), (Some(file_id.as_str()), Some(false)));
    assert_eq!(env.sim.stats().requests, 12);
}

/// A batch is paced by admission like any job: 8 requests on a deployment of 60 rpm (a
/// burst of 1 s worth, then one a second) take at least 4 s, and none is refused. On
/// tokio's paused clock, which the gateway follows.
#[tokio::test(start_paused = true)]
async fn a_batch_is_paced_by_its_deployments_limit() {
    let env = start_clocked(4).await;
    let ids: Vec<String> = (0..8).map(|i| format!("slow-{i}")).collect();
    let file_id = env.upload(ACME, &jsonl(&ids.iter().map(|id| line(id, "slow-chat")).collect::<Vec<_>>())).await;
    let started = tokio::time::Instant::now();
    let (_, batch) = env.create(ACME, &file_id).await;
    let batch = env.finished(ACME, batch["id"].as_str().unwrap(), Duration::from_secs(30)).await;
    let took = started.elapsed();
    assert_eq!(batch["request_counts"], json!({"total": 8, "completed": 8, "failed": 0}), "{batch}");
    assert!(took >= Duration::from_secs(4), "8 requests at 60 rpm after a 1-request burst took only {took:?}");
    let stats = env.sim.stats();
    assert_eq!((stats.requests, stats.duplicates), (8, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_the_provider_refuses_is_counted_failed_and_goes_to_the_error_file() {
    let env = start(2).await;
    let lines = [line("good", "chat"), line("refused", "ghost"), line("also-good", "chat")];
    let file_id = env.upload(ACME, &jsonl(&lines)).await;
    let (_, batch) = env.create(ACME, &file_id).await;
    let batch = env.finished(ACME, batch["id"].as_str().unwrap(), Duration::from_secs(20)).await;
    assert_eq!(batch["status"], "completed", "{batch}");
    assert_eq!(batch["request_counts"], json!({"total": 3, "completed": 2, "failed": 1}));
    let output = parse_lines(&env.content(ACME, batch["output_file_id"].as_str().unwrap()).await);
    let answered: Vec<&str> = output.iter().map(|l| l["custom_id"].as_str().unwrap()).collect();
    assert_eq!(answered, ["good", "also-good"]);
    let errors = parse_lines(&env.content(ACME, batch["error_file_id"].as_str().unwrap()).await);
    assert_eq!(errors.len(), 1);
    assert_eq!(
        (errors[0]["custom_id"].as_str(), errors[0]["error"]["code"].as_str()),
        (Some("refused"), Some("request_failed"))
    );
    assert!(errors[0]["error"]["message"].as_str().unwrap().contains("404"), "{}", errors[0]);
    assert!(errors[0]["response"].is_null());
}

/// On tokio's paused clock, which the gateway and its workers follow: the time given to a
/// (wrong) run of the failed batch is the workers' own, not real time.
#[tokio::test(start_paused = true)]
async fn an_invalid_input_file_fails_the_batch_naming_each_line_and_sends_nothing() {
    let env = start_clocked(2).await;
    let wrong_url = line("c", "chat").replace("/v1/chat/completions", "/v1/messages");
    let lines = [line("a", "chat"), line("a", "chat"), "{not json".into(), wrong_url, line("e", "no-such-model")];
    let file_id = env.upload(ACME, &jsonl(&lines)).await;
    let (status, batch) = env.create(ACME, &file_id).await;
    assert_eq!(status, 200, "{batch}");
    assert_eq!(batch["status"], "failed", "{batch}");
    assert!(batch["failed_at"].as_u64().is_some());
    let errors: Vec<(&str, u64)> = batch["errors"]["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["code"].as_str().unwrap(), e["line"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        errors,
        [("duplicate_custom_id", 2), ("invalid_json_line", 3), ("invalid_url", 4), ("model_not_found", 5)]
    );
    let (_, again) = env.get(ACME, &format!("/v1/batches/{}", batch["id"].as_str().unwrap())).await;
    assert_eq!(again["status"], "failed");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(env.sim.stats().requests, 0, "nothing of a failed batch runs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_the_jobs_not_yet_started_and_lists_them_in_the_error_file() {
    let env = start(0).await;
    let file_id = env.upload(ACME, &jsonl(&[line("x", "chat"), line("y", "chat")])).await;
    let (_, batch) = env.create(ACME, &file_id).await;
    let id = batch["id"].as_str().unwrap().to_owned();
    let (status, cancelled) = env.post(ACME, &format!("/v1/batches/{id}/cancel"), &json!({})).await;
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    assert_eq!(cancelled["request_counts"], json!({"total": 2, "completed": 0, "failed": 2}));
    assert!(cancelled["cancelled_at"].as_u64().is_some() && cancelled["output_file_id"].is_null());
    let errors = parse_lines(&env.content(ACME, cancelled["error_file_id"].as_str().unwrap()).await);
    let codes: Vec<(&str, &str)> =
        errors.iter().map(|e| (e["custom_id"].as_str().unwrap(), e["error"]["code"].as_str().unwrap())).collect();
    assert_eq!(codes, [("x", "batch_cancelled"), ("y", "batch_cancelled")]);
    let (status, again) = env.post(ACME, &format!("/v1/batches/{id}/cancel"), &json!({})).await;
    assert_eq!((status, again["status"].as_str()), (200, Some("cancelled")));
    assert_eq!(env.sim.stats().requests, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tenants_files_and_batches_are_not_found() {
    let env = start(0).await;
    let file_id = env.upload(ACME, &jsonl(&[line("x", "chat")])).await;
    let (_, batch) = env.create(ACME, &file_id).await;
    let batch_id = batch["id"].as_str().unwrap();
    for path in
        [format!("/v1/files/{file_id}"), format!("/v1/files/{file_id}/content"), format!("/v1/batches/{batch_id}")]
    {
        let (status, body) = env.get(GLOBEX, &path).await;
        assert_eq!(status, 404, "{path}: {body}");
        assert!(body["error"]["code"].as_str().unwrap().ends_with("_not_found"), "{body}");
    }
    let (status, _) = env.post(GLOBEX, &format!("/v1/batches/{batch_id}/cancel"), &json!({})).await;
    assert_eq!(status, 404);
    let (status, _) = env.create(GLOBEX, &file_id).await;
    assert_eq!(status, 404, "another tenant's file cannot feed a batch");
    let (status, _) = env.send(env.http.delete(env.url(&format!("/v1/files/{file_id}"))).bearer_auth(GLOBEX)).await;
    assert_eq!(status, 404);
    let (_, files) = env.get(GLOBEX, "/v1/files").await;
    assert_eq!(files["data"], json!([]));
    let (_, batches) = env.get(GLOBEX, "/v1/batches").await;
    assert_eq!(batches["data"], json!([]));
    // The owner still has both, and can delete the file.
    let (_, files) = env.get(ACME, "/v1/files").await;
    assert_eq!(files["data"][0]["id"].as_str(), Some(file_id.as_str()));
    let (status, deleted) = env.send(env.http.delete(env.url(&format!("/v1/files/{file_id}"))).bearer_auth(ACME)).await;
    assert_eq!((status, deleted["deleted"].as_bool()), (200, Some(true)));
    let (status, _) = env.get(ACME, &format!("/v1/files/{file_id}")).await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_uploads_and_batch_requests_get_structured_4xx() {
    let env = start(0).await;
    let good = jsonl(&[line("x", "chat")]);
    let cases: Vec<(Vec<u8>, u16, &str)> = vec![
        (form(Some("fine-tune"), Some(&good)), 400, "invalid_purpose"),
        (form(None, Some(&good)), 400, "missing_field"),
        (form(Some("batch"), None), 400, "missing_field"),
        (form(Some("batch"), Some(&vec![b'x'; MAX_FILE + 1])), 413, "file_too_large"),
        (form(Some("batch"), Some(&vec![b'x'; MAX_FILE * 4])), 413, "file_too_large"),
        (b"not a form".to_vec(), 400, "invalid_multipart"),
    ];
    for (body, status, code) in cases {
        let (got, error) = env.upload_form(ACME, body).await;
        assert_eq!((got, error["error"]["code"].as_str()), (status, Some(code)), "{error}");
    }
    let (status, _) = env.send(env.http.post(env.url("/v1/files")).body("x")).await;
    assert_eq!(status, 401);

    let file_id = env.upload(ACME, &good).await;
    let too_many = env.upload(ACME, &jsonl(&(0..51).map(|i| line(&i.to_string(), "chat")).collect::<Vec<_>>())).await;
    let create = |file: &str, endpoint: &str, window: &str| json!({"input_file_id": file, "endpoint": endpoint, "completion_window": window});
    let chat = "/v1/chat/completions";
    let cases = [
        (create("file-000000000000000000000000", chat, "24h"), 404, "file_not_found"),
        (create("../../etc/passwd", chat, "24h"), 404, "file_not_found"),
        (create(&file_id, "/v1/embeddings", "24h"), 400, "invalid_value"),
        (create(&file_id, "/v1/completions", "24h"), 400, "invalid_value"),
        (create(&file_id, chat, "1h"), 400, "invalid_value"),
        (json!({"endpoint": chat, "completion_window": "24h"}), 400, "missing_field"),
        (
            json!({"input_file_id": file_id, "endpoint": chat, "completion_window": "24h", "metadata": [1]}),
            400,
            "invalid_value",
        ),
    ];
    for (body, status, code) in cases {
        let (got, error) = env.post(ACME, "/v1/batches", &body).await;
        assert_eq!((got, error["error"]["code"].as_str()), (status, Some(code)), "{body}: {error}");
    }
    let (status, batch) = env.create(ACME, &too_many).await;
    assert_eq!((status, batch["status"].as_str()), (200, Some("failed")));
    assert_eq!(batch["errors"]["data"][0]["code"], "too_many_requests", "{batch}");
    for path in ["/v1/batches/batch_nope", "/v1/files/file-nope", "/v1/batches?limit=0"] {
        let (status, body) = env.get(ACME, path).await;
        assert!(status == 404 || status == 400, "{path}: {status}");
        assert!(body["error"]["code"].is_string(), "{body}");
    }
}

/// Creates a 3-line batch on a gateway without workers, restarts the gateway (with workers)
/// on a job store from `reopen`, and checks the file and the batch survived and finish.
async fn survives_a_restart(first: Arc<dyn JobStore>, reopen: impl FnOnce(&Path) -> Arc<dyn JobStore>) {
    let sim = SimProvider::start(SimConfig::from_toml_str(SIM_MODELS).unwrap()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let gateway = Gateway::start_on(&sim, dir.path(), 0, first).await;
    let env = Env { sim, gateway, http: reqwest::Client::new(), dir };
    let ids = ["r1", "r2", "r3"];
    let file_id = env.upload(ACME, &jsonl(&ids.map(|id| line(id, "chat")))).await;
    let (_, batch) = env.create(ACME, &file_id).await;
    let id = batch["id"].as_str().unwrap().to_owned();
    let Env { sim, gateway, http, dir } = env;
    gateway.stop().await;
    let gateway = Gateway::start_on(&sim, dir.path(), 2, reopen(dir.path())).await;
    let env = Env { sim, gateway, http, dir };
    let (status, info) = env.get(ACME, &format!("/v1/files/{file_id}")).await;
    assert_eq!(status, 200, "{info}");
    let batch = env.finished(ACME, &id, Duration::from_secs(20)).await;
    assert_eq!(batch["status"], "completed", "{batch}");
    let output = parse_lines(&env.content(ACME, batch["output_file_id"].as_str().unwrap()).await);
    let answered: HashMap<&str, u64> = output
        .iter()
        .map(|l| (l["custom_id"].as_str().unwrap(), l["response"]["status_code"].as_u64().unwrap()))
        .collect();
    assert_eq!(answered, ids.iter().map(|id| (*id, 200)).collect());
    assert_eq!(env.sim.stats().requests, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_and_batches_survive_a_restart_in_the_embedded_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_owned();
    survives_a_restart(embedded(&path), |_| embedded(&path)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_and_batches_survive_a_restart_in_redis() {
    let redis = LocalRedis::start().expect("redis-server (scripts/test installs it)");
    survives_a_restart(in_redis(&redis), |_| in_redis(&redis)).await;
}

/// A tenant's files stop at `[jobs] max_tenant_file_bytes`; deleting one frees its room;
/// another tenant is not affected.
async fn uploads_stop_at_the_tenant_quota(jobs: Arc<dyn JobStore>) {
    let sim = SimProvider::start(SimConfig::from_toml_str(SIM_MODELS).unwrap()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let gateway = Gateway::start_on(&sim, dir.path(), 0, jobs).await;
    let env = Env { sim, gateway, http: reqwest::Client::new(), dir };
    let largest = vec![b'x'; MAX_FILE];
    let first = env.upload(ACME, &largest).await;
    env.upload(ACME, &largest).await;
    let (status, refused) = env.upload_form(ACME, form(Some("batch"), Some(b"x"))).await;
    assert_eq!(status, 413, "{refused}");
    let error = &refused["error"];
    assert_eq!(error["code"], "file_quota_exceeded", "{refused}");
    assert_eq!(
        (error["quota_bytes"].as_u64(), error["used_bytes"].as_u64()),
        (Some(TENANT_FILES as u64), Some(TENANT_FILES as u64))
    );
    assert!(error["message"].as_str().unwrap().contains("max_tenant_file_bytes"), "{refused}");
    env.upload(GLOBEX, &largest).await;
    let (status, _) = env.send(env.http.delete(env.url(&format!("/v1/files/{first}"))).bearer_auth(ACME)).await;
    assert_eq!(status, 200);
    env.upload(ACME, &largest).await;
    let (status, _) = env.upload_form(ACME, form(Some("batch"), Some(b"x"))).await;
    assert_eq!(status, 413, "full again");
    env.gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_stop_at_the_tenant_quota_in_the_embedded_store() {
    let dir = tempfile::tempdir().unwrap();
    uploads_stop_at_the_tenant_quota(embedded(dir.path())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_stop_at_the_tenant_quota_in_redis() {
    let redis = LocalRedis::start().expect("redis-server (scripts/test installs it)");
    uploads_stop_at_the_tenant_quota(in_redis(&redis)).await;
}

/// A batch runs in the `batch` class only for keys whose own class is no less urgent: a
/// `bulk` key's batch stays in `bulk` (a batch must not lift a key above its class).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_never_runs_above_its_keys_class() {
    let sim = SimProvider::start(SimConfig::from_toml_str(SIM_MODELS).unwrap()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let jobs = embedded(dir.path());
    let gateway = Gateway::start_on(&sim, dir.path(), 0, Arc::clone(&jobs)).await;
    let env = Env { sim, gateway, http: reqwest::Client::new(), dir };
    for (key, class) in [(ACME, "batch"), (ACME_BULK, "bulk")] {
        let file_id = env.upload(key, &jsonl(&[line("c1", "chat")])).await;
        let (status, batch) = env.create(key, &file_id).await;
        assert_eq!(status, 200, "{batch}");
        let doc = sluice_jobs::DocKey { kind: "batch_jobs", owner: "acme", id: batch["id"].as_str().unwrap() };
        let list: Vec<(String, String)> = serde_json::from_slice(&jobs.get_doc(doc).await.unwrap().unwrap()).unwrap();
        let (_, job_id) = &list[0];
        let (status, job) = env.get(key, &format!("/v1/jobs/{job_id}")).await;
        assert_eq!((status, job["class"].as_str()), (200, Some(class)), "{key}: {job}");
    }
    env.gateway.stop().await;
}

/// Files and batches are stamped by the gateway's clock, not read from the machine's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_and_batches_are_stamped_by_the_gateways_clock() {
    let sim = SimProvider::start(SimConfig::from_toml_str(SIM_MODELS).unwrap()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let clock = FakeClock::default();
    clock.advance(Duration::from_secs(90));
    let jobs = embedded(dir.path());
    let gateway = Gateway::start_with_clock(&sim, dir.path(), 0, jobs, Arc::new(clock.clone())).await;
    let env = Env { sim, gateway, http: reqwest::Client::new(), dir };
    let then = FAKE_UNIX_ORIGIN_MS / 1000 + 90;
    let file_id = env.upload(ACME, &jsonl(&[line("x", "chat")])).await;
    let (status, file) = env.get(ACME, &format!("/v1/files/{file_id}")).await;
    assert_eq!(status, 200, "{file}");
    assert_eq!(file["created_at"], then, "{file}");
    clock.advance(Duration::from_secs(5));
    let (status, batch) = env.create(ACME, &file_id).await;
    assert_eq!(status, 200, "{batch}");
    assert_eq!(batch["created_at"], then + 5, "{batch}");
    assert_eq!(batch["in_progress_at"], then + 5, "{batch}");
    env.gateway.stop().await;
}
