//! Raw → validated: every rule that a serde type cannot express, with its line.

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use sha2::Digest as _;
use sluice_quota::{Dimension, Limits, RateLimit};
use toml::Spanned;

use crate::defaults;
use crate::error::{ConfigError, Source};
use crate::model::*;
use crate::raw::*;

type Result<T> = std::result::Result<T, ConfigError>;

pub(crate) struct Validator<'a> {
    pub source: Source<'a>,
}

impl Validator<'_> {
    fn err(&self, field: &str, span: Range<usize>, message: impl Into<String>) -> ConfigError {
        self.source.error(field, span, message)
    }

    pub fn config(&self, raw: RawConfig) -> Result<Config> {
        let server = self.server(&raw.server)?;
        let store = self.store(&raw.store)?;
        let org_name = raw.org.name.as_ref().map_or("org", |n| n.get_ref().as_str());
        let org = (Arc::from(org_name), self.limits("org.limits", &raw.org.limits)?);
        let providers = self.providers(&raw.providers)?;
        let deployments = self.deployments(&raw.deployments, &providers)?;
        let classes = self.classes(&raw.classes)?;
        let models = self.models(&raw.models, &deployments, &classes)?;
        let tenants = self.tenants(&raw.tenants)?;
        let keys = self.keys(&raw.keys, &tenants, &classes)?;
        let jobs = self.jobs(&raw.jobs)?;
        let key_sha256 = raw.admin.key_sha256.as_ref().map(|k| self.sha256("admin.key_sha256", k)).transpose()?;
        let admin = Admin { key_sha256 };
        Ok(Config { server, store, org, providers, deployments, models, tenants, keys, classes, jobs, admin })
    }

    fn server(&self, raw: &RawServer) -> Result<Server> {
        let listen = match &raw.listen {
            None => defaults::LISTEN.parse().map_err(|_| self.err("server.listen", 0..0, "bad default"))?,
            Some(s) => s.get_ref().parse().map_err(|_| {
                self.err("server.listen", s.span(), format!("`{}` is not an address like 127.0.0.1:8080", s.get_ref()))
            })?,
        };
        let max_body = raw.max_body_bytes.as_ref().map_or(defaults::MAX_BODY_BYTES, |s| *s.get_ref());
        if max_body < 1024 {
            let span = raw.max_body_bytes.as_ref().map_or(0..0, Spanned::span);
            return Err(self.err("server.max_body_bytes", span, "must be at least 1024"));
        }
        Ok(Server {
            listen,
            max_body_bytes: usize::try_from(max_body).unwrap_or(usize::MAX),
            upstream_timeout: self.duration(
                "server.upstream_timeout",
                &raw.upstream_timeout,
                defaults::UPSTREAM_TIMEOUT,
            )?,
            connect_timeout: self.duration(
                "server.connect_timeout",
                &raw.connect_timeout,
                defaults::CONNECT_TIMEOUT,
            )?,
            lease: self.duration("server.lease", &raw.lease, defaults::LEASE)?,
            shutdown_grace: self.duration("server.shutdown_grace", &raw.shutdown_grace, defaults::SHUTDOWN_GRACE)?,
            tls: match (&raw.tls_cert, &raw.tls_key) {
                (None, None) => None,
                (Some(c), Some(k)) => Some((c.get_ref().into(), k.get_ref().into())),
                (Some(c), None) => return Err(self.err("server.tls_key", c.span(), "tls_cert needs tls_key too")),
                (None, Some(k)) => return Err(self.err("server.tls_cert", k.span(), "tls_key needs tls_cert too")),
            },
            idempotency_ttl: self.duration(
                "server.idempotency_ttl",
                &raw.idempotency_ttl,
                defaults::IDEMPOTENCY_TTL,
            )?,
            idempotency_wait: self.duration(
                "server.idempotency_wait",
                &raw.idempotency_wait,
                defaults::IDEMPOTENCY_WAIT,
            )?,
        })
    }

    fn store(&self, raw: &RawStore) -> Result<Store> {
        let kind = match (raw.kind.as_ref().map(|k| (k.get_ref().as_str(), k.span())), &raw.url, &raw.cluster) {
            (None | Some(("memory", _)), None, None) => StoreKind::Memory,
            (None | Some(("memory", _)), Some(u), _) => {
                return Err(self.err("store.url", u.span(), "set `kind = \"redis\"` to use a Redis URL"));
            }
            (None | Some(("memory", _)), None, Some(c)) => {
                return Err(self.err("store.cluster", c.span(), "set `kind = \"redis\"` to use a cluster"));
            }
            (Some(("redis", span)), url, cluster) => self.redis(span, url.as_ref(), cluster.as_ref())?,
            (Some((other, span)), _, _) => {
                return Err(self.err("store.kind", span, format!("unknown store `{other}` (memory or redis)")));
            }
        };
        let on_unavailable = match raw.on_unavailable.as_ref().map(|o| (o.get_ref().as_str(), o.span())) {
            None | Some(("fail_closed", _)) => Unavailable::FailClosed,
            Some(("fail_open_local", _)) => Unavailable::FailOpenLocal,
            Some((_, span)) => {
                return Err(self.err("store.on_unavailable", span, "fail_closed or fail_open_local"));
            }
        };
        let instances = match &raw.instances {
            None => NonZeroU64::MIN,
            Some(n) => self.positive("store.instances", n)?,
        };
        let prefix = raw.prefix.as_ref().map_or(defaults::REDIS_PREFIX.to_owned(), |p| p.get_ref().clone());
        if prefix.is_empty() || prefix.contains(['{', '}']) {
            let span = raw.prefix.as_ref().map_or(0..0, Spanned::span);
            return Err(self.err("store.prefix", span, "must be non-empty and without braces"));
        }
        let timeout = self.duration("store.timeout", &raw.timeout, defaults::STORE_TIMEOUT)?;
        Ok(Store { kind, prefix, timeout, on_unavailable, instances })
    }

    fn redis(
        &self,
        span: Range<usize>,
        url: Option<&Spanned<String>>,
        cluster: Option<&Spanned<Vec<String>>>,
    ) -> Result<StoreKind> {
        let valid = |u: &str| u.starts_with("redis://") || u.starts_with("rediss://") || u.starts_with("unix://");
        match (url, cluster) {
            (Some(u), None) if valid(u.get_ref()) => Ok(StoreKind::Redis(u.get_ref().clone())),
            (Some(u), None) => Err(self.err("store.url", u.span(), "must start with redis://, rediss:// or unix://")),
            (None, Some(c)) if !c.get_ref().is_empty() && c.get_ref().iter().all(|u| valid(u)) => {
                Ok(StoreKind::RedisCluster(c.get_ref().clone()))
            }
            (None, Some(c)) => Err(self.err("store.cluster", c.span(), "a non-empty list of redis:// seed URLs")),
            (Some(_), Some(c)) => Err(self.err("store.cluster", c.span(), "set url or cluster, not both")),
            (None, None) => Err(self.err("store.kind", span, "a Redis store needs `url` or `cluster`")),
        }
    }

    pub(crate) fn duration(&self, field: &str, raw: &Option<Spanned<String>>, default: Duration) -> Result<Duration> {
        let Some(s) = raw else { return Ok(default) };
        let d = humantime::parse_duration(s.get_ref()).map_err(|e| {
            self.err(field, s.span(), format!("`{}` is not a duration like 2s or 10m: {e}", s.get_ref()))
        })?;
        if d.is_zero() {
            return Err(self.err(field, s.span(), "must be longer than zero"));
        }
        Ok(d)
    }

    pub fn limits(&self, field: &str, raw: &RawLimits) -> Result<Limits> {
        let minute = Duration::from_secs(60);
        let day = Duration::from_secs(86_400);
        let burst = match &raw.burst_seconds {
            None => Duration::from_secs(sluice_quota::limit::DEFAULT_BURST_SECONDS),
            Some(b) if b.get_ref().is_finite() && *b.get_ref() > 0.0 && *b.get_ref() <= 86_400.0 => {
                Duration::from_secs_f64(*b.get_ref())
            }
            Some(b) => {
                return Err(self.err(&format!("{field}.burst_seconds"), b.span(), "must be between 0 and 86400"));
            }
        };
        let entries = [
            ("rpm", &raw.rpm, Dimension::Requests, minute),
            ("tpm", &raw.tpm, Dimension::TotalTokens, minute),
            ("input_tpm", &raw.input_tpm, Dimension::InputTokens, minute),
            ("output_tpm", &raw.output_tpm, Dimension::OutputTokens, minute),
            ("rpd", &raw.rpd, Dimension::Requests, day),
            ("tpd", &raw.tpd, Dimension::TotalTokens, day),
        ];
        let mut limits = Limits::unlimited();
        for (name, value, dimension, period) in entries {
            let Some(value) = value else { continue };
            let amount = self.positive(&format!("{field}.{name}"), value)?;
            let window = if period == day { Duration::from_secs(86_400) } else { burst };
            limits = limits.with_rate(RateLimit::new(dimension, amount, period).with_burst_window(window));
        }
        if let Some(c) = &raw.concurrency {
            limits = limits.with_concurrency(self.positive(&format!("{field}.concurrency"), c)?);
        }
        Ok(limits)
    }

    fn positive(&self, field: &str, value: &Spanned<u64>) -> Result<NonZeroU64> {
        NonZeroU64::new(*value.get_ref())
            .ok_or_else(|| self.err(field, value.span(), "must be a positive number (leave it out for no limit)"))
    }

    fn unique<'n>(
        &self,
        what: &str,
        names: impl Iterator<Item = &'n Spanned<String>>,
    ) -> Result<HashMap<String, usize>> {
        let mut seen = HashMap::new();
        for (i, name) in names.enumerate() {
            let n = name.get_ref();
            if n.is_empty() || n.len() > 128 || n.chars().any(|c| c.is_control() || c == '{' || c == '}') {
                return Err(self.err(
                    &format!("{what}[{i}].name"),
                    name.span(),
                    "names are 1-128 printable characters without braces",
                ));
            }
            if seen.insert(n.clone(), i).is_some() {
                return Err(self.err(&format!("{what}[{i}].name"), name.span(), format!("`{n}` is defined twice")));
            }
        }
        Ok(seen)
    }

    fn reference(
        &self,
        field: &str,
        name: &Spanned<String>,
        known: &HashMap<String, usize>,
        what: &str,
    ) -> Result<usize> {
        known.get(name.get_ref()).copied().ok_or_else(|| {
            let mut names: Vec<&str> = known.keys().map(String::as_str).collect();
            names.sort_unstable();
            self.err(field, name.span(), format!("no {what} named `{}` (known: {})", name.get_ref(), names.join(", ")))
        })
    }

    fn providers(&self, raw: &[RawProvider]) -> Result<Vec<Provider>> {
        self.unique("providers", raw.iter().map(|p| &p.name))?;
        raw.iter().enumerate().map(|(i, p)| self.provider(i, p)).collect()
    }

    fn provider(&self, i: usize, p: &RawProvider) -> Result<Provider> {
        let kind = match p.kind.get_ref().as_str() {
            "openai" | "azure" | "gemini" => ProviderKind::OpenAi,
            "anthropic" => ProviderKind::Anthropic,
            "ollama" => ProviderKind::Ollama,
            other => {
                let msg = format!("unknown kind `{other}` (openai, azure, gemini, anthropic, ollama)");
                return Err(self.err(&format!("providers[{i}].kind"), p.kind.span(), msg));
            }
        };
        let url = p.base_url.get_ref().trim_end_matches('/');
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(self.err(
                &format!("providers[{i}].base_url"),
                p.base_url.span(),
                "must start with http:// or https://",
            ));
        }
        let api_key = match (&p.api_key_env, &p.api_key_file) {
            (Some(_), Some(f)) => {
                return Err(self.err(
                    &format!("providers[{i}].api_key_file"),
                    f.span(),
                    "set api_key_env or api_key_file, not both",
                ));
            }
            (Some(e), None) => SecretSource::Env(e.get_ref().clone()),
            (None, Some(f)) => SecretSource::File(f.get_ref().clone()),
            (None, None) if kind == ProviderKind::Ollama => SecretSource::None,
            (None, None) => {
                return Err(self.err(&format!("providers[{i}]"), p.name.span(), "needs api_key_env or api_key_file"));
            }
        };
        Ok(Provider { name: Arc::from(p.name.get_ref().as_str()), kind, base_url: url.to_owned(), api_key })
    }

    fn deployments(&self, raw: &[RawDeployment], providers: &[Provider]) -> Result<Vec<Deployment>> {
        self.unique("deployments", raw.iter().map(|d| &d.name))?;
        let known: HashMap<String, usize> =
            providers.iter().enumerate().map(|(i, p)| (p.name.to_string(), i)).collect();
        raw.iter()
            .enumerate()
            .map(|(i, d)| {
                let provider =
                    self.reference(&format!("deployments[{i}].provider"), &d.provider, &known, "provider")?;
                self.deployment(i, d, provider, providers[provider].kind)
            })
            .collect()
    }

    fn deployment(&self, i: usize, d: &RawDeployment, provider: usize, kind: ProviderKind) -> Result<Deployment> {
        let field = |f: &str| format!("deployments[{i}].{f}");
        let tokenizer = match d.tokenizer.as_ref().map(|t| (t.get_ref().as_str(), t.span())) {
            None | Some(("auto", _)) => Tokenizer::Auto,
            Some(("o200k", _)) => Tokenizer::O200k,
            Some(("cl100k", _)) => Tokenizer::Cl100k,
            Some((other, span)) => match other.strip_prefix("chars/").and_then(|n| n.parse::<f64>().ok()) {
                Some(n) if n > 0.0 && n.is_finite() => Tokenizer::Approx(n),
                _ => return Err(self.err(&field("tokenizer"), span, "auto, o200k, cl100k or chars/N (e.g. chars/4)")),
            },
        };
        let default_factor = if kind == ProviderKind::OpenAi { 1.0 } else { defaults::APPROX_SAFETY_FACTOR };
        let input_safety_factor = match &d.input_safety_factor {
            None => default_factor,
            Some(f) if (1.0..=4.0).contains(f.get_ref()) => *f.get_ref(),
            Some(f) => return Err(self.err(&field("input_safety_factor"), f.span(), "must be between 1.0 and 4.0")),
        };
        let default_counting =
            if kind == ProviderKind::Anthropic { OutputCounting::Actual } else { OutputCounting::Reserved };
        let output_counting = match d.output_counting.as_ref().map(|o| (o.get_ref().as_str(), o.span())) {
            None => default_counting,
            Some(("reserved", _)) => OutputCounting::Reserved,
            Some(("actual", _)) => OutputCounting::Actual,
            Some((_, span)) => return Err(self.err(&field("output_counting"), span, "reserved or actual")),
        };
        Ok(Deployment {
            name: Arc::from(d.name.get_ref().as_str()),
            provider,
            model: d.model.get_ref().clone(),
            // A deployment's limits mirror the provider's: its buckets keep a send guard.
            limits: self.limits(&field("limits"), &self.preset_limits(i, d)?)?.guarded(),
            adaptive: self.adaptive(i, d, kind, output_counting)?,
            tokenizer,
            input_safety_factor,
            output_counting,
            attempt_timeout: self.duration(&field("attempt_timeout"), &d.attempt_timeout, defaults::ATTEMPT_TIMEOUT)?,
            breaker_failures: match &d.breaker_failures {
                None => defaults::BREAKER_FAILURES,
                Some(n) => u32::try_from(*n.get_ref())
                    .ok()
                    .filter(|n| (1..=1000).contains(n))
                    .ok_or_else(|| self.err(&field("breaker_failures"), n.span(), "between 1 and 1000"))?,
            },
            breaker_cooldown: self.duration(
                &field("breaker_cooldown"),
                &d.breaker_cooldown,
                defaults::BREAKER_COOLDOWN,
            )?,
        })
    }

    fn models(
        &self,
        raw: &[RawModel],
        deployments: &[Deployment],
        classes: &[TrafficClass],
    ) -> Result<Vec<ModelProfile>> {
        self.unique("models", raw.iter().map(|m| &m.name))?;
        let known: HashMap<String, usize> =
            deployments.iter().enumerate().map(|(i, d)| (d.name.to_string(), i)).collect();
        raw.iter()
            .enumerate()
            .map(|(i, m)| {
                let deployment =
                    self.reference(&format!("models[{i}].deployment"), &m.deployment, &known, "deployment")?;
                let default_max_tokens = match &m.default_max_tokens {
                    None => defaults::DEFAULT_MAX_TOKENS,
                    Some(v) => self.positive(&format!("models[{i}].default_max_tokens"), v)?.get(),
                };
                let limits = self.limits(&format!("models[{i}].limits"), &m.limits)?;
                let fallbacks = m
                    .fallbacks
                    .iter()
                    .enumerate()
                    .map(|(j, f)| self.fallback(&format!("models[{i}].fallbacks[{j}]"), f, &known))
                    .collect::<Result<_>>()?;
                let degrade_to = match &m.degrade_to {
                    None => None,
                    Some(d) => Some(self.degrade(&format!("models[{i}].degrade_to"), d, &known, classes)?),
                };
                let name = Arc::from(m.name.get_ref().as_str());
                Ok(ModelProfile { name, deployment, default_max_tokens, limits, fallbacks, degrade_to })
            })
            .collect()
    }

    fn fallback(&self, field: &str, raw: &RawFallback, deployments: &HashMap<String, usize>) -> Result<Fallback> {
        let deployment = self.reference(&format!("{field}.deployment"), &raw.deployment, deployments, "deployment")?;
        let when = raw
            .when
            .get_ref()
            .iter()
            .map(|w| match w.as_str() {
                "provider_5xx" => Ok(When::Provider5xx),
                "rate_limit_after_retry_budget" => Ok(When::RateLimitAfterRetryBudget),
                "context_length_needed" => Ok(When::ContextLengthNeeded),
                "primary_unavailable" => Ok(When::PrimaryUnavailable),
                "queue_wait_exceeded" => Ok(When::QueueWaitExceeded),
                other => Err(self.err(
                    &format!("{field}.when"),
                    raw.when.span(),
                    format!(
                        "unknown condition `{other}` (provider_5xx, rate_limit_after_retry_budget, \
                         context_length_needed, primary_unavailable, queue_wait_exceeded)"
                    ),
                )),
            })
            .collect::<Result<Vec<_>>>()?;
        if when.is_empty() {
            return Err(self.err(&format!("{field}.when"), raw.when.span(), "name at least one condition"));
        }
        Ok(Fallback { deployment, when })
    }

    fn degrade(
        &self,
        field: &str,
        raw: &RawDegrade,
        deployments: &HashMap<String, usize>,
        classes: &[TrafficClass],
    ) -> Result<Degrade> {
        let deployment = self.reference(&format!("{field}.deployment"), &raw.deployment, deployments, "deployment")?;
        let names: HashMap<String, usize> = classes.iter().enumerate().map(|(i, c)| (c.name.to_string(), i)).collect();
        let classes = raw
            .classes
            .iter()
            .map(|c| self.reference(&format!("{field}.classes"), c, &names, "class"))
            .collect::<Result<_>>()?;
        let tasks = raw.tasks.iter().map(|t| t.get_ref().clone()).collect();
        Ok(Degrade { deployment, classes, tasks })
    }

    fn tenants(&self, raw: &[RawTenant]) -> Result<Vec<Tenant>> {
        self.unique("tenants", raw.iter().map(|t| &t.name))?;
        raw.iter()
            .enumerate()
            .map(|(i, t)| {
                self.unique(&format!("tenants[{i}].teams"), t.teams.iter().map(|team| &team.name))?;
                let teams = t
                    .teams
                    .iter()
                    .enumerate()
                    .map(|(j, team)| {
                        let limits = self.limits(&format!("tenants[{i}].teams[{j}].limits"), &team.limits)?;
                        Ok(Team { name: Arc::from(team.name.get_ref().as_str()), limits })
                    })
                    .collect::<Result<_>>()?;
                let limits = self.limits(&format!("tenants[{i}].limits"), &t.limits)?;
                let weight = match &t.weight {
                    None => std::num::NonZeroU32::MIN,
                    Some(w) => u32::try_from(*w.get_ref())
                        .ok()
                        .and_then(std::num::NonZeroU32::new)
                        .filter(|w| w.get() <= 1_000_000)
                        .ok_or_else(|| self.err(&format!("tenants[{i}].weight"), w.span(), "between 1 and 1000000"))?,
                };
                Ok(Tenant { name: Arc::from(t.name.get_ref().as_str()), weight, limits, teams })
            })
            .collect()
    }

    fn classes(&self, raw: &[RawClass]) -> Result<Vec<TrafficClass>> {
        self.unique("classes", raw.iter().map(|c| &c.name))?;
        let mut classes: Vec<TrafficClass> = raw
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let max_wait =
                    self.duration(&format!("classes[{i}].max_wait"), &c.max_wait, defaults::INTERACTIVE_MAX_WAIT)?;
                let priority = c.priority.as_ref().map_or(0, |p| *p.get_ref());
                let share_permille = match &c.share {
                    None => 1000,
                    Some(s) if *s.get_ref() > 0.0 && *s.get_ref() <= 1.0 => (s.get_ref() * 1000.0).round() as u16,
                    Some(s) => {
                        return Err(self.err(&format!("classes[{i}].share"), s.span(), "between 0 (exclusive) and 1"));
                    }
                };
                let max_queue = match &c.max_queue {
                    None => defaults::MAX_QUEUE,
                    Some(q) => self.positive(&format!("classes[{i}].max_queue"), q)?.get(),
                };
                let max_queue = usize::try_from(max_queue).unwrap_or(usize::MAX);
                let max_attempts = self.max_attempts(&format!("classes[{i}].max_attempts"), c.max_attempts.as_ref())?;
                let retry_attempts = self.attempts(
                    &format!("classes[{i}].retry_attempts"),
                    c.retry_attempts.as_ref(),
                    defaults::RETRY_ATTEMPTS,
                )?;
                let retry_within =
                    self.duration(&format!("classes[{i}].retry_within"), &c.retry_within, defaults::RETRY_WITHIN)?;
                let name = Arc::from(c.name.get_ref().as_str());
                Ok(TrafficClass {
                    name,
                    max_wait,
                    priority,
                    share_permille,
                    max_queue,
                    max_attempts,
                    retry_attempts,
                    retry_within,
                })
            })
            .collect::<Result<_>>()?;
        if !classes.iter().any(|c| &*c.name == defaults::CLASS) {
            let name = Arc::from(defaults::CLASS);
            let max_queue = usize::try_from(defaults::MAX_QUEUE).unwrap_or(usize::MAX);
            let max_wait = defaults::INTERACTIVE_MAX_WAIT;
            let max_attempts = u32::try_from(defaults::MAX_ATTEMPTS).unwrap_or(u32::MAX);
            let class = TrafficClass {
                name,
                max_wait,
                priority: 0,
                share_permille: 1000,
                max_queue,
                max_attempts,
                retry_attempts: defaults::RETRY_ATTEMPTS,
                retry_within: defaults::RETRY_WITHIN,
            };
            classes.insert(0, class);
        }
        Ok(classes)
    }

    fn attempts(&self, field: &str, raw: Option<&Spanned<u64>>, default: u32) -> Result<u32> {
        let Some(n) = raw else { return Ok(default) };
        u32::try_from(*n.get_ref())
            .ok()
            .filter(|n| (1..=100).contains(n))
            .ok_or_else(|| self.err(field, n.span(), "between 1 and 100"))
    }

    fn max_attempts(&self, field: &str, raw: Option<&Spanned<u64>>) -> Result<u32> {
        let Some(n) = raw else { return Ok(u32::try_from(defaults::MAX_ATTEMPTS).unwrap_or(u32::MAX)) };
        u32::try_from(*n.get_ref())
            .ok()
            .filter(|n| (1..=100).contains(n))
            .ok_or_else(|| self.err(field, n.span(), "between 1 and 100"))
    }

    /// `raw` (or `default`) when it is between 1 and `most`.
    fn bounded(&self, field: &str, raw: Option<&Spanned<u64>>, default: u64, most: u64) -> Result<usize> {
        let Some(n) = raw else { return Ok(usize::try_from(default).unwrap_or(usize::MAX)) };
        let value = *n.get_ref();
        if (1..=most).contains(&value) {
            return Ok(usize::try_from(value).unwrap_or(usize::MAX));
        }
        Err(self.err(field, n.span(), format!("between 1 and {most}")))
    }

    fn jobs(&self, raw: &RawJobs) -> Result<Jobs> {
        let path = raw.path.as_ref().map_or(defaults::JOBS_PATH, |p| p.get_ref().as_str());
        if path.trim().is_empty() {
            let span = raw.path.as_ref().map_or(0..0, Spanned::span);
            return Err(self.err("jobs.path", span, "must name a file"));
        }
        let workers = raw.workers.as_ref().map_or(defaults::JOB_WORKERS, |w| *w.get_ref());
        if workers > 256 {
            let span = raw.workers.as_ref().map_or(0..0, Spanned::span);
            return Err(self.err("jobs.workers", span, "at most 256 (0: accept jobs, run none here)"));
        }
        let visibility_timeout =
            self.duration("jobs.visibility_timeout", &raw.visibility_timeout, defaults::VISIBILITY_TIMEOUT)?;
        if visibility_timeout < Duration::from_secs(1) {
            let span = raw.visibility_timeout.as_ref().map_or(0..0, Spanned::span);
            return Err(self.err("jobs.visibility_timeout", span, "at least 1s (leases are renewed at a third of it)"));
        }
        let max_file_bytes =
            self.bounded("jobs.max_file_bytes", raw.max_file_bytes.as_ref(), defaults::MAX_FILE_BYTES, MAX_FILE)?;
        let max_batch_lines =
            self.bounded("jobs.max_batch_lines", raw.max_batch_lines.as_ref(), defaults::MAX_BATCH_LINES, MAX_LINES)?;
        Ok(Jobs {
            path: path.into(),
            workers: usize::try_from(workers).unwrap_or(0),
            visibility_timeout,
            max_file_bytes,
            max_batch_lines,
        })
    }

    fn keys(&self, raw: &[RawKey], tenants: &[Tenant], classes: &[TrafficClass]) -> Result<Vec<ApiKey>> {
        self.unique("keys", raw.iter().map(|k| &k.id))?;
        let tenant_names: HashMap<String, usize> =
            tenants.iter().enumerate().map(|(i, t)| (t.name.to_string(), i)).collect();
        let class_names: HashMap<String, usize> =
            classes.iter().enumerate().map(|(i, c)| (c.name.to_string(), i)).collect();
        let mut hashes = HashMap::new();
        raw.iter()
            .enumerate()
            .map(|(i, k)| {
                let field = |f: &str| format!("keys[{i}].{f}");
                let tenant = self.reference(&field("tenant"), &k.tenant, &tenant_names, "tenant")?;
                let team = match &k.team {
                    None => None,
                    Some(t) => {
                        let teams =
                            tenants[tenant].teams.iter().enumerate().map(|(j, t)| (t.name.to_string(), j)).collect();
                        Some(self.reference(&field("team"), t, &teams, "team in this tenant")?)
                    }
                };
                let class = match &k.class {
                    None => class_names.get(defaults::CLASS).copied().unwrap_or(0),
                    Some(c) => self.reference(&field("class"), c, &class_names, "class")?,
                };
                let sha256 = self.sha256(&field("sha256"), &k.sha256)?;
                if let Some(other) = hashes.insert(sha256, i) {
                    return Err(self.err(&field("sha256"), k.sha256.span(), format!("same key as keys[{other}]")));
                }
                let limits = self.limits(&field("limits"), &k.limits)?;
                Ok(ApiKey { id: Arc::from(k.id.get_ref().as_str()), sha256, tenant, team, class, limits })
            })
            .collect()
    }

    fn sha256(&self, field: &str, raw: &Spanned<String>) -> Result<[u8; 32]> {
        let mut out = [0u8; 32];
        hex::decode_to_slice(raw.get_ref(), &mut out).map_err(|_| {
            self.err(field, raw.span(), "must be 64 hex digits: the SHA-256 of the key (`sluice hash-key` prints it)")
        })?;
        Ok(out)
    }
}

/// SHA-256 of a gateway API key, as stored in the config.
#[must_use]
pub fn hash_key(key: &str) -> [u8; 32] {
    sha2::Sha256::digest(key.as_bytes()).into()
}

/// Largest `[jobs] max_file_bytes`: a file is one value in the job store (Redis strings
/// end at 512 MiB).
const MAX_FILE: u64 = 512 << 20;
/// Largest `[jobs] max_batch_lines` (OpenAI's own limit per batch).
const MAX_LINES: u64 = 50_000;
