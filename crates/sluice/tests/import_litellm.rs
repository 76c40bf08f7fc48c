//! `sluice import litellm`: a LiteLLM proxy config in, a sluice config out that
//! `sluice check-config` accepts, with no key written in the LiteLLM file copied and what
//! was not translated named on standard error and atop the output; and a converted config
//! served by `sluice serve` against the simulated provider.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use sluice_sim::config::{ModelConfig, SimConfig};

const LITELLM: &str = r#"
model_list:
  - model_name: gpt-4o
    litellm_params:
      model: azure/gpt-4o-eastus
      api_base: https://acme-eastus.openai.azure.com/
      api_key: os.environ/AZURE_EASTUS_KEY
      api_version: "2024-10-21"
      rpm: 600
      tpm: 100000
    model_info:
      base_model: azure/gpt-4o
  - model_name: gpt-4o
    litellm_params:
      model: azure/gpt-4o-swedencentral
      api_base: https://acme-sweden.openai.azure.com
      api_key: os.environ/AZURE_SWEDEN_KEY
      api_version: "2024-10-21"
      tpm: 50000
  - model_name: gpt-4o-mini
    litellm_params:
      model: openai/gpt-4o-mini
      api_key: sk-proj-LITERAL-SECRET-42
      rpm: 500
  - model_name: claude-sonnet
    litellm_params:
      model: anthropic/claude-sonnet-4-5
      api_key: os.environ/ANTHROPIC_API_KEY
      tpm: 400000
router_settings:
  routing_strategy: usage-based-routing-v2
  num_retries: 2
  fallbacks:
    - gpt-4o: ["claude-sonnet"]
litellm_settings:
  success_callback: ["langfuse"]
  guardrails: []
general_settings:
  master_key: sk-master-NEVER-COPIED
"#;

fn sluice(args: &[&std::ffi::OsStr]) -> std::io::Result<std::process::Output> {
    Command::new(env!("CARGO_BIN_EXE_sluice")).args(args).output()
}

#[test]
fn a_litellm_config_converts_to_one_check_config_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("config.yaml");
    let output = dir.path().join("sluice.toml");
    std::fs::write(&input, LITELLM).unwrap();

    let run =
        sluice(&["import".as_ref(), "litellm".as_ref(), input.as_os_str(), "-o".as_ref(), output.as_os_str()]).unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    let toml = std::fs::read_to_string(&output).unwrap();

    // No key from the LiteLLM file is copied, anywhere.
    for secret in ["LITERAL-SECRET", "NEVER-COPIED"] {
        assert!(!toml.contains(secret), "{secret} in the output:\n{toml}");
        assert!(!stderr.contains(secret), "{secret} on stderr:\n{stderr}");
    }
    assert!(toml.contains(r#"api_key_env = "SLUICE_OPENAI_API_KEY""#), "{toml}");
    assert!(stderr.contains("SLUICE_OPENAI_API_KEY"), "{stderr}");
    // Untranslated fields are named, on stderr and atop the file.
    for field in ["litellm_settings.success_callback", "litellm_settings.guardrails", "general_settings.master_key"] {
        assert!(stderr.contains(field), "{field} not on stderr:\n{stderr}");
        assert!(toml.contains(&format!("#   - {field}")), "{field} not in the file:\n{toml}");
    }
    assert!(toml.contains(r#"strategy = "headroom""#), "{toml}");

    // The file alone: the provider keys it names are not set here (with them set:
    // `a_converted_config_passes_check_config_and_serves_on_the_simulator`).
    let check = sluice(&["check-config".as_ref(), output.as_os_str(), "--file-only".as_ref()]).unwrap();
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{said}{}", String::from_utf8_lossy(&check.stderr));
    assert!(said.contains("4 providers, 4 deployments, 3 models"), "{said}");
}

#[test]
fn without_output_the_config_goes_to_stdout_and_a_bad_file_fails() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("config.yaml");
    std::fs::write(&input, LITELLM).unwrap();
    let run = sluice(&["import".as_ref(), "litellm".as_ref(), input.as_os_str()]).unwrap();
    assert!(run.status.success());
    assert!(String::from_utf8_lossy(&run.stdout).contains("[[models]]"));

    std::fs::write(&input, "general_settings: {}\n").unwrap();
    let run = sluice(&["import".as_ref(), "litellm".as_ref(), input.as_os_str()]).unwrap();
    assert!(!run.status.success());
    assert!(String::from_utf8_lossy(&run.stderr).contains("model_list"));
}

/// Three groups on the simulated provider at `{SIM}`: `gpt-4o` a pool of two OpenAI accounts
/// (order 1 and 2), `gpt-4o-mini` on the first account, `claude-sonnet` on Anthropic; every
/// key from the environment; fallbacks of both kinds.
const ON_THE_SIM: &str = r#"
model_list:
  - model_name: gpt-4o
    litellm_params:
      model: openai/gpt-4o
      api_base: "{SIM}/v1"
      api_key: os.environ/OPENAI_KEY_EAST
      rpm: 600
      order: 1
  - model_name: gpt-4o
    litellm_params:
      model: openai/gpt-4o
      api_base: "{SIM}/v1"
      api_key: os.environ/OPENAI_KEY_WEST
      rpm: 300
      order: 2
  - model_name: gpt-4o-mini
    litellm_params:
      model: openai/gpt-4o-mini
      api_base: "{SIM}/v1"
      api_key: os.environ/OPENAI_KEY_EAST
      tpm: 200000
  - model_name: claude-sonnet
    litellm_params:
      model: anthropic/claude-sonnet-4-5
      api_base: "{SIM}"
      api_key: os.environ/ANTHROPIC_KEY
      tpm: 400000
router_settings:
  routing_strategy: usage-based-routing-v2
  num_retries: 2
  timeout: 30
  fallbacks:
    - gpt-4o: ["claude-sonnet"]
  context_window_fallbacks:
    - gpt-4o-mini: ["gpt-4o"]
"#;

/// The provider keys the converted config reads, as an operator would set them.
const PROVIDER_KEYS: [(&str, &str); 3] =
    [("OPENAI_KEY_EAST", "sk-east"), ("OPENAI_KEY_WEST", "sk-west"), ("ANTHROPIC_KEY", "sk-ant")];
/// The key the test's client presents to the gateway.
const CLIENT_KEY: &str = "sk-imported-client";

/// `sluice serve` on a free loopback port with exactly `env`; killed when dropped.
struct Served {
    url: String,
    child: Child,
    stderr: std::path::PathBuf,
}

impl Served {
    fn start(dir: &Path, config: &Path, env: &[(&str, &str)]) -> Self {
        let stderr = dir.join("serve.log");
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("serve")
            .arg("--config")
            .arg(config)
            .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
            .current_dir(dir)
            .env_clear()
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let url = line.trim().strip_prefix("sluice listening on ").map(str::to_owned);
        let served = Self { url: url.unwrap_or_default(), child, stderr };
        assert!(!served.url.is_empty(), "sluice serve did not start:\n{}", served.log());
        served
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_converted_config_passes_check_config_and_serves_on_the_simulator() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let models = vec![
        ModelConfig::openai("gpt-4o"),
        ModelConfig::openai("gpt-4o-mini"),
        ModelConfig::anthropic("claude-sonnet-4-5"),
    ];
    let sim = runtime.block_on(sluice_sim::SimProvider::start(SimConfig { models, ..SimConfig::default() })).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("config.yaml");
    let output = dir.path().join("sluice.toml");
    std::fs::write(&input, ON_THE_SIM.replace("{SIM}", &sim.url())).unwrap();
    let run =
        sluice(&["import".as_ref(), "litellm".as_ref(), input.as_os_str(), "-o".as_ref(), output.as_os_str()]).unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    for (var, _) in PROVIDER_KEYS {
        assert!(stderr.contains(var), "{var} is not among the variables to set:\n{stderr}");
    }
    let toml = std::fs::read_to_string(&output).unwrap();
    assert!(toml.contains(r#"strategy = "headroom""#), "{toml}");
    assert!(toml.contains("retry_attempts = 3"), "{toml}");
    assert!(toml.contains(r#"when = ["context_length_needed"]"#), "{toml}");

    // What check-config says, with the provider keys set and nothing else.
    let check = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("check-config")
        .arg(&output)
        .env_clear()
        .envs(PROVIDER_KEYS)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{said}{}", String::from_utf8_lossy(&check.stderr));
    assert!(said.contains("3 providers, 4 deployments, 3 models"), "{said}");

    // The operator adds a client key as the file's header tells, then serves.
    let hash = hex::encode(sluice_config::hash_key(CLIENT_KEY));
    let keyed = format!("{toml}\n[[keys]]\nid = \"client-1\"\ntenant = \"default\"\nsha256 = \"{hash}\"\n");
    std::fs::write(&output, keyed).unwrap();
    let gateway = Served::start(dir.path(), &output, &PROVIDER_KEYS);
    let (status, body) = runtime.block_on(async {
        let body = serde_json::json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "hello"}]});
        let response = reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", gateway.url))
            .bearer_auth(CLIENT_KEY)
            .json(&body)
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.json::<serde_json::Value>().await.unwrap())
    });
    assert_eq!(status, 200, "{body}\n{}", gateway.log());
    // The simulator's answer (16 generated tokens by default), served by its gpt-4o.
    assert_eq!(body["choices"][0]["message"]["content"], sluice_sim::text::filler(16), "{body}");
    let stats = sim.stats();
    assert_eq!(stats.models["gpt-4o"].served, 1, "{stats:?}");
    assert_eq!(stats.served, 1);
    drop(gateway);
    runtime.block_on(sim.shutdown());
}
