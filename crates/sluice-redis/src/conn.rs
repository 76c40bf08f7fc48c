//! One connection type over standalone Redis, Redis behind Sentinel and Redis Cluster,
//! connecting lazily so a gateway starts (and fails open or closed, as configured) while Redis is away.

use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::io::tcp::TcpSettings;
use redis::{Cmd, IntoConnectionInfo as _, Pipeline, RedisFuture, RedisResult, Value};
use tokio::sync::Mutex;

use crate::sentinel::{SentinelConn, SentinelTarget};
use crate::tls::Tls;

/// Where Redis is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Topology {
    /// One server (or a proxy in front of several), `redis://host:port/db`.
    Standalone(String),
    /// A master and its replicas watched by Sentinel: the sentinels name the master.
    Sentinel(SentinelTarget),
    /// A Redis Cluster, by one or more seed nodes.
    Cluster(Vec<String>),
}

/// A cheap-to-clone multiplexed connection.
#[derive(Clone)]
pub enum Conn {
    /// Standalone, auto-reconnecting.
    Single(ConnectionManager),
    /// The master the sentinels name, found again after a failover.
    Sentinel(SentinelConn),
    /// Cluster, routed by key.
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(c) => c.req_packed_command(cmd),
            Self::Sentinel(c) => c.req_packed_command(cmd),
            Self::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(c) => c.req_packed_commands(cmd, offset, count),
            Self::Sentinel(c) => c.req_packed_commands(cmd, offset, count),
            Self::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(c) => c.get_db(),
            Self::Sentinel(c) => c.get_db(),
            Self::Cluster(c) => c.get_db(),
        }
    }
}

/// Opens connections on first use and keeps them.
pub struct Connector {
    topology: Topology,
    tls: Tls,
    timeout: Duration,
    conn: Mutex<Option<Conn>>,
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connector").field("topology", &self.topology).finish_non_exhaustive()
    }
}

impl Connector {
    /// A connector for `topology`; `timeout` bounds connecting and each response.
    #[must_use]
    pub fn new(topology: Topology, timeout: Duration) -> Self {
        Self { topology, tls: Tls::default(), timeout, conn: Mutex::new(None) }
    }

    /// The same, with `tls` for `rediss://` URLs.
    #[must_use]
    pub fn with_tls(self, tls: Tls) -> Self {
        Self { tls, ..self }
    }

    /// Whether this is a cluster.
    #[must_use]
    pub fn is_cluster(&self) -> bool {
        matches!(self.topology, Topology::Cluster(_))
    }

    /// A connection, opened if needed.
    ///
    /// # Errors
    /// When the URL is invalid or (for a cluster) no seed node answers.
    pub async fn get(&self) -> RedisResult<Conn> {
        let mut slot = self.conn.lock().await;
        if let Some(conn) = slot.as_ref() {
            return Ok(conn.clone());
        }
        let conn = match &self.topology {
            Topology::Standalone(url) => {
                let config = self.manager_config();
                let info = self.tls.auth.apply(url.as_str().into_connection_info()?.set_tcp_settings(tcp()));
                let client = match self.tls.certificates()? {
                    Some(certs) => redis::Client::build_with_tls(info, certs)?,
                    None => redis::Client::open(info)?,
                };
                Conn::Single(ConnectionManager::new_lazy_with_config(client, config)?)
            }
            Topology::Sentinel(target) => {
                let client = target.client(&self.tls, &tcp())?;
                Conn::Sentinel(SentinelConn::new(client, self.manager_config(), self.timeout))
            }
            Topology::Cluster(seeds) => {
                let mut builder = ClusterClient::builder(seeds.clone())
                    .connection_timeout(self.timeout)
                    .response_timeout(self.timeout)
                    .retries(2)
                    .tcp_settings(tcp());
                if let Some(certs) = self.tls.certificates()? {
                    builder = builder.certs(certs);
                }
                if let Some(user) = &self.tls.auth.username {
                    builder = builder.username(user);
                }
                if let Some(password) = &self.tls.auth.password {
                    builder = builder.password(password);
                }
                let client = builder.build()?;
                Conn::Cluster(client.get_async_connection().await?)
            }
        };
        *slot = Some(conn.clone());
        Ok(conn)
    }

    /// One server's auto-reconnecting connection: bounded by the timeout, retried once.
    fn manager_config(&self) -> ConnectionManagerConfig {
        ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(500))
    }
}

/// Every request is small and waited for: sent at once, never held back to coalesce with
/// the next (Nagle's algorithm would hold a script until the previous one is acknowledged,
/// serialising the lanes' pipelining).
fn tcp() -> TcpSettings {
    TcpSettings::default().set_nodelay(true)
}
