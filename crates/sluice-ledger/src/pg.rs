//! One Postgres connection, opened on first use and again after it failed, each call
//! bounded by a timeout. Calls on it take turns (a transaction needs the client alone).

use std::time::Duration;

use tokio_postgres::{Client, NoTls};

/// The oldest PostgreSQL sluice runs on (`server_version_num`).
pub const MIN_SERVER_VERSION: u32 = 130_000;

/// Why a call failed: what was being done and what Postgres (or the timeout) said. Never
/// the URL or the password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("ledger {what}: {reason}")]
pub struct PgError {
    what: &'static str,
    reason: String,
}

impl PgError {
    pub(crate) fn new(what: &'static str, reason: impl std::fmt::Display) -> Self {
        Self { what, reason: reason.to_string() }
    }
}

/// A connection to the ledger's database.
pub(crate) struct Pg {
    config: tokio_postgres::Config,
    timeout: Duration,
    client: tokio::sync::Mutex<Option<Client>>,
}

impl std::fmt::Debug for Pg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pg").field("hosts", &self.config.get_hosts()).finish_non_exhaustive()
    }
}

impl Pg {
    /// Settings for `url` (a password in it is taken; `password` replaces it). The
    /// parser's message never repeats the URL.
    pub(crate) fn new(url: &str, password: Option<&str>, timeout: Duration) -> Result<Self, String> {
        let mut config: tokio_postgres::Config = url.parse().map_err(|e: tokio_postgres::Error| e.to_string())?;
        if let Some(password) = password {
            config.password(password);
        }
        config.connect_timeout(timeout).application_name("sluice");
        Ok(Self { config, timeout, client: tokio::sync::Mutex::new(None) })
    }

    /// Runs `call` with the client, connecting first when there is no open connection,
    /// within the timeout. After a failure the connection is dropped, so the next call
    /// connects anew.
    pub(crate) async fn run<T>(
        &self,
        what: &'static str,
        call: impl AsyncFnOnce(&mut Client) -> Result<T, tokio_postgres::Error>,
    ) -> Result<T, PgError> {
        let mut slot = self.client.lock().await;
        if slot.as_ref().is_none_or(Client::is_closed) {
            let (client, connection) = tokio::time::timeout(self.timeout, self.config.connect(NoTls))
                .await
                .map_err(|_| PgError::new("connect", "timed out"))?
                .map_err(|e| PgError::new("connect", e))?;
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::warn!(error = %e, "ledger connection closed");
                }
            });
            *slot = Some(client);
        }
        let client = slot.as_mut().ok_or_else(|| PgError::new("connect", "no connection"))?;
        let result = match tokio::time::timeout(self.timeout, call(client)).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(PgError::new(what, e)),
            Err(_) => Err(PgError::new(what, "timed out")),
        };
        if result.is_err() {
            *slot = None;
        }
        result
    }

    /// Checks the server's version, then runs `schema` in one transaction.
    pub(crate) async fn prepare(&self, schema: &'static str) -> Result<(), PgError> {
        let version = self
            .run("setup", async |client| {
                let row = client.query_one("SHOW server_version_num", &[]).await?;
                let version: String = row.get(0);
                let tx = client.transaction().await?;
                tx.batch_execute(schema).await?;
                tx.commit().await?;
                Ok(version)
            })
            .await?;
        let number: u32 = version.trim().parse().unwrap_or(0);
        if number < MIN_SERVER_VERSION {
            return Err(PgError::new(
                "setup",
                format!("PostgreSQL {version} is older than 13, the oldest sluice runs on"),
            ));
        }
        Ok(())
    }
}
