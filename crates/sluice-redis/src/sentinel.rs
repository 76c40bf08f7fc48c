//! Redis behind Sentinel: the sentinels are asked which server is the master of a named
//! group, and calls go there. A call that fails as a failover makes it fail (connection
//! lost or refused, a timeout, a `READONLY` reply from a demoted master) forgets that
//! master, so the next call asks the sentinels again. The failed call itself is a store
//! error: the store's degraded mode (fail closed or fail open locally) covers the gap.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{
    Cmd, ConnectionAddr, ErrorKind, IntoConnectionInfo as _, Pipeline, RedisError, RedisFuture, RedisResult,
    ServerErrorKind, TlsMode, Value,
};

use crate::tls::Tls;

/// A master found through Sentinel.
#[derive(Clone, PartialEq, Eq)]
pub struct SentinelTarget {
    /// The sentinels, `redis://host:port` (or `rediss://` for TLS to the sentinels and the
    /// master); the first URL's username and password authenticate to every sentinel.
    pub nodes: Vec<String>,
    /// The master group's name, as in `sentinel monitor NAME ...`.
    pub master: String,
    /// Database on the master.
    pub db: i64,
    /// ACL user on the master.
    pub username: Option<String>,
    /// Password on the master.
    pub password: Option<String>,
}

impl std::fmt::Debug for SentinelTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The nodes' URLs may carry the sentinels' password: only their count is shown.
        f.debug_struct("SentinelTarget")
            .field("nodes", &self.nodes.len())
            .field("master", &self.master)
            .field("db", &self.db)
            .finish_non_exhaustive()
    }
}

impl SentinelTarget {
    /// Whether the connections use TLS (every node URL is `rediss://`).
    fn tls(&self) -> bool {
        !self.nodes.is_empty() && self.nodes.iter().all(|u| u.starts_with("rediss://"))
    }

    /// A client that asks the sentinels for the master, with `tls` certificates for both.
    pub(crate) fn client(&self, tls: &Tls, tcp: &redis::io::tcp::TcpSettings) -> RedisResult<SentinelClient> {
        let infos = self.nodes.iter().map(|u| u.as_str().into_connection_info()).collect::<RedisResult<Vec<_>>>()?;
        let addrs = infos.iter().map(|i| i.addr().clone()).collect::<Vec<ConnectionAddr>>();
        let mut builder = SentinelClientBuilder::new(addrs, &self.master, SentinelServerType::Master)?
            .set_client_to_redis_db(self.db)
            .set_client_to_redis_tcp_settings(tcp.clone())
            .set_client_to_sentinel_tcp_settings(tcp.clone());
        if let Some(first) = infos.first().map(|i| i.redis_settings()) {
            if let Some(user) = first.username() {
                builder = builder.set_client_to_sentinel_username(user);
            }
            if let Some(password) = first.password() {
                builder = builder.set_client_to_sentinel_password(password);
            }
        }
        // The store's credentials (`[store] username`, `password_env`, `password_file`)
        // over the target's own.
        if let Some(user) = tls.auth.username.as_ref().or(self.username.as_ref()) {
            builder = builder.set_client_to_redis_username(user);
        }
        if let Some(password) = tls.auth.password.as_ref().or(self.password.as_ref()) {
            builder = builder.set_client_to_redis_password(password);
        }
        if self.tls() {
            builder = builder.set_client_to_redis_tls_mode(TlsMode::Secure);
            if let Some(certs) = tls.certificates()? {
                builder =
                    builder.set_client_to_redis_certificates(certs.clone()).set_client_to_sentinel_certificates(certs);
            }
        }
        builder.build()
    }
}

/// A connection to whichever server the sentinels name master; cheap to clone.
#[derive(Clone)]
pub struct SentinelConn {
    shared: Arc<Shared>,
}

struct Shared {
    sentinel: tokio::sync::Mutex<SentinelClient>,
    /// The master's connection and its generation (so that a failure forgets only the
    /// connection it happened on, not a newer one another call already found).
    current: parking_lot::Mutex<(u64, Option<ConnectionManager>)>,
    config: ConnectionManagerConfig,
    timeout: Duration,
}

impl SentinelConn {
    /// A connection through `sentinel`; the master is asked for on the first call.
    pub(crate) fn new(sentinel: SentinelClient, config: ConnectionManagerConfig, timeout: Duration) -> Self {
        let current = parking_lot::Mutex::new((0, None));
        Self { shared: Arc::new(Shared { sentinel: tokio::sync::Mutex::new(sentinel), current, config, timeout }) }
    }

    /// The master's connection, asking the sentinels when none is known.
    async fn master(&self) -> RedisResult<(u64, ConnectionManager)> {
        if let (generation, Some(conn)) = &*self.shared.current.lock() {
            return Ok((*generation, conn.clone()));
        }
        let mut sentinel = self.shared.sentinel.lock().await;
        // Another call may have asked while this one waited for the lock.
        if let (generation, Some(conn)) = &*self.shared.current.lock() {
            return Ok((*generation, conn.clone()));
        }
        let client = tokio::time::timeout(self.shared.timeout, sentinel.async_get_client())
            .await
            .map_err(|_| RedisError::from((ErrorKind::Io, "no sentinel answered in time")))??;
        tracing::info!(master = %client.get_connection_info().addr(), "redis: master found through sentinel");
        let conn = ConnectionManager::new_lazy_with_config(client, self.shared.config.clone())?;
        let mut current = self.shared.current.lock();
        current.0 += 1;
        current.1 = Some(conn.clone());
        Ok((current.0, conn))
    }

    /// `call` on the master's connection; a failure that may be a failover forgets it.
    async fn on_master<T>(&self, call: impl AsyncFnOnce(&mut ConnectionManager) -> RedisResult<T>) -> RedisResult<T> {
        let (generation, mut conn) = self.master().await?;
        let result = call(&mut conn).await;
        if let Err(e) = &result {
            self.after(generation, e);
        }
        result
    }

    /// Forgets the master of `generation` after `error`, when the error says it may no
    /// longer be the master.
    fn after(&self, generation: u64, error: &RedisError) {
        if !failover(error) {
            return;
        }
        let mut current = self.shared.current.lock();
        if current.0 == generation && current.1.is_some() {
            tracing::warn!(%error, "redis: master lost; asking the sentinels again");
            current.1 = None;
        }
    }
}

/// Whether `error` may mean the master moved: it is gone, unreachable, or now a replica.
fn failover(error: &RedisError) -> bool {
    error.is_io_error()
        || error.is_connection_dropped()
        || error.is_connection_refusal()
        || error.is_timeout()
        || error.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly)
}

impl ConnectionLike for SentinelConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(self.on_master(async |conn| conn.req_packed_command(cmd).await))
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(self.on_master(async move |conn| conn.req_packed_commands(cmd, offset, count).await))
    }

    fn get_db(&self) -> i64 {
        self.shared.current.lock().1.as_ref().map_or(0, ConnectionLike::get_db)
    }
}
