//! Process settings: `[server]`, `[store]` and `[jobs]` (need a restart to change).

use super::*;

impl Validator<'_> {
    /// `[admin]`: the admin key, where the admin plane listens, the metrics token's source.
    pub(super) fn admin(&self, raw: &RawAdmin) -> Result<Admin> {
        let key_sha256 = raw.key_sha256.as_ref().map(|k| self.sha256("admin.key_sha256", k)).transpose()?;
        let listen = match &raw.listen {
            None => AdminListen::default(),
            Some(s) if s.get_ref() == "shared" => AdminListen::Shared,
            Some(s) => AdminListen::Apart(s.get_ref().parse().map_err(|_| {
                let message = format!("`{}` is not an address like 127.0.0.1:9090, nor \"shared\"", s.get_ref());
                self.err("admin.listen", s.span(), message)
            })?),
        };
        let metrics_token = match (&raw.metrics_token_env, &raw.metrics_token_file) {
            (None, None) => None,
            (Some(e), None) if e.get_ref().is_empty() => {
                return Err(self.err("admin.metrics_token_env", e.span(), "names no variable"));
            }
            (Some(e), None) => Some(SecretSource::Env(e.get_ref().clone())),
            (None, Some(f)) if f.get_ref().is_empty() => {
                return Err(self.err("admin.metrics_token_file", f.span(), "names no file"));
            }
            (None, Some(f)) => Some(SecretSource::File(f.get_ref().clone())),
            (Some(_), Some(f)) => {
                let message = "set metrics_token_env or metrics_token_file, not both";
                return Err(self.err("admin.metrics_token_file", f.span(), message));
            }
        };
        Ok(Admin { key_sha256, listen, metrics_token })
    }

    pub(super) fn server(&self, raw: &RawServer) -> Result<Server> {
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
        let max_connections = match &raw.max_connections {
            None => NonZeroU64::new(defaults::MAX_CONNECTIONS).unwrap_or(NonZeroU64::MIN),
            Some(n) => self.connections("server.max_connections", n)?,
        };
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
            upstream_ca_file: raw.upstream_ca_file.as_ref().map(|f| f.get_ref().into()),
            upstream_proxy: match &raw.upstream_proxy {
                None => None,
                Some(p) if p.get_ref().starts_with("http://") => Some(p.get_ref().clone()),
                Some(p) => return Err(self.err("server.upstream_proxy", p.span(), "an http:// proxy URL")),
            },
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
            body: self.body_pace(raw)?,
            max_connections,
            max_connections_per_peer: self.connections_per_peer(raw, max_connections)?,
            access_log: self.access_log(raw)?,
        })
    }

    pub(super) fn access_log(&self, raw: &RawServer) -> Result<AccessLog> {
        let sample = match &raw.access_log_sample {
            None => 1.0,
            Some(s) if (0.0..=1.0).contains(s.get_ref()) => *s.get_ref(),
            Some(s) => return Err(self.err("server.access_log_sample", s.span(), "must be between 0.0 and 1.0")),
        };
        Ok(AccessLog { enabled: raw.access_log.unwrap_or(true), sample })
    }

    pub(super) fn body_pace(&self, raw: &RawServer) -> Result<BodyPace> {
        let timeout = self.duration("server.body_read_timeout", &raw.body_read_timeout, defaults::BODY_READ_TIMEOUT)?;
        let min_rate = match &raw.body_min_rate {
            None => NonZeroU64::new(defaults::BODY_MIN_RATE).unwrap_or(NonZeroU64::MIN),
            Some(rate) => NonZeroU64::new(*rate.get_ref()).ok_or_else(|| {
                self.err("server.body_min_rate", rate.span(), "must be at least 1 (bytes per second)")
            })?,
        };
        Ok(BodyPace { timeout, min_rate })
    }

    pub(super) fn connections_per_peer(&self, raw: &RawServer, max: NonZeroU64) -> Result<NonZeroU64> {
        // Unset, a tenth of the default process cap (or the process cap, if lower): one
        // address alone cannot hold every connection.
        let Some(per_peer) = &raw.max_connections_per_peer else {
            return Ok(NonZeroU64::new(defaults::MAX_CONNECTIONS_PER_PEER).map_or(max, |default| default.min(max)));
        };
        let n = self.connections("server.max_connections_per_peer", per_peer)?;
        if n > max {
            return Err(self.err(
                "server.max_connections_per_peer",
                per_peer.span(),
                "must not exceed max_connections",
            ));
        }
        Ok(n)
    }

    pub(super) fn connections(&self, field: &str, value: &Spanned<u64>) -> Result<NonZeroU64> {
        NonZeroU64::new(*value.get_ref()).ok_or_else(|| self.err(field, value.span(), "must be at least 1"))
    }

    /// `[ledger]`: a `postgres://` URL, beside a Redis store (one instance in memory has
    /// nothing to restore); writes at least every second (the restore's catch-up pass
    /// comes 2 s after it).
    pub(super) fn ledger(&self, raw: &RawLedger, store: &Store) -> Result<Ledger> {
        let Some(url) = &raw.url else {
            return Err(self.err(
                "ledger.url",
                0..0,
                "the ledger needs `url = \"postgres://user@host:port/database\"`",
            ));
        };
        if !(url.get_ref().starts_with("postgres://") || url.get_ref().starts_with("postgresql://")) {
            return Err(self.err("ledger.url", url.span(), "a postgres:// connection URL"));
        }
        if matches!(store.kind, StoreKind::Memory) {
            let message = "a ledger restores the fleet's budgets in Redis: it needs `[store] kind = \"redis\"`";
            return Err(self.err("ledger.url", url.span(), message));
        }
        let timeout = self.duration("ledger.timeout", &raw.timeout, Duration::from_secs(5))?;
        let flush_every = self.duration("ledger.flush_every", &raw.flush_every, Duration::from_millis(250))?;
        if flush_every > Duration::from_secs(1) {
            let span = raw.flush_every.as_ref().map_or(0..0, Spanned::span);
            return Err(self.err("ledger.flush_every", span, "at most 1s"));
        }
        let password_env = raw.password_env.as_ref().map(|p| p.get_ref().clone());
        Ok(Ledger { url: url.get_ref().clone(), password_env, timeout, flush_every })
    }

    pub(super) fn store(&self, raw: &RawStore) -> Result<Store> {
        let kind = match (raw.kind.as_ref().map(|k| (k.get_ref().as_str(), k.span())), &raw.url, &raw.cluster) {
            (None | Some(("memory", _)), None, None) => match &raw.sentinel {
                None => StoreKind::Memory,
                Some(s) => {
                    return Err(self.err("store.sentinel", s.master.span(), "set `kind = \"redis\"` to use Sentinel"));
                }
            },
            (None | Some(("memory", _)), Some(u), _) => {
                return Err(self.err("store.url", u.span(), "set `kind = \"redis\"` to use a Redis URL"));
            }
            (None | Some(("memory", _)), None, Some(c)) => {
                return Err(self.err("store.cluster", c.span(), "set `kind = \"redis\"` to use a cluster"));
            }
            (Some(("redis", span)), url, cluster) => match &raw.sentinel {
                None => self.redis(span, url.as_ref(), cluster.as_ref())?,
                Some(sentinel) => self.sentinel(sentinel, url.is_some() || cluster.is_some())?,
            },
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
        let tls = self.store_tls(raw, &kind)?;
        let auth = self.store_auth(raw, &kind)?;
        Ok(Store { kind, prefix, timeout, on_unavailable, instances, tls, auth })
    }

    /// `[store] username`, `password_env`, `password_file`: one way to give Redis its
    /// credentials for every topology. `[store.sentinel] username` and `password_env` are
    /// the older spelling for Sentinel's master, taken when `[store]` sets none. The URLs
    /// themselves are never expanded: `${VAR}` in one is refused, and a password in a URL
    /// beside `password_env` or `password_file` is ambiguous.
    fn store_auth(&self, raw: &RawStore, kind: &StoreKind) -> Result<RedisAuth> {
        let urls = [raw.url.as_ref().map(|u| ("store.url", u.span(), std::slice::from_ref(u.get_ref())))]
            .into_iter()
            .chain([raw.cluster.as_ref().map(|c| ("store.cluster", c.span(), c.get_ref().as_slice()))])
            .chain([raw
                .sentinel
                .as_ref()
                .map(|s| ("store.sentinel.nodes", s.nodes.span(), s.nodes.get_ref().as_slice()))])
            .flatten();
        let mut url_password = None;
        for (field, span, list) in urls {
            if list.iter().any(|u| u.contains("${")) {
                let message = "`${...}` is not expanded in URLs: give the password with `[store] password_env` or `password_file`";
                return Err(self.err(field, span, message));
            }
            // Sentinel nodes' passwords are the sentinels' own, not the master's.
            if field != "store.sentinel.nodes" && list.iter().any(|u| url_has_password(u)) {
                url_password = Some((field, span));
            }
        }
        let sentinel = raw.sentinel.as_ref();
        let username = match (&raw.username, sentinel.and_then(|s| s.username.as_ref())) {
            (Some(_), Some(older)) => {
                return Err(self.err("store.sentinel.username", older.span(), "set it once, as `[store] username`"));
            }
            (Some(u), None) | (None, Some(u)) => Some(u),
            (None, None) => None,
        };
        let password_env = match (&raw.password_env, sentinel.and_then(|s| s.password_env.as_ref())) {
            (Some(_), Some(older)) => {
                return Err(self.err(
                    "store.sentinel.password_env",
                    older.span(),
                    "set it once, as `[store] password_env`",
                ));
            }
            (Some(p), None) => Some(("store.password_env", p)),
            (None, Some(p)) => Some(("store.sentinel.password_env", p)),
            (None, None) => None,
        };
        let password = match (password_env, &raw.password_file) {
            (Some(_), Some(file)) => {
                return Err(self.err(
                    "store.password_file",
                    file.span(),
                    "set password_env or password_file, not both",
                ));
            }
            (Some((field, name)), None) => Some((field, name.span(), Secret::Env(self.variable(field, name)?))),
            (None, Some(file)) if file.get_ref().trim().is_empty() => {
                return Err(self.err("store.password_file", file.span(), "must name a file"));
            }
            (None, Some(file)) => Some(("store.password_file", file.span(), Secret::File(file.get_ref().into()))),
            (None, None) => None,
        };
        if matches!(kind, StoreKind::Memory) {
            let set =
                username.map(|u| ("store.username", u.span())).or(password.as_ref().map(|(f, s, _)| (*f, s.clone())));
            if let Some((field, span)) = set {
                return Err(self.err(field, span, "Redis credentials need `kind = \"redis\"`"));
            }
        }
        if let (Some((field, span)), Some(_)) = (url_password, &password) {
            let message = "this URL carries a password and password_env or password_file gives another: keep one (the variable or file keeps it out of the config)";
            return Err(self.err(field, span, message));
        }
        Ok(RedisAuth {
            username: username.map(|u| u.get_ref().clone()),
            password: password.map(|(_, _, secret)| secret),
        })
    }

    /// An environment variable's name, as `*_env` fields give it.
    pub(super) fn variable(&self, field: &str, name: &Spanned<String>) -> Result<String> {
        let text = name.get_ref();
        if text.is_empty() || text.contains(['=', '\0']) || text.starts_with('$') {
            return Err(self.err(field, name.span(), "the name of an environment variable (without `$`)"));
        }
        Ok(text.clone())
    }

    /// `[telemetry]`: the collector's URL is http or https.
    pub(super) fn telemetry(&self, raw: &RawTelemetry) -> Result<Telemetry> {
        let otlp_endpoint = match &raw.otlp_endpoint {
            None => None,
            Some(u) if u.get_ref().starts_with("http://") || u.get_ref().starts_with("https://") => {
                Some(u.get_ref().clone())
            }
            Some(u) => {
                return Err(self.err("telemetry.otlp_endpoint", u.span(), "must start with http:// or https://"));
            }
        };
        Ok(Telemetry { otlp_endpoint })
    }

    /// `[store] tls_*`: a client certificate needs its key, and any of them a `rediss://` URL.
    fn store_tls(&self, raw: &RawStore, kind: &StoreKind) -> Result<StoreTls> {
        let client = match (&raw.tls_cert_file, &raw.tls_key_file) {
            (None, None) => None,
            (Some(c), Some(k)) => Some((c.get_ref().into(), k.get_ref().into())),
            (Some(c), None) => {
                return Err(self.err("store.tls_key_file", c.span(), "tls_cert_file needs tls_key_file too"));
            }
            (None, Some(k)) => {
                return Err(self.err("store.tls_cert_file", k.span(), "tls_key_file needs tls_cert_file too"));
            }
        };
        let tls = StoreTls { ca_file: raw.tls_ca_file.as_ref().map(|f| f.get_ref().into()), client };
        let urls: &[String] = match kind {
            StoreKind::Memory => &[],
            StoreKind::Redis(url) => std::slice::from_ref(url),
            StoreKind::RedisCluster(seeds) => seeds,
            StoreKind::RedisSentinel(sentinel) => &sentinel.nodes,
        };
        let first = [&raw.tls_ca_file, &raw.tls_cert_file, &raw.tls_key_file].into_iter().flatten().next();
        match first {
            Some(f) if urls.is_empty() || !urls.iter().all(|u| u.starts_with("rediss://")) => {
                Err(self.err("store.tls_ca_file", f.span(), "TLS files need a Redis store with rediss:// URLs"))
            }
            _ => Ok(tls),
        }
    }

    pub(super) fn redis(
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

    /// `[store.sentinel]`: a master name and at least one sentinel URL, instead of `url` or
    /// `cluster`.
    fn sentinel(&self, raw: &RawSentinel, also_url: bool) -> Result<StoreKind> {
        let field = "store.sentinel";
        if also_url {
            return Err(self.err(field, raw.master.span(), "set url, cluster or sentinel, only one"));
        }
        let valid = |u: &String| u.starts_with("redis://") || u.starts_with("rediss://");
        let nodes = raw.nodes.get_ref();
        if nodes.is_empty() || !nodes.iter().all(valid) {
            return Err(self.err(
                "store.sentinel.nodes",
                raw.nodes.span(),
                "a non-empty list of redis:// sentinel URLs",
            ));
        }
        if nodes.iter().any(|u| u.starts_with("rediss://")) && !nodes.iter().all(|u| u.starts_with("rediss://")) {
            return Err(self.err("store.sentinel.nodes", raw.nodes.span(), "all rediss:// or none"));
        }
        let master = raw.master.get_ref().trim();
        if master.is_empty() {
            return Err(self.err("store.sentinel.master", raw.master.span(), "must name the master group"));
        }
        let db = raw.db.as_ref().map_or(Ok(0), |d| match *d.get_ref() {
            db @ 0.. => Ok(db),
            _ => Err(self.err("store.sentinel.db", d.span(), "must be 0 or more")),
        })?;
        Ok(StoreKind::RedisSentinel(SentinelStore { nodes: nodes.clone(), master: master.to_owned(), db }))
    }

    pub(super) fn jobs(&self, raw: &RawJobs) -> Result<Jobs> {
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
        let max_tenant_file_bytes = self.tenant_files(raw.max_tenant_file_bytes.as_ref(), max_file_bytes)?;
        Ok(Jobs {
            path: path.into(),
            workers: usize::try_from(workers).unwrap_or(0),
            visibility_timeout,
            max_file_bytes,
            max_tenant_file_bytes,
            max_batch_lines,
        })
    }

    /// `[jobs] max_tenant_file_bytes`: room for at least one file of the largest size.
    pub(super) fn tenant_files(&self, raw: Option<&Spanned<u64>>, max_file_bytes: usize) -> Result<u64> {
        let Some(n) = raw else { return Ok(defaults::MAX_TENANT_FILE_BYTES) };
        let largest = u64::try_from(max_file_bytes).unwrap_or(u64::MAX);
        match *n.get_ref() {
            value if value >= largest => Ok(value),
            _ => Err(self.err(
                "jobs.max_tenant_file_bytes",
                n.span(),
                format!("at least jobs.max_file_bytes ({largest}): a tenant must be able to keep one file"),
            )),
        }
    }
}

/// Whether a Redis URL carries a password (`redis://user:secret@host`, `redis://:secret@host`).
fn url_has_password(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split('/').next().unwrap_or(rest);
    authority.rsplit_once('@').is_some_and(|(userinfo, _)| userinfo.contains(':'))
}

/// Largest `[jobs] max_file_bytes`: a file is one value in the job store (Redis strings
/// end at 512 MiB).
const MAX_FILE: u64 = 512 << 20;
/// Largest `[jobs] max_batch_lines` (OpenAI's own limit per batch).
const MAX_LINES: u64 = 50_000;
