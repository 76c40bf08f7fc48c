//! The in-process server: [`SimProvider::start`] binds a socket and returns a [`SimHandle`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

use crate::clock::{Clock, RealClock};
use crate::config::{Limits, SimConfig};
use crate::sim::Sim;
use crate::stats::StatsSnapshot;
use crate::validate::ConfigError;

/// Entry point of the simulated provider.
#[derive(Debug)]
pub struct SimProvider;

impl SimProvider {
    /// Starts a simulator on `127.0.0.1` at a free port, with the real clock.
    ///
    /// # Errors
    /// When the config is invalid or the socket cannot be bound.
    pub async fn start(config: SimConfig) -> anyhow::Result<SimHandle> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        Self::serve(config, listener, Arc::new(RealClock::new()))
    }

    /// Starts a simulator on a bound listener with a given clock.
    ///
    /// # Errors
    /// When the config is invalid or the listener has no local address.
    pub fn serve(config: SimConfig, listener: TcpListener, clock: Arc<dyn Clock>) -> anyhow::Result<SimHandle> {
        let sim = Arc::new(Sim::new(&config, clock)?);
        let addr = listener.local_addr()?;
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(accept_loop(listener, crate::app::router(Arc::clone(&sim)), stopped));
        tracing::info!(%addr, models = config.models.len(), "simulated provider listening");
        Ok(SimHandle { addr, sim, stop, task: Some(task) })
    }
}

async fn accept_loop(listener: TcpListener, router: axum::Router, mut stopped: watch::Receiver<bool>) {
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        tokio::select! {
            _ = stopped.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(crate::conn::serve(stream, router.clone()));
                }
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
        }
    }
    connections.shutdown().await;
}

/// A running simulator. Dropping it stops accepting; [`SimHandle::shutdown`] also waits.
#[derive(Debug)]
pub struct SimHandle {
    addr: SocketAddr,
    sim: Arc<Sim>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl SimHandle {
    /// The bound address.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Base URL, e.g. `http://127.0.0.1:4242` (clients append `/v1/...`).
    #[must_use]
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The counters `GET /_stats` reports.
    #[must_use]
    pub fn stats(&self) -> StatsSnapshot {
        self.sim.stats()
    }

    /// Google access tokens issued by `POST /token` so far.
    #[must_use]
    pub fn google_tokens_issued(&self) -> usize {
        self.sim.google().auth.issued()
    }

    /// Gemini thought signatures that came back in a request and verified so far.
    #[must_use]
    pub fn thought_signatures_verified(&self) -> usize {
        self.sim.google().signatures.verified()
    }

    /// Replaces a model's limits (a tier change), keeping what was used.
    ///
    /// # Errors
    /// When the model is unknown or the limits are invalid.
    pub fn set_limits(&self, model: &str, limits: &Limits) -> Result<(), ConfigError> {
        self.sim.set_limits(model, limits)
    }

    /// Limits in force, per model.
    #[must_use]
    pub fn limits(&self) -> Vec<(String, Limits)> {
        self.sim.limits()
    }

    /// Replaces a model's faults (an outage starting or ending).
    ///
    /// # Errors
    /// When the model is unknown or the faults are invalid.
    pub fn set_faults(&self, model: &str, faults: &crate::config::FaultConfig) -> Result<(), ConfigError> {
        self.sim.set_faults(model, faults)
    }

    /// Clears the stats and refills every bucket.
    pub fn reset(&self) {
        self.sim.reset();
    }

    /// Stops accepting, aborts open connections and waits for the server task.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}
