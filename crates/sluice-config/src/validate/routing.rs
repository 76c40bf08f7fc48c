//! Where requests go: providers, deployments, and the model profiles over them with their
//! fallbacks and degradation.

use super::*;

impl Validator<'_> {
    pub(super) fn providers(&self, raw: &[RawProvider]) -> Result<Vec<Provider>> {
        self.unique("providers", raw.iter().map(|p| &p.name))?;
        raw.iter().enumerate().map(|(i, p)| self.provider(i, p)).collect()
    }

    pub(super) fn provider(&self, i: usize, p: &RawProvider) -> Result<Provider> {
        let kind = match p.kind.get_ref().as_str() {
            "openai" | "azure" | "gemini" => ProviderKind::OpenAi,
            // Bedrock is reached through the Anthropic shape, translated to Converse on the way up.
            "anthropic" | "bedrock" => ProviderKind::Anthropic,
            "vertex" => self.vertex_kind(i, p)?,
            "ollama" => ProviderKind::Ollama,
            other => {
                let msg = format!("unknown kind `{other}` (openai, azure, gemini, vertex, anthropic, bedrock, ollama)");
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
        let api = self.provider_api(i, p)?;
        let api_key = match api {
            ProviderApi::Bedrock { .. } => self.aws_credentials(i, p)?,
            _ => self.api_key(i, p, kind)?,
        };
        let ca_file = self.provider_ca_file(i, p)?;
        Ok(Provider {
            name: Arc::from(p.name.get_ref().as_str()),
            kind,
            base_url: url.to_owned(),
            api_key,
            api,
            ca_file,
        })
    }

    /// `providers[i].ca_file`: a readable PEM file with at least one certificate, for an
    /// `https://` base URL.
    fn provider_ca_file(&self, i: usize, p: &RawProvider) -> Result<Option<std::path::PathBuf>> {
        let Some(file) = &p.ca_file else { return Ok(None) };
        let field = format!("providers[{i}].ca_file");
        if !p.base_url.get_ref().starts_with("https://") {
            return Err(self.err(&field, file.span(), "a CA file needs an https:// base_url"));
        }
        let path = std::path::PathBuf::from(file.get_ref());
        match std::fs::read_to_string(&path) {
            Ok(pem) if pem.contains("-----BEGIN CERTIFICATE-----") => Ok(Some(path)),
            Ok(_) => Err(self.err(&field, file.span(), format!("`{}` holds no PEM certificate", path.display()))),
            Err(e) => Err(self.err(&field, file.span(), format!("cannot read `{}`: {e}", path.display()))),
        }
    }

    /// Where the provider's key comes from: one of `api_key_env`, `api_key_file` and (Azure)
    /// `token_file`; none only for Ollama.
    fn api_key(&self, i: usize, p: &RawProvider, kind: ProviderKind) -> Result<SecretSource> {
        let sources = [
            p.api_key_env.as_ref().map(|e| ("api_key_env", SecretSource::Env(e.get_ref().clone()), e.span())),
            p.api_key_file.as_ref().map(|f| ("api_key_file", SecretSource::File(f.get_ref().clone()), f.span())),
            p.token_file.as_ref().map(|f| ("token_file", SecretSource::TokenFile(f.get_ref().clone()), f.span())),
            p.service_account_file
                .as_ref()
                .map(|f| ("service_account_file", SecretSource::ServiceAccount(f.get_ref().clone()), f.span())),
        ];
        let mut set = sources.into_iter().flatten();
        match (set.next(), set.next()) {
            (Some(_), Some((name, _, span))) => Err(self.err(
                &format!("providers[{i}].{name}"),
                span,
                "set one of api_key_env, api_key_file, token_file and service_account_file, not several",
            )),
            (Some((_, source, _)), None) => Ok(source),
            (None, _) if kind == ProviderKind::Ollama => Ok(SecretSource::None),
            (None, _) => Err(self.err(&format!("providers[{i}]"), p.name.span(), "needs api_key_env or api_key_file")),
        }
    }

    pub(super) fn deployments(&self, raw: &[RawDeployment], providers: &[Provider]) -> Result<Vec<Deployment>> {
        self.unique("deployments", raw.iter().map(|d| &d.name))?;
        let known = by_name(providers, |p| &*p.name);
        raw.iter()
            .enumerate()
            .map(|(i, d)| {
                let provider =
                    self.reference(&format!("deployments[{i}].provider"), &d.provider, &known, "provider")?;
                self.deployment(i, d, provider, &providers[provider])
            })
            .collect()
    }

    pub(super) fn deployment(
        &self,
        i: usize,
        d: &RawDeployment,
        provider: usize,
        account: &Provider,
    ) -> Result<Deployment> {
        let kind = account.kind;
        let field = |f: &str| format!("deployments[{i}].{f}");
        let mut limits = self.preset_limits(i, d)?;
        if matches!(account.api, ProviderApi::Azure(_)) {
            cloud::derive_azure_rpm(&mut limits);
        }
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
        let (region, labels, context_window) = self.placement(i, d)?;
        Ok(Deployment {
            region,
            labels,
            context_window,
            // Filled in by `prices`, once `[pricing]` says whether presets apply.
            price: None,
            name: Arc::from(d.name.get_ref().as_str()),
            provider,
            model: d.model.get_ref().clone(),
            azure_deployment: self.azure_deployment(i, d, &account.api)?,
            // A deployment's limits mirror the provider's: its buckets keep a send guard.
            limits: self.limits(ScopeKind::Deployment, &field("limits"), &limits)?,
            output_weight: self.output_weight(i, d, &account.api)?,
            account: None,
            adaptive: self.adaptive(i, d, kind, output_counting)?,
            tokenizer,
            input_safety_factor,
            output_counting,
            attempt_timeout: self.duration(&field("attempt_timeout"), &d.attempt_timeout, defaults::ATTEMPT_TIMEOUT)?,
            stream_idle_timeout: self.duration(
                &field("stream_idle_timeout"),
                &d.stream_idle_timeout,
                defaults::STREAM_IDLE_TIMEOUT,
            )?,
            stream_drain_timeout: self.drain_timeout(&field("stream_drain_timeout"), &d.stream_drain_timeout)?,
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

    pub(super) fn models(
        &self,
        raw: &[RawModel],
        deployments: &[Deployment],
        classes: &[TrafficClass],
    ) -> Result<Vec<ModelProfile>> {
        self.unique("models", raw.iter().map(|m| &m.name))?;
        let known = by_name(deployments, |d| &*d.name);
        raw.iter()
            .enumerate()
            .map(|(i, m)| {
                let (deployment, pool, strategy) = self.pool(i, m, &known, deployments)?;
                let affinity_header = self.affinity_header(i, m)?;
                let default_max_tokens = match &m.default_max_tokens {
                    None => defaults::DEFAULT_MAX_TOKENS,
                    Some(v) => self.positive(&format!("models[{i}].default_max_tokens"), v)?.get(),
                };
                let context_reserve_tokens =
                    m.context_reserve_tokens.as_ref().map_or(defaults::CONTEXT_RESERVE_TOKENS, |v| *v.get_ref());
                let passthrough = self.passthrough(&format!("models[{i}].passthrough"), m.passthrough.as_deref())?;
                let limits = self.limits(ScopeKind::ModelProfile, &format!("models[{i}].limits"), &m.limits)?;
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
                Ok(ModelProfile {
                    name,
                    deployment,
                    pool,
                    strategy,
                    affinity_header,
                    default_max_tokens,
                    context_reserve_tokens,
                    passthrough,
                    limits,
                    fallbacks,
                    degrade_to,
                })
            })
            .collect()
    }

    /// The endpoint families listed (each once), or the default ones when none is given.
    fn passthrough(&self, field: &str, raw: Option<&[Spanned<String>]>) -> Result<Vec<Passthrough>> {
        let Some(raw) = raw else { return Ok(defaults::PASSTHROUGH.to_vec()) };
        let mut families = Vec::with_capacity(raw.len());
        for (i, name) in raw.iter().enumerate() {
            let Some(family) = Passthrough::named(name.get_ref()) else {
                let known: Vec<&str> = Passthrough::ALL.iter().map(|p| p.name()).collect();
                let message = format!("unknown endpoint `{}` (known: {})", name.get_ref(), known.join(", "));
                return Err(self.err(&format!("{field}[{i}]"), name.span(), message));
            };
            if families.contains(&family) {
                return Err(self.err(
                    &format!("{field}[{i}]"),
                    name.span(),
                    format!("`{}` is listed twice", family.name()),
                ));
            }
            families.push(family);
        }
        Ok(families)
    }

    pub(super) fn fallback(
        &self,
        field: &str,
        raw: &RawFallback,
        deployments: &HashMap<String, usize>,
    ) -> Result<Fallback> {
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

    pub(super) fn degrade(
        &self,
        field: &str,
        raw: &RawDegrade,
        deployments: &HashMap<String, usize>,
        classes: &[TrafficClass],
    ) -> Result<Degrade> {
        let deployment = self.reference(&format!("{field}.deployment"), &raw.deployment, deployments, "deployment")?;
        let names = by_name(classes, |c| &*c.name);
        let classes = raw
            .classes
            .iter()
            .map(|c| self.reference(&format!("{field}.classes"), c, &names, "class"))
            .collect::<Result<_>>()?;
        let tasks = raw.tasks.iter().map(|t| t.get_ref().clone()).collect();
        Ok(Degrade { deployment, classes, tasks })
    }
}
