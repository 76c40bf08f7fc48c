//! A LiteLLM proxy configuration (YAML) translated to a sluice configuration (TOML): pure,
//! no IO, so every rule is tested on strings.
//!
//! | LiteLLM | sluice |
//! |---|---|
//! | a provider account (kind, `api_base`, key source, `api_version`, region, project) | one `[[providers]]` |
//! | each `model_list` entry | one `[[deployments]]` (`limits = { rpm, tpm, concurrency }`) |
//! | each `model_name` group | one `[[models]]` profile: `deployment`, or a pool `deployments = [...]` |
//! | `routing_strategy` | the pool's `strategy` |
//! | `fallbacks`, `context_window_fallbacks` | the profile's `fallbacks` (a group: its first deployment) |
//! | `num_retries` | the default class's `retry_attempts` |
//!
//! A key written in the file is never copied: the provider gets `api_key_env` with a
//! generated variable name, listed among the variables to set. Whatever is not translated
//! is named (field, never value) in [`Translation::untranslated`] and at the top of the
//! output as `#` comments.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use anyhow::Context as _;
use serde_json::{Map, Value};

/// Conditions of a LiteLLM `fallbacks` entry: any failure that survived the retries, and
/// the primary full for the class's whole wait (LiteLLM falls back on a rate limit too).
const ON_FAILURE: &[&str] =
    &["provider_5xx", "rate_limit_after_retry_budget", "primary_unavailable", "queue_wait_exceeded"];
/// Conditions of a `context_window_fallbacks` entry.
const ON_CONTEXT: &[&str] = &["context_length_needed"];
/// The Azure `api-version` written when the LiteLLM entry names none.
const AZURE_API_VERSION: &str = "2024-10-21";
/// The highest tier a pool member may have.
const MAX_TIER: u64 = 9;
/// The placeholder for a value sluice needs and LiteLLM took from elsewhere.
const CHANGE_ME: &str = "CHANGE-ME";

/// What a translation produced.
#[derive(Debug)]
pub struct Translation {
    /// The sluice configuration, TOML, the notes as `#` comments at its top.
    pub toml: String,
    /// What was not translated (or only in part), each naming its LiteLLM field and why.
    pub untranslated: Vec<String>,
    /// Environment variables sluice will read, each with what it must hold.
    pub env: Vec<(String, String)>,
}

/// Translates the LiteLLM proxy configuration `yaml`; `source` names it in the output's
/// header.
///
/// # Errors
/// When `yaml` is not YAML, or has no `model_list` entry sluice can serve.
pub fn translate(yaml: &str, source: &str) -> anyhow::Result<Translation> {
    let root: Value = serde_saphyr::from_str(yaml).context("not a YAML document")?;
    let Value::Object(root) = root else {
        anyhow::bail!("a LiteLLM config is a mapping (model_list, router_settings, …)")
    };
    let mut t = Translator::default();
    t.read(&root)?;
    anyhow::ensure!(
        !t.deployments.is_empty(),
        "no model_list entry could be translated:\n  - {}",
        t.notes.join("\n  - ")
    );
    let toml = t.write(source);
    Ok(Translation { toml, untranslated: t.notes, env: t.env.into_iter().collect() })
}

/// How a provider is authenticated.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Credential {
    /// `api_key_env`: a variable LiteLLM named too.
    Env(String),
    /// A key written in the LiteLLM file: `api_key_env` with a generated name. The key is
    /// kept only to tell accounts apart, never written.
    Literal(String),
    /// Vertex: a service-account key file.
    ServiceAccount(String),
    /// Bedrock: the `AWS_*` variables.
    Aws,
    /// Ollama: none.
    None,
}

/// One `[[providers]]`: everything that tells two accounts apart.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Account {
    kind: &'static str,
    base_url: String,
    credential: Credential,
    api_version: Option<String>,
    region: Option<String>,
    project: Option<String>,
    publisher: Option<&'static str>,
    bedrock_api: Option<&'static str>,
}

/// One `[[deployments]]`.
#[derive(Debug)]
struct Deployment {
    name: String,
    group: String,
    account: usize,
    model: String,
    azure_deployment: Option<String>,
    rpm: Option<u64>,
    tpm: Option<u64>,
    concurrency: Option<u64>,
    attempt_timeout: Option<String>,
    context_window: Option<u64>,
    region: Option<String>,
    price: (Option<f64>, Option<f64>),
    weight: Option<f64>,
    order: Option<u64>,
    /// What tells it from its group's other members in a name: a region or a host.
    qualifier: String,
}

#[derive(Debug, Default)]
struct Translator {
    accounts: Vec<Account>,
    deployments: Vec<Deployment>,
    /// Groups in order of appearance, each with its deployments.
    groups: Vec<(String, Vec<usize>)>,
    strategy: Option<String>,
    /// `(from group, to group, conditions)` in order.
    fallbacks: Vec<(String, String, &'static [&'static str])>,
    num_retries: Option<u64>,
    timeout: Option<String>,
    allowed_fails: Option<u64>,
    cooldown: Option<String>,
    notes: Vec<String>,
    env: BTreeMap<String, String>,
    /// Each account's name, once named.
    account_names: Vec<String>,
    /// The generated variable of each provider whose key was written in the LiteLLM file.
    literal_vars: BTreeMap<String, String>,
}

impl Translator {
    fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    fn read(&mut self, root: &Map<String, Value>) -> anyhow::Result<()> {
        let Some(Value::Array(list)) = root.get("model_list") else {
            anyhow::bail!("no `model_list`: nothing to translate");
        };
        for (i, entry) in list.iter().enumerate() {
            self.entry(i, entry);
        }
        for (key, value) in root {
            match key.as_str() {
                "model_list" => {}
                "router_settings" => self.settings("router_settings", value),
                "litellm_settings" => self.settings("litellm_settings", value),
                "general_settings" => self.general(value),
                "environment_variables" => {
                    self.note("environment_variables: set these in sluice's own environment (values not copied here)")
                }
                other => self.note(format!("{other}: no sluice equivalent")),
            }
        }
        Ok(())
    }

    /// One `model_list` entry: its account, its deployment, its group.
    fn entry(&mut self, i: usize, entry: &Value) {
        let at = format!("model_list[{i}]");
        let Some(group) = entry.get("model_name").and_then(Value::as_str) else {
            return self.note(format!("{at}: no `model_name`, skipped"));
        };
        if group.contains('*') {
            return self.note(format!(
                "{at} (`{group}`): wildcard routing has no sluice equivalent; add a [[models]] profile per model"
            ));
        }
        let empty = Map::new();
        let top = entry.as_object().unwrap_or(&empty);
        let params = entry.get("litellm_params").and_then(Value::as_object).unwrap_or(&empty);
        let info = entry.get("model_info").and_then(Value::as_object).unwrap_or(&empty);
        let extra: Vec<&str> = top
            .keys()
            .map(String::as_str)
            .filter(|k| !matches!(*k, "model_name" | "litellm_params" | "model_info" | "rpm" | "tpm"))
            .collect();
        if !extra.is_empty() {
            self.note(format!("{at}: {} not translated", extra.join(", ")));
        }
        let Some(model) = params.get("model").and_then(Value::as_str) else {
            return self.note(format!("{at} (`{group}`): no litellm_params.model, skipped"));
        };
        let Some((account, model, azure_deployment, region)) = self.account(&at, group, model, params, info) else {
            return;
        };
        let account = match self.accounts.iter().position(|a| *a == account) {
            Some(known) => known,
            None => {
                self.accounts.push(account);
                self.accounts.len() - 1
            }
        };
        let number = |map: &Map<String, Value>, key: &str| map.get(key).and_then(Value::as_f64);
        let count = |map: &Map<String, Value>, key: &str| {
            number(map, key).filter(|n| n.is_finite() && *n >= 1.0).map(|n| n.round() as u64)
        };
        // LiteLLM reads a deployment's rpm and tpm beside litellm_params first, then in it,
        // then in model_info; its order in litellm_params, then in model_info.
        let limit = |key: &str| count(top, key).or_else(|| count(params, key)).or_else(|| count(info, key));
        let order = params
            .get("order")
            .or_else(|| info.get("order"))
            .and_then(Value::as_f64)
            .filter(|o| o.is_finite() && *o >= 0.0)
            .map(|o| o.round() as u64);
        let per_million = |key: &str| {
            number(params, key).or_else(|| number(info, key)).filter(|p| p.is_finite() && *p >= 0.0).map(|p| p * 1e6)
        };
        let region = region
            .or_else(|| params.get("region_name").and_then(Value::as_str).filter(|r| is_region(r)).map(str::to_owned));
        let qualifier = region.clone().unwrap_or_else(|| host_label(&self.accounts[account].base_url));
        let deployment = Deployment {
            name: String::new(),
            group: group.to_owned(),
            account,
            model,
            azure_deployment,
            rpm: limit("rpm"),
            tpm: limit("tpm"),
            concurrency: count(params, "max_parallel_requests"),
            attempt_timeout: number(params, "timeout").and_then(seconds),
            context_window: count(info, "max_input_tokens"),
            region,
            price: (per_million("input_cost_per_token"), per_million("output_cost_per_token")),
            weight: number(params, "weight").filter(|w| w.is_finite() && *w > 0.0),
            order,
            qualifier,
        };
        let read_in = |key: &str| match key {
            "rpm" | "tpm" => vec![top, params, info],
            "order" => vec![params, info],
            _ => vec![params],
        };
        let unnumbered: Vec<&str> = ["rpm", "tpm", "max_parallel_requests", "timeout", "weight", "order"]
            .into_iter()
            .filter(|k| read_in(k).iter().any(|map| map.get(*k).is_some_and(|v| !v.is_number())))
            .collect();
        if !unnumbered.is_empty() {
            self.note(format!("{at}: {} not numbers, left out", unnumbered.join(", ")));
        }
        self.unread(&at, "litellm_params", params, &PARAMS_READ, "per-deployment request settings sluice does not add");
        self.unread(&at, "model_info", info, &INFO_READ, "metadata sluice does not keep");
        let index = self.deployments.len();
        self.deployments.push(deployment);
        match self.groups.iter_mut().find(|(name, _)| name == group) {
            Some((_, members)) => members.push(index),
            None => self.groups.push((group.to_owned(), vec![index])),
        }
    }

    /// Names the keys of `map` not in `read`.
    fn unread(&mut self, at: &str, what: &str, map: &Map<String, Value>, read: &[&str], why: &str) {
        let left: Vec<&str> = map.keys().map(String::as_str).filter(|k| !read.contains(k)).collect();
        if !left.is_empty() {
            self.note(format!("{at}.{what}: {} ({why})", left.join(", ")));
        }
    }

    /// The entry's account, its model as sluice names it, its Azure deployment and its
    /// region; `None` (noted) when sluice cannot reach it.
    fn account(
        &mut self,
        at: &str,
        group: &str,
        model: &str,
        params: &Map<String, Value>,
        info: &Map<String, Value>,
    ) -> Option<(Account, String, Option<String>, Option<String>)> {
        let (prefix, rest) = match model.split_once('/') {
            Some((prefix, rest)) if PREFIXES.contains(&prefix) => (prefix, rest),
            _ if is_openai_model(model) => ("openai", model),
            _ if model.starts_with("claude") => ("anthropic", model),
            _ => {
                let prefix = model.split_once('/').map_or(model, |(p, _)| p);
                self.note(format!(
                    "{at} (`{group}`): provider `{prefix}` has no sluice kind (openai, azure, anthropic, bedrock, \
                     vertex_ai, gemini, ollama, hosted_vllm), skipped"
                ));
                return None;
            }
        };
        let text = |key: &str| params.get(key).and_then(Value::as_str);
        let api_base = match text("api_base") {
            Some(base) if base.starts_with("os.environ/") => {
                self.note(format!(
                    "{at}.litellm_params.api_base (`{group}`): read from the environment; sluice needs the URL in \
                     the file, skipped"
                ));
                return None;
            }
            Some(base) => Some(base.trim_end_matches('/').to_owned()),
            None => None,
        };
        let mut account = Account {
            kind: "openai",
            base_url: String::new(),
            credential: Credential::None,
            api_version: None,
            region: None,
            project: None,
            publisher: None,
            bedrock_api: None,
        };
        let mut name = rest.to_owned();
        let mut azure_deployment = None;
        let mut region = None;
        match prefix {
            "openai" | "hosted_vllm" => {
                if prefix == "hosted_vllm" && api_base.is_none() {
                    self.note(format!("{at} (`{group}`): hosted_vllm without api_base, skipped"));
                    return None;
                }
                account.base_url = without_v1(api_base.as_deref().unwrap_or("https://api.openai.com"));
                account.credential = self.key(at, params, (prefix == "openai").then_some("OPENAI_API_KEY"));
            }
            "azure" => {
                let Some(base) = api_base else {
                    self.note(format!(
                        "{at} (`{group}`): azure without api_base (LiteLLM reads AZURE_API_BASE), skipped"
                    ));
                    return None;
                };
                account.kind = "azure";
                account.base_url = base;
                account.credential = self.key(at, params, Some("AZURE_API_KEY"));
                account.api_version = Some(match text("api_version") {
                    Some(v) if !v.starts_with("os.environ/") => v.to_owned(),
                    _ => {
                        self.note(format!(
                            "{at}.litellm_params.api_version (`{group}`): none in the file; wrote \
                             {AZURE_API_VERSION}, check it"
                        ));
                        AZURE_API_VERSION.to_owned()
                    }
                });
                // `azure/<deployment>`: the model itself is model_info.base_model when given.
                if let Some(base_model) = info.get("base_model").and_then(Value::as_str) {
                    let base_model = base_model.strip_prefix("azure/").unwrap_or(base_model);
                    if base_model != rest {
                        azure_deployment = Some(rest.to_owned());
                        base_model.clone_into(&mut name);
                    }
                }
            }
            "anthropic" => {
                account.kind = "anthropic";
                account.base_url = without_v1(api_base.as_deref().unwrap_or("https://api.anthropic.com"));
                account.credential = self.key(at, params, Some("ANTHROPIC_API_KEY"));
            }
            "gemini" => {
                account.kind = "gemini";
                account.base_url = "https://generativelanguage.googleapis.com".to_owned();
                account.credential = self.key(at, params, Some("GEMINI_API_KEY"));
            }
            "ollama" | "ollama_chat" => {
                account.kind = "ollama";
                account.base_url = api_base.unwrap_or_else(|| "http://localhost:11434".to_owned());
            }
            "bedrock" => {
                account.kind = "bedrock";
                let (api, model) = match rest.split_once('/') {
                    Some(("converse", model)) => (None, model),
                    Some(("invoke", model)) => (Some("invoke"), model),
                    _ => (None, rest),
                };
                account.bedrock_api = api;
                model.clone_into(&mut name);
                let aws_region = self.place(at, group, text("aws_region_name"), "aws_region_name", "us-east-1");
                account.base_url = format!("https://bedrock-runtime.{aws_region}.amazonaws.com");
                account.region = Some(aws_region.clone());
                region = Some(aws_region).filter(|r| is_region(r));
                account.credential = Credential::Aws;
                self.aws(at, params);
            }
            "vertex_ai" => {
                account.kind = "vertex";
                let location = self.place(at, group, text("vertex_location"), "vertex_location", "us-central1");
                let project = self.place(at, group, text("vertex_project"), "vertex_project", CHANGE_ME);
                account.base_url = if location == "global" {
                    "https://aiplatform.googleapis.com".to_owned()
                } else {
                    format!("https://{location}-aiplatform.googleapis.com")
                };
                account.publisher = Some(if rest.starts_with("claude") { "anthropic" } else { "google" });
                account.project = Some(project);
                account.region = Some(location.clone());
                region = Some(location).filter(|r| is_region(r));
                let file = match text("vertex_credentials") {
                    Some(path) if !path.starts_with("os.environ/") && !path.trim_start().starts_with('{') => {
                        path.to_owned()
                    }
                    _ => {
                        self.note(format!(
                            "{at}.litellm_params.vertex_credentials (`{group}`): sluice reads a service-account \
                             key file; wrote /run/secrets/vertex-service-account.json, put the key there"
                        ));
                        "/run/secrets/vertex-service-account.json".to_owned()
                    }
                };
                account.credential = Credential::ServiceAccount(file);
            }
            _ => return None,
        }
        if matches!(account.credential, Credential::Aws | Credential::ServiceAccount(_) | Credential::None)
            && params.contains_key("api_key")
        {
            self.note(format!("{at}.litellm_params.api_key (`{group}`): a {} provider takes no API key", account.kind));
        }
        Some((account, name, azure_deployment, region))
    }

    /// A region or project sluice needs in the file: the entry's, else `default` (noted).
    fn place(&mut self, at: &str, group: &str, value: Option<&str>, field: &str, default: &str) -> String {
        match value {
            Some(v) if !v.starts_with("os.environ/") && !v.is_empty() => v.to_owned(),
            _ => {
                self.note(format!(
                    "{at}.litellm_params.{field} (`{group}`): none in the file; wrote `{default}`, check it"
                ));
                default.to_owned()
            }
        }
    }

    /// Bedrock's credentials: sluice reads the standard `AWS_*` variables.
    fn aws(&mut self, at: &str, params: &Map<String, Value>) {
        let standard = [
            ("aws_access_key_id", "AWS_ACCESS_KEY_ID"),
            ("aws_secret_access_key", "AWS_SECRET_ACCESS_KEY"),
            ("aws_session_token", "AWS_SESSION_TOKEN"),
        ];
        for (field, var) in standard {
            match params.get(field).and_then(Value::as_str) {
                Some(v) if v.strip_prefix("os.environ/") == Some(var) => {}
                Some(v) if v.starts_with("os.environ/") => self.note(format!(
                    "{at}.litellm_params.{field}: sluice reads {var} (or aws_credentials_file), not the variable named"
                )),
                Some(_) => self.note(format!(
                    "{at}.litellm_params.{field}: a credential written in the file, not copied; set {var}"
                )),
                None => {}
            }
        }
        self.env.entry("AWS_ACCESS_KEY_ID".to_owned()).or_insert_with(|| "Bedrock's AWS credentials".to_owned());
        self.env.entry("AWS_SECRET_ACCESS_KEY".to_owned()).or_insert_with(|| "Bedrock's AWS credentials".to_owned());
    }

    /// Where the entry's API key comes from; `default` is the variable LiteLLM reads when
    /// the entry names none.
    fn key(&mut self, at: &str, params: &Map<String, Value>, default: Option<&str>) -> Credential {
        match params.get("api_key") {
            Some(Value::String(key)) => match key.strip_prefix("os.environ/") {
                Some(var) => Credential::Env(var.to_owned()),
                None => {
                    self.note(format!(
                        "{at}.litellm_params.api_key: a key written in the file, not copied (see the variables to \
                         set)"
                    ));
                    Credential::Literal(key.clone())
                }
            },
            Some(_) => {
                self.note(format!("{at}.litellm_params.api_key: not a string, ignored"));
                default.map_or(Credential::None, |v| Credential::Env(v.to_owned()))
            }
            None => match default {
                Some(var) => Credential::Env(var.to_owned()),
                None => {
                    self.note(format!(
                        "{at}.litellm_params.api_key: none; the provider gets api_key_env = \"{CHANGE_ME}\""
                    ));
                    Credential::Env(CHANGE_ME.to_owned())
                }
            },
        }
    }

    /// `router_settings` or `litellm_settings`.
    fn settings(&mut self, section: &str, value: &Value) {
        let Some(map) = value.as_object() else { return };
        for (key, value) in map {
            let at = format!("{section}.{key}");
            match key.as_str() {
                "routing_strategy" if section == "router_settings" => {
                    self.strategy = value.as_str().map(str::to_owned);
                }
                "fallbacks" => self.fallback_list(&at, value, ON_FAILURE),
                "context_window_fallbacks" => self.fallback_list(&at, value, ON_CONTEXT),
                "default_fallbacks" => {
                    let targets: Vec<String> = strings(value);
                    let groups: Vec<String> = self.groups.iter().map(|(g, _)| g.clone()).collect();
                    for group in groups {
                        for target in targets.iter().filter(|t| **t != group) {
                            self.fallbacks.push((group.clone(), target.clone(), ON_FAILURE));
                        }
                    }
                }
                "num_retries" => self.num_retries = value.as_u64(),
                "timeout" | "request_timeout" => {
                    self.timeout = value.as_f64().and_then(seconds);
                }
                "allowed_fails" if section == "router_settings" => {
                    self.allowed_fails = value.as_u64();
                    self.note(format!(
                        "{at}: became each deployment's breaker_failures, counted as consecutive failures where \
                         LiteLLM counts failures per minute"
                    ));
                }
                "cooldown_time" if section == "router_settings" => {
                    self.cooldown = value.as_f64().and_then(seconds);
                }
                other => {
                    let why = match other {
                        "content_policy_fallbacks" => "sluice's fallbacks have no content-policy condition",
                        "success_callback" | "failure_callback" | "callbacks" | "service_callback" => {
                            "sluice exports traces over OTLP ([telemetry]) and keeps usage itself"
                        }
                        "cache" | "cache_params" => "sluice has no response cache",
                        "max_budget" | "budget_duration" => "money budgets are `limits.budget` on a scope",
                        "redis_host" | "redis_port" | "redis_password" | "redis_url" => {
                            "a shared state store is [store] in sluice, set by hand"
                        }
                        "model_group_alias" => "add a [[models]] profile per alias",
                        "guardrails" => "sluice has no guardrails",
                        _ => "no sluice equivalent",
                    };
                    self.note(format!("{at}: {why}"));
                }
            }
        }
    }

    /// `fallbacks` as LiteLLM writes them: `[{ group: [target, …] }, …]`.
    fn fallback_list(&mut self, at: &str, value: &Value, when: &'static [&'static str]) {
        let maps: Vec<&Map<String, Value>> = match value {
            Value::Array(items) => items.iter().filter_map(Value::as_object).collect(),
            Value::Object(map) => vec![map],
            _ => Vec::new(),
        };
        if maps.is_empty() && !matches!(value, Value::Null) && !matches!(value, Value::Array(items) if items.is_empty())
        {
            self.note(format!("{at}: not a list of {{ group: [fallback groups] }}, skipped"));
        }
        for map in maps {
            for (from, targets) in map {
                let froms: Vec<String> =
                    if from == "*" { self.groups.iter().map(|(g, _)| g.clone()).collect() } else { vec![from.clone()] };
                for from in froms {
                    for target in strings(targets) {
                        if target != from {
                            self.fallbacks.push((from.clone(), target, when));
                        }
                    }
                }
            }
        }
    }

    /// `general_settings`: the master key is never copied.
    fn general(&mut self, value: &Value) {
        let Some(map) = value.as_object() else { return };
        for key in map.keys() {
            let why = match key.as_str() {
                "master_key" => {
                    "not copied: sluice stores keys as SHA-256; give clients keys with `sluice hash-key` and \
                     [[keys]] (or `sluice keys create`)"
                }
                "database_url" | "store_model_in_db" => {
                    "virtual keys, teams and budgets kept in LiteLLM's database are not in its file: recreate them \
                     as [[tenants]] and [[keys]]"
                }
                "alerting" | "alerting_threshold" => "sluice exports metrics; alert from them",
                _ => "no sluice equivalent",
            };
            self.note(format!("general_settings.{key}: {why}"));
        }
    }

    /// Names the accounts and deployments, each unique.
    fn name(&mut self) {
        let mut taken = BTreeSet::new();
        let bases: Vec<String> = self.accounts.iter().map(|a| a.kind.to_owned()).collect();
        let qualifiers: Vec<String> =
            self.accounts.iter().map(|a| a.region.clone().unwrap_or_else(|| host_label(&a.base_url))).collect();
        let names = unique_names(&bases, &qualifiers, &mut taken);
        let mut literal_vars = BTreeMap::new();
        for (account, name) in self.accounts.iter().zip(&names) {
            match &account.credential {
                Credential::Env(var) => {
                    self.env.entry(var.clone()).or_insert_with(|| format!("the API key of provider `{name}`"));
                }
                Credential::Literal(_) => {
                    let var = format!("{}_API_KEY", env_name(name));
                    self.env.insert(
                        var.clone(),
                        format!("the API key of provider `{name}` (written in the LiteLLM file, not copied)"),
                    );
                    literal_vars.insert(name.clone(), var);
                }
                _ => {}
            }
        }
        self.literal_vars = literal_vars;
        self.account_names = names;
        let mut taken = BTreeSet::new();
        let bases: Vec<String> =
            self.deployments.iter().map(|d| format!("{}-{}", safe(&d.group), self.accounts[d.account].kind)).collect();
        let qualifiers: Vec<String> = self.deployments.iter().map(|d| safe(&d.qualifier)).collect();
        let names = unique_names(&bases, &qualifiers, &mut taken);
        for (d, name) in self.deployments.iter_mut().zip(names) {
            d.name = name;
        }
    }
}

impl Translator {
    /// The sluice configuration: the notes on top, then each section.
    fn write(&mut self, source: &str) -> String {
        self.name();
        let mut body = String::new();
        if let Some(timeout) = &self.timeout {
            let _ = writeln!(body, "[server]\nupstream_timeout = {}\n", q(timeout));
        }
        body.push_str("# Provider accounts: keys come from the environment, never from this file.\n");
        for (i, a) in self.accounts.iter().enumerate() {
            let name = &self.account_names[i];
            let _ = writeln!(
                body,
                "[[providers]]\nname = {}\nkind = {}\nbase_url = {}",
                q(name),
                q(a.kind),
                q(&a.base_url)
            );
            match &a.credential {
                Credential::Env(var) => {
                    let _ = writeln!(body, "api_key_env = {}", q(var));
                }
                Credential::Literal(_) => {
                    let var = self.literal_vars.get(name).cloned().unwrap_or_default();
                    let _ = writeln!(body, "api_key_env = {}    # the key was written in the LiteLLM file", q(&var));
                }
                Credential::ServiceAccount(file) => {
                    let _ = writeln!(body, "service_account_file = {}", q(file));
                }
                Credential::Aws | Credential::None => {}
            }
            let fields = [
                ("api_version", a.api_version.as_deref()),
                ("region", a.region.as_deref()),
                ("project", a.project.as_deref()),
                ("publisher", a.publisher),
                ("bedrock_api", a.bedrock_api),
            ];
            for (field, value) in fields {
                if let Some(value) = value {
                    let _ = writeln!(body, "{field} = {}", q(value));
                }
            }
            body.push('\n');
        }
        body.push_str("# Deployments: one per model_list entry, with its limits.\n");
        let mut price_notes = Vec::new();
        for d in &self.deployments {
            let _ = writeln!(
                body,
                "[[deployments]]\nname = {}\nprovider = {}\nmodel = {}",
                q(&d.name),
                q(&self.account_names[d.account]),
                q(&d.model)
            );
            if let Some(azure) = &d.azure_deployment {
                let _ = writeln!(body, "azure_deployment = {}", q(azure));
            }
            if let Some(region) = &d.region {
                let _ = writeln!(body, "region = {}", q(region));
            }
            let limits: Vec<String> = [("rpm", d.rpm), ("tpm", d.tpm), ("concurrency", d.concurrency)]
                .into_iter()
                .filter_map(|(k, v)| v.map(|v| format!("{k} = {v}")))
                .collect();
            if !limits.is_empty() {
                let _ = writeln!(body, "limits = {{ {} }}", limits.join(", "));
            }
            if let Some(window) = d.context_window {
                let _ = writeln!(body, "context_window = {window}");
            }
            match (d.price, sluice_config::preset_price(&d.model).is_some()) {
                ((None, None), _) => {}
                ((Some(_), Some(_)), _) | (_, true) => {
                    let parts: Vec<String> = [("input", d.price.0), ("output", d.price.1)]
                        .into_iter()
                        .filter_map(|(k, v)| v.map(|v| format!("{k} = {:?}", (v * 1e6).round() / 1e6)))
                        .collect();
                    let _ = writeln!(body, "price = {{ {} }}", parts.join(", "));
                }
                _ => price_notes.push(format!(
                    "deployment `{}`: only one of input_cost_per_token and output_cost_per_token, and no preset \
                     price for `{}`; price left out",
                    d.name, d.model
                )),
            }
            if let Some(timeout) = &d.attempt_timeout {
                let _ = writeln!(body, "attempt_timeout = {}", q(timeout));
            }
            if let Some(failures) = self.allowed_fails.filter(|n| (1..=1000).contains(n)) {
                let _ = writeln!(body, "breaker_failures = {failures}");
            }
            if let Some(cooldown) = &self.cooldown {
                let _ = writeln!(body, "breaker_cooldown = {}", q(cooldown));
            }
            body.push('\n');
        }
        self.notes.extend(price_notes);
        self.models(&mut body);
        if let Some(retries) = self.num_retries {
            let attempts = retries.saturating_add(1).min(100);
            let _ = writeln!(
                body,
                "# num_retries = {retries}: attempts of one request, the first included.\n[[classes]]\nname = {}\nretry_attempts = {attempts}\n",
                q(sluice_config::DEFAULT_CLASS)
            );
        }
        body.push_str(KEYS_PLACEHOLDER);
        let mut head = format!(
            "# sluice configuration translated from the LiteLLM config `{source}` by `sluice import litellm`.\n\
             # Check it with `sluice check-config FILE`; docs/migrating-from-litellm.md tells the differences.\n"
        );
        if !self.env.is_empty() {
            head.push_str("#\n# Environment variables to set before `sluice serve`:\n");
            let width = self.env.keys().map(String::len).max().unwrap_or(0);
            for (var, what) in &self.env {
                let _ = writeln!(head, "#   {var:width$}  {what}");
            }
        }
        if !self.notes.is_empty() {
            head.push_str("#\n# Not translated (or only in part): set by hand where it matters.\n");
            for note in &self.notes {
                let _ = writeln!(head, "#   - {note}");
            }
        }
        head.push('\n');
        head + &body
    }

    /// `[[models]]`: a profile per group, a pool where the group has several entries.
    fn models(&mut self, body: &mut String) {
        body.push_str("# Model profiles: the names clients send (LiteLLM's model_name groups).\n");
        let strategy = self.strategy.clone().unwrap_or_else(|| "simple-shuffle".to_owned());
        let any_pool = self.groups.iter().any(|(_, members)| members.len() > 1);
        let mut noted = false;
        let groups = self.groups.clone();
        for (group, members) in &groups {
            let _ = writeln!(body, "[[models]]\nname = {}", q(group));
            if let [only] = members.as_slice() {
                let _ = writeln!(body, "deployment = {}", q(&self.deployments[*only].name));
            } else {
                let (placement, note) = self.placement(&strategy, members);
                if let Some(note) = note.filter(|_| !noted && any_pool) {
                    noted = true;
                    self.note(note);
                }
                let weighted = placement == Some("weighted");
                let weights = weights(members.iter().map(|m| self.deployments[*m].weight.unwrap_or(1.0)));
                let tiers = tiers(members.iter().map(|m| self.deployments[*m].order));
                let tables = (weighted && weights.iter().any(|w| *w != 1)) || tiers.iter().any(|t| *t != 0);
                let items: Vec<String> = members
                    .iter()
                    .enumerate()
                    .map(|(j, m)| {
                        let name = q(&self.deployments[*m].name);
                        if !tables {
                            return name;
                        }
                        let weight = if weighted { weights[j] } else { 1 };
                        format!("{{ deployment = {name}, weight = {weight}, tier = {} }}", tiers[j])
                    })
                    .collect();
                let _ = writeln!(body, "deployments = [{}]", items.join(", "));
                if let Some(placement) = placement {
                    let _ = writeln!(body, "strategy = {}", q(placement));
                }
            }
            let fallbacks = self.resolve_fallbacks(group);
            if !fallbacks.is_empty() {
                let items: Vec<String> = fallbacks
                    .iter()
                    .map(|(d, when)| {
                        let when: Vec<String> = when.iter().map(|w| q(w)).collect();
                        format!("{{ deployment = {}, when = [{}] }}", q(d), when.join(", "))
                    })
                    .collect();
                let _ = writeln!(body, "fallbacks = [\n  {},\n]", items.join(",\n  "));
            }
            body.push('\n');
        }
        for (from, to, _) in self.fallbacks.clone() {
            for group in [&from, &to] {
                if !self.groups.iter().any(|(g, _)| g == group) {
                    self.note(format!("fallbacks `{from}` -> `{to}`: no model_list group `{group}` was translated"));
                }
            }
        }
    }

    /// The strategy of a pool under LiteLLM's `routing_strategy`, and a note where the two differ.
    fn placement(&self, strategy: &str, members: &[usize]) -> (Option<&'static str>, Option<String>) {
        let weighted = members.iter().any(|m| self.deployments[*m].weight.is_some());
        match strategy {
            "simple-shuffle" if weighted => (Some("weighted"), None),
            "simple-shuffle" => (
                None,
                Some(
                    "router_settings.routing_strategy `simple-shuffle` (random): sluice's pools place by headroom \
                     (the member with the most capacity left) unless told otherwise"
                        .to_owned(),
                ),
            ),
            "usage-based-routing" | "usage-based-routing-v2" => (Some("headroom"), None),
            "latency-based-routing" => (Some("latency"), None),
            "least-busy" => (
                Some("headroom"),
                Some("router_settings.routing_strategy `least-busy`: placed by headroom instead".to_owned()),
            ),
            "cost-based-routing" => {
                let priced = members.iter().all(|m| {
                    let d = &self.deployments[*m];
                    matches!(d.price, (Some(_), Some(_))) || sluice_config::preset_price(&d.model).is_some()
                });
                if priced {
                    (Some("cost"), None)
                } else {
                    (
                        Some("headroom"),
                        Some(
                            "router_settings.routing_strategy `cost-based-routing`: a pool has a member without a \
                             price (input/output_cost_per_token) or preset, placed by headroom"
                                .to_owned(),
                        ),
                    )
                }
            }
            other => {
                (None, Some(format!("router_settings.routing_strategy `{other}`: unknown, pools place by headroom")))
            }
        }
    }

    /// The profile's fallbacks: each target group's first deployment, conditions merged.
    fn resolve_fallbacks(&mut self, group: &str) -> Vec<(String, Vec<&'static str>)> {
        let mut out: Vec<(String, Vec<&'static str>)> = Vec::new();
        let wanted: Vec<(String, &'static [&'static str])> = self
            .fallbacks
            .iter()
            .filter(|(from, _, _)| from == group)
            .map(|(_, to, when)| (to.clone(), *when))
            .collect();
        for (to, when) in wanted {
            let Some((_, members)) = self.groups.iter().find(|(g, _)| *g == to) else { continue };
            let tiers = tiers(members.iter().map(|m| self.deployments[*m].order));
            let Some(first) = tiers.iter().position(|t| *t == 0).map(|j| members[j]) else { continue };
            let name = self.deployments[first].name.clone();
            if members.len() > 1 {
                let note = format!(
                    "fallbacks `{group}` -> `{to}`: a sluice fallback names one deployment; `{name}` only, of the \
                     group's {}",
                    members.len()
                );
                if !self.notes.contains(&note) {
                    self.note(note);
                }
            }
            match out.iter_mut().find(|(d, _)| *d == name) {
                Some((_, known)) => {
                    for w in when {
                        if !known.contains(w) {
                            known.push(w);
                        }
                    }
                }
                None => out.push((name, when.to_vec())),
            }
        }
        out
    }
}

/// The tier of each member of a group from LiteLLM's `order`: the distinct orders, lowest
/// first, are tiers 0, 1, …; a member without one, in a group where others have one, is
/// in the tier after them (LiteLLM takes it only when no member with an order is healthy).
fn tiers(orders: impl Iterator<Item = Option<u64>>) -> Vec<u64> {
    let orders: Vec<Option<u64>> = orders.collect();
    let distinct: BTreeSet<u64> = orders.iter().flatten().copied().collect();
    let last = u64::try_from(distinct.len()).unwrap_or(u64::MAX);
    orders
        .iter()
        .map(|order| match order {
            Some(o) => u64::try_from(distinct.range(..o).count()).unwrap_or(u64::MAX),
            None if distinct.is_empty() => 0,
            None => last,
        })
        .map(|tier| tier.min(MAX_TIER))
        .collect()
}

/// Integer weights between 1 and 1000 in the ratios of `raw`.
fn weights(raw: impl Iterator<Item = f64>) -> Vec<u64> {
    let raw: Vec<f64> = raw.collect();
    let max = raw.iter().copied().fold(0.0_f64, f64::max);
    if raw.iter().all(|w| w.fract() == 0.0 && *w >= 1.0 && *w <= 1000.0) {
        return raw.iter().map(|w| *w as u64).collect();
    }
    raw.iter().map(|w| ((w / max) * 1000.0).round().clamp(1.0, 1000.0) as u64).collect()
}

/// The tenant and the commented key the operator fills in.
const KEYS_PLACEHOLDER: &str = "\
# Who calls. LiteLLM's virtual keys, teams and budgets live in its database, not its file:
# recreate them here. sluice stores only the SHA-256 of a key: for each key your clients use,
# run `sluice hash-key` (it reads the key on standard input) and add an entry like the one
# below. Never put the key itself, or LiteLLM's master key, in this file.
[[tenants]]
name = \"default\"

# [[keys]]
# id = \"client-1\"
# tenant = \"default\"
# sha256 = \"<what `sluice hash-key` printed>\"
";

/// `litellm_params` read into the deployment or its account.
const PARAMS_READ: [&str; 20] = [
    "model",
    "api_key",
    "api_base",
    "api_version",
    "rpm",
    "tpm",
    "max_parallel_requests",
    "timeout",
    "weight",
    "order",
    "input_cost_per_token",
    "output_cost_per_token",
    "region_name",
    "aws_region_name",
    "aws_access_key_id",
    "aws_secret_access_key",
    "aws_session_token",
    "vertex_project",
    "vertex_location",
    "vertex_credentials",
];
/// `model_info` read (or of no consequence: `mode`, `id`).
const INFO_READ: [&str; 9] = [
    "id",
    "mode",
    "base_model",
    "max_input_tokens",
    "input_cost_per_token",
    "output_cost_per_token",
    "rpm",
    "tpm",
    "order",
];
/// Provider prefixes of `litellm_params.model` that sluice serves.
const PREFIXES: [&str; 9] =
    ["openai", "azure", "anthropic", "bedrock", "vertex_ai", "gemini", "ollama", "ollama_chat", "hosted_vllm"];

/// Models LiteLLM sends to OpenAI without a prefix.
fn is_openai_model(model: &str) -> bool {
    ["gpt-", "o1", "o3", "o4", "chatgpt-", "text-embedding-", "dall-e", "whisper", "tts-"]
        .iter()
        .any(|p| model.starts_with(p))
}

/// A base URL without the `/v1` sluice appends itself.
fn without_v1(url: &str) -> String {
    let url = url.trim_end_matches('/');
    url.strip_suffix("/v1").unwrap_or(url).to_owned()
}

/// The first label of a URL's host (`https://acme-eastus.openai.azure.com` → `acme-eastus`).
fn host_label(url: &str) -> String {
    let host = url.split("://").nth(1).unwrap_or(url);
    let host = host.split(['/', ':']).next().unwrap_or(host);
    host.split('.').next().unwrap_or(host).to_owned()
}

/// A region sluice accepts on a deployment.
fn is_region(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.'))
}

/// A name's characters safe in a derived name.
fn safe(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '-' }).collect()
}

/// An environment variable's name from a provider's name.
fn env_name(name: &str) -> String {
    let upper: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' }).collect();
    format!("SLUICE_{upper}")
}

/// `bases[i]` where it is unique, `bases[i]-qualifiers[i]` where it is not, and a number
/// after that while still taken.
fn unique_names(bases: &[String], qualifiers: &[String], taken: &mut BTreeSet<String>) -> Vec<String> {
    let mut names = Vec::with_capacity(bases.len());
    for (base, qualifier) in bases.iter().zip(qualifiers) {
        let shared = bases.iter().filter(|b| *b == base).count() > 1;
        let first = if shared && !qualifier.is_empty() { format!("{base}-{qualifier}") } else { base.clone() };
        let mut name = first.clone();
        let mut n = 2;
        while taken.contains(&name) {
            name = format!("{first}-{n}");
            n += 1;
        }
        taken.insert(name.clone());
        names.push(name);
    }
    names
}

/// LiteLLM's seconds as a sluice duration.
fn seconds(s: f64) -> Option<String> {
    if !s.is_finite() || s <= 0.0 {
        return None;
    }
    let millis = (s * 1000.0).round() as u64;
    Some(if millis.is_multiple_of(1000) { format!("{}s", millis / 1000) } else { format!("{millis}ms") })
}

/// A string or a list of strings.
fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        _ => Vec::new(),
    }
}

/// A TOML basic string.
fn q(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three groups: Azure in two regions (a pool), OpenAI, Anthropic; keys from the
    /// environment; router settings and fallbacks; and settings sluice has no place for.
    const THREE_GROUPS: &str = r#"
model_list:
  - model_name: gpt-4o
    litellm_params:
      model: azure/gpt-4o-eastus
      api_base: https://acme-eastus.openai.azure.com/
      api_key: os.environ/AZURE_EASTUS_KEY
      api_version: "2024-10-21"
      rpm: 600
      tpm: 100000
      weight: 2
    model_info:
      base_model: azure/gpt-4o
      supports_vision: true
  - model_name: gpt-4o
    litellm_params:
      model: azure/gpt-4o-swedencentral
      api_base: https://acme-sweden.openai.azure.com
      api_key: os.environ/AZURE_SWEDEN_KEY
      api_version: "2024-10-21"
      region_name: swedencentral
      tpm: 50000
      weight: 1
    model_info:
      base_model: azure/gpt-4o
  - model_name: gpt-4o-mini
    litellm_params:
      model: openai/gpt-4o-mini
      api_key: os.environ/OPENAI_API_KEY
      rpm: 500
      temperature: 0.2
  - model_name: claude-sonnet
    litellm_params:
      model: anthropic/claude-sonnet-4-5
      api_key: os.environ/ANTHROPIC_API_KEY
      tpm: 400000
      timeout: 90
    model_info:
      max_input_tokens: 200000

router_settings:
  routing_strategy: simple-shuffle
  num_retries: 2
  timeout: 300
  allowed_fails: 3
  cooldown_time: 30
  redis_host: redis.internal
  fallbacks:
    - gpt-4o: ["claude-sonnet", "gpt-4o-mini"]
  context_window_fallbacks:
    - gpt-4o-mini: ["claude-sonnet"]

litellm_settings:
  success_callback: ["langfuse"]
  cache: true
  drop_params: true

general_settings:
  master_key: sk-litellm-master-1234
  database_url: postgresql://u:p@db/litellm
"#;

    fn config(t: &Translation) -> sluice_config::Config {
        match sluice_config::parse(&t.toml) {
            Ok(config) => config,
            Err(e) => panic!("{e}\n---\n{}", t.toml),
        }
    }

    #[test]
    fn three_groups_become_providers_deployments_and_a_pool_that_validate() {
        let t = translate(THREE_GROUPS, "config.yaml").unwrap();
        let config = config(&t);
        // Two Azure accounts (two resources), OpenAI, Anthropic.
        assert_eq!(config.providers.len(), 4, "{}", t.toml);
        assert_eq!(config.deployments.len(), 4);
        assert_eq!(config.models.len(), 3);
        let pool = config.models.iter().find(|m| &*m.name == "gpt-4o").unwrap();
        assert_eq!(pool.pool.len(), 2);
        assert_eq!(pool.strategy, sluice_config::Placement::Weighted);
        assert_eq!(pool.pool.iter().map(|m| m.weight).collect::<Vec<_>>(), [2, 1]);
        let names: Vec<&str> = pool.pool.iter().map(|m| &*config.deployments[m.deployment].name).collect();
        assert_eq!(names, ["gpt-4o-azure-acme-eastus", "gpt-4o-azure-swedencentral"]);
        let east = &config.deployments[pool.pool[0].deployment];
        assert_eq!(east.model, "gpt-4o");
        assert_eq!(east.azure_deployment.as_deref(), Some("gpt-4o-eastus"));
        assert_eq!(config.deployments[pool.pool[1].deployment].region.as_deref(), Some("swedencentral"));
        // Fallbacks: general conditions to Claude and the mini; the mini's on context length.
        let to: Vec<&str> = pool.fallbacks.iter().map(|f| &*config.deployments[f.deployment].name).collect();
        assert_eq!(to, ["claude-sonnet-anthropic", "gpt-4o-mini-openai"]);
        assert!(t.toml.contains(
            r#"when = ["provider_5xx", "rate_limit_after_retry_budget", "primary_unavailable", "queue_wait_exceeded"]"#
        ));
        assert!(t.toml.contains(r#"{ deployment = "claude-sonnet-anthropic", when = ["context_length_needed"] }"#));
        // Keys from the environment, retries, timeouts, breaker.
        assert!(t.toml.contains(r#"api_key_env = "AZURE_EASTUS_KEY""#));
        assert!(t.env.iter().any(|(var, _)| var == "AZURE_SWEDEN_KEY"));
        assert!(t.toml.contains("retry_attempts = 3"));
        assert!(t.toml.contains(r#"upstream_timeout = "300s""#));
        assert!(t.toml.contains(r#"attempt_timeout = "90s""#));
        assert!(t.toml.contains("breaker_failures = 3"));
        assert!(t.toml.contains("context_window = 200000"));
        assert!(t.toml.contains("[[tenants]]"));
    }

    #[test]
    fn untranslated_fields_are_named_in_the_list_and_the_header() {
        let t = translate(THREE_GROUPS, "config.yaml").unwrap();
        for field in [
            "litellm_settings.success_callback",
            "litellm_settings.cache",
            "litellm_settings.drop_params",
            "router_settings.redis_host",
            "general_settings.master_key",
            "general_settings.database_url",
            "model_list[2].litellm_params: temperature",
            "model_list[0].model_info: supports_vision",
        ] {
            assert!(t.untranslated.iter().any(|n| n.starts_with(field)), "{field} not named: {:#?}", t.untranslated);
            assert!(t.toml.contains(&format!("#   - {field}")), "{field} not in the header");
        }
        // Values are never echoed: not the master key, not the database URL.
        assert!(!t.toml.contains("sk-litellm-master-1234"));
        assert!(!t.toml.contains("postgresql://"));
        assert!(!t.untranslated.iter().any(|n| n.contains("sk-litellm-master-1234")));
    }

    #[test]
    fn a_literal_api_key_never_reaches_the_output() {
        let yaml = r#"
model_list:
  - model_name: gpt-4o
    litellm_params:
      model: openai/gpt-4o
      api_key: sk-proj-VERYSECRET0123456789
"#;
        let t = translate(yaml, "c.yaml").unwrap();
        config(&t);
        assert!(!t.toml.contains("VERYSECRET"), "{}", t.toml);
        assert!(!t.untranslated.iter().chain(t.env.iter().map(|(_, w)| w)).any(|n| n.contains("VERYSECRET")));
        assert!(t.toml.contains(r#"api_key_env = "SLUICE_OPENAI_API_KEY""#), "{}", t.toml);
        assert!(t.env.iter().any(|(var, what)| var == "SLUICE_OPENAI_API_KEY" && what.contains("not copied")));
        assert!(t.untranslated.iter().any(|n| n.starts_with("model_list[0].litellm_params.api_key")));
    }

    #[test]
    fn routing_strategies_map_to_pool_strategies() {
        let pool = |strategy: &str| {
            format!(
                "model_list:\n\
                 - model_name: g\n  litellm_params: {{ model: openai/gpt-4o, api_key: os.environ/A, order: 1 }}\n\
                 - model_name: g\n  litellm_params: {{ model: openai/gpt-4o, api_base: https://proxy.example/v1, api_key: os.environ/B, order: 2 }}\n\
                 router_settings: {{ routing_strategy: {strategy} }}\n"
            )
        };
        for (litellm, sluice) in [
            ("usage-based-routing-v2", sluice_config::Placement::Headroom),
            ("latency-based-routing", sluice_config::Placement::Latency),
            ("cost-based-routing", sluice_config::Placement::Cost),
            ("least-busy", sluice_config::Placement::Headroom),
        ] {
            let t = translate(&pool(litellm), "c.yaml").unwrap();
            let config = config(&t);
            assert_eq!(config.models[0].strategy, sluice, "{litellm}");
            // `order: 2` is the second tier.
            assert_eq!(config.models[0].pool.iter().map(|m| m.tier).collect::<Vec<_>>(), [0, 1], "{litellm}");
            assert_eq!(config.providers[1].base_url, "https://proxy.example");
        }
    }

    #[test]
    fn limits_and_order_are_read_where_litellm_reads_them() {
        // rpm/tpm beside litellm_params win over those in it, which win over model_info's;
        // order is read from litellm_params, else model_info.
        let yaml = r#"
model_list:
  - model_name: g
    rpm: 900
    litellm_params: { model: openai/gpt-4o, api_key: os.environ/A, rpm: 100, tpm: 5000 }
    model_info: { order: 2 }
  - model_name: g
    tpm: 40000
    litellm_params: { model: openai/gpt-4o, api_base: https://proxy.example, api_key: os.environ/B }
    model_info: { rpm: 60, order: 1 }
  - model_name: g
    litellm_params: { model: openai/gpt-4o, api_base: https://other.example, api_key: os.environ/C }
  - model_name: h
    litellm_params: { model: openai/gpt-4o-mini, api_key: os.environ/A }
router_settings:
  fallbacks: [{ h: [g] }]
"#;
        let t = translate(yaml, "c.yaml").unwrap();
        let config = config(&t);
        assert!(t.toml.contains("limits = { rpm = 900, tpm = 5000 }"), "{}", t.toml);
        assert!(t.toml.contains("limits = { rpm = 60, tpm = 40000 }"), "{}", t.toml);
        assert!(!t.untranslated.iter().any(|n| n.contains("not translated")), "{:#?}", t.untranslated);
        let pool = config.models.iter().find(|m| &*m.name == "g").unwrap();
        // Order 2, order 1, none: the member without an order comes last, as in LiteLLM.
        assert_eq!(pool.pool.iter().map(|m| m.tier).collect::<Vec<_>>(), [1, 0, 2], "{}", t.toml);
        // A fallback to the group goes to its first tier's member.
        let h = config.models.iter().find(|m| &*m.name == "h").unwrap();
        assert_eq!(h.fallbacks.len(), 1);
        assert_eq!(h.fallbacks[0].deployment, pool.pool[1].deployment, "{}", t.toml);
    }

    #[test]
    fn bedrock_vertex_and_gemini_entries_validate() {
        let yaml = r#"
model_list:
  - model_name: claude-bedrock
    litellm_params:
      model: bedrock/converse/us.anthropic.claude-sonnet-4-20250514-v1:0
      aws_region_name: us-west-2
      aws_access_key_id: os.environ/AWS_ACCESS_KEY_ID
      aws_secret_access_key: os.environ/AWS_SECRET_ACCESS_KEY
  - model_name: gemini-vertex
    litellm_params:
      model: vertex_ai/gemini-2.5-pro
      vertex_project: acme-ml
      vertex_location: europe-west4
      vertex_credentials: /etc/gcp/sa.json
  - model_name: gemini
    litellm_params:
      model: gemini/gemini-2.5-flash
      api_key: os.environ/GEMINI_API_KEY
  - model_name: local
    litellm_params:
      model: ollama/llama3.1
"#;
        let t = translate(yaml, "c.yaml").unwrap();
        let config = config(&t);
        assert_eq!(config.providers.len(), 4, "{}", t.toml);
        assert!(t.toml.contains(r#"base_url = "https://bedrock-runtime.us-west-2.amazonaws.com""#));
        assert!(t.toml.contains(r#"model = "us.anthropic.claude-sonnet-4-20250514-v1:0""#));
        assert!(t.toml.contains(r#"base_url = "https://europe-west4-aiplatform.googleapis.com""#));
        assert!(t.toml.contains(r#"service_account_file = "/etc/gcp/sa.json""#));
        assert!(t.env.iter().any(|(var, _)| var == "AWS_ACCESS_KEY_ID"));
    }

    #[test]
    fn unsupported_providers_and_wildcards_are_named_and_skipped() {
        let yaml = r#"
model_list:
  - model_name: "*"
    litellm_params: { model: "openai/*" }
  - model_name: mixtral
    litellm_params: { model: groq/mixtral-8x7b, api_key: os.environ/GROQ_API_KEY }
  - model_name: gpt-4o
    litellm_params: { model: gpt-4o }
router_settings:
  fallbacks: [{ gpt-4o: [mixtral] }]
"#;
        let t = translate(yaml, "c.yaml").unwrap();
        let config = config(&t);
        assert_eq!(config.deployments.len(), 1);
        assert!(t.untranslated.iter().any(|n| n.starts_with("model_list[0]") && n.contains("wildcard")));
        assert!(t.untranslated.iter().any(|n| n.starts_with("model_list[1]") && n.contains("`groq`")));
        assert!(t.untranslated.iter().any(|n| n.contains("`gpt-4o` -> `mixtral`")));
        assert!(translate("model_list: []", "c.yaml").is_err());
        assert!(translate("not: [valid", "c.yaml").is_err());
    }

    #[test]
    fn anchors_and_merge_keys_are_read_and_odd_values_named() {
        let yaml = r#"
common: &azure
  api_base: https://acme.openai.azure.com
  api_key: os.environ/AZURE_API_KEY
  api_version: "2024-10-21"
model_list:
  - model_name: gpt-4o
    litellm_params:
      <<: *azure
      model: azure/gpt-4o
      rpm: "600"
"#;
        let t = translate(yaml, "c.yaml").unwrap();
        config(&t);
        assert!(t.toml.contains(r#"base_url = "https://acme.openai.azure.com""#), "{}", t.toml);
        assert!(t.untranslated.iter().any(|n| n == "common: no sluice equivalent"), "{:#?}", t.untranslated);
        assert!(t.untranslated.iter().any(|n| n.contains("rpm not numbers")), "{:#?}", t.untranslated);
    }

    #[test]
    fn names_are_unique_and_weights_keep_their_ratio() {
        let taken = &mut BTreeSet::new();
        let names = unique_names(
            &["a".into(), "a".into(), "a".into(), "b".into()],
            &["x".into(), "x".into(), "y".into(), "z".into()],
            taken,
        );
        assert_eq!(names, ["a-x", "a-x-2", "a-y", "b"]);
        assert_eq!(weights([0.25, 0.75].into_iter()), [333, 1000]);
        // Distinct orders, lowest first, are tiers; a member without one comes after them.
        assert_eq!(tiers([Some(2), None, Some(5), Some(2)].into_iter()), [0, 2, 1, 0]);
        assert_eq!(tiers([None, None].into_iter()), [0, 0]);
        assert_eq!(tiers((0..12).map(Some)).last(), Some(&MAX_TIER));
        assert_eq!(weights([2.0, 1.0].into_iter()), [2, 1]);
        assert_eq!(seconds(1.5).as_deref(), Some("1500ms"));
        assert_eq!(without_v1("https://api.openai.com/v1/"), "https://api.openai.com");
        assert_eq!(q("a\"b\\c\n"), r#""a\"b\\c\u000A""#);
    }
}
