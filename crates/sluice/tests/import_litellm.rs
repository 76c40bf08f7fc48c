//! `sluice import litellm`: a LiteLLM proxy config in, a sluice config out that
//! `sluice check-config` accepts, with no key written in the LiteLLM file copied and what
//! was not translated named on standard error and atop the output.

use std::process::Command;

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

    let check = sluice(&["check-config".as_ref(), output.as_os_str()]).unwrap();
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
