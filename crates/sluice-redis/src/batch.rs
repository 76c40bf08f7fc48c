//! Natural batching of a group's reservations and settlements.
//!
//! Every reservation and settlement of a hash-tag group goes through its lane. A lane sends
//! at most [`MAX_IN_FLIGHT`] scripts at a time; what arrives while they are out waits and
//! leaves together in the next one (up to [`MAX_BATCH`] operations). On a quiet gateway
//! every operation leaves at once, alone; under load the batches grow by themselves, and
//! the Redis time per operation falls, because a batch reads and writes its group's state
//! once (`batch.lua`). Nothing waits on a timer.
//!
//! Each operation in a batch is decided as if its script ran alone at that point of the
//! order, so batching changes throughput, never a decision.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use sluice_quota::{FairShare, StoreError};
use tokio::sync::oneshot;

use crate::conn::Connector;
use crate::keys::Group;
use crate::scripts::Scripts;

/// Scripts one lane has out at once.
pub const MAX_IN_FLIGHT: usize = 4;
/// Most operations one script carries.
pub const MAX_BATCH: usize = 64;
/// How many expired leases one batch settles on the way.
const EXPIRE_BATCH: u32 = 16;

/// The connection and scripts, and the bound on every call.
#[derive(Debug)]
pub struct Link {
    /// Where Redis is.
    pub connector: Connector,
    /// The scripts.
    pub scripts: Scripts,
    /// Bound on connecting and on each call.
    pub timeout: Duration,
}

pub(crate) fn store_error(e: impl std::fmt::Display) -> StoreError {
    StoreError(e.to_string())
}

impl Link {
    /// Runs a script, bounded by the timeout.
    pub async fn call<T: redis::FromRedisValue>(
        &self,
        invocation: redis::ScriptInvocation<'_>,
    ) -> Result<T, StoreError> {
        let mut conn = tokio::time::timeout(self.timeout, self.connector.get())
            .await
            .map_err(|_| store_error("redis connect timed out"))?
            .map_err(store_error)?;
        tokio::time::timeout(self.timeout, invocation.invoke_async(&mut conn))
            .await
            .map_err(|_| store_error("redis call timed out"))?
            .map_err(store_error)
    }
}

/// A fair-share check to make with a reservation: the deployment's keys and the tenant's
/// claim.
#[derive(Debug, Clone)]
pub struct Fair {
    /// The deployment's group (its fairness hash and asking set).
    pub home: Group,
    /// The claim.
    pub share: FairShare,
}

/// One operation of a batch.
#[derive(Debug)]
pub enum Op {
    /// A reservation of the group's part of a path.
    Reserve {
        /// The lease-set member (record.rs `lease_member`).
        member: Vec<u8>,
        /// The lease (µs).
        lease_us: u64,
        /// The fair-share check, if any.
        fair: Option<Fair>,
        /// The scopes (record.rs `reserve_spec`).
        spec: Vec<u8>,
        /// The scopes' fields.
        sids: Vec<String>,
    },
    /// A settlement (or a release) of a reservation.
    Settle {
        /// The reservation's lease-set member.
        member: Vec<u8>,
        /// The settlement (record.rs `settle_spec`).
        spec: Vec<u8>,
        /// The fields it touches.
        sids: Vec<String>,
    },
}

type Reply = Result<Vec<i64>, StoreError>;

struct Waiting {
    op: Op,
    reply: oneshot::Sender<Reply>,
}

#[derive(Default)]
struct Lane {
    pending: Vec<Waiting>,
    in_flight: usize,
}

impl Lane {
    fn take(&mut self) -> Vec<Waiting> {
        let n = self.pending.len().min(MAX_BATCH);
        self.pending.drain(..n).collect()
    }
}

/// The lanes of every group this instance has used.
pub struct Batches {
    link: Arc<Link>,
    lanes: Mutex<HashMap<Group, Lane>>,
}

impl std::fmt::Debug for Batches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batches").field("link", &self.link).finish_non_exhaustive()
    }
}

impl Batches {
    /// Lanes over `link`.
    #[must_use]
    pub fn new(link: Arc<Link>) -> Self {
        Self { link, lanes: Mutex::new(HashMap::new()) }
    }

    /// The link the lanes use.
    #[must_use]
    pub fn link(&self) -> &Link {
        &self.link
    }

    /// Runs `op` on `group`'s state, in a batch with whatever else is waiting; the script's
    /// reply for this operation.
    ///
    /// # Errors
    /// When the script failed or timed out (every operation of that batch gets the error).
    pub async fn run(self: &Arc<Self>, group: &Group, op: Op) -> Reply {
        let (reply, answer) = oneshot::channel();
        let batch = {
            let mut lanes = self.lanes.lock();
            let lane = lanes.entry(group.clone()).or_default();
            lane.pending.push(Waiting { op, reply });
            if lane.in_flight < MAX_IN_FLIGHT {
                lane.in_flight += 1;
                Some(lane.take())
            } else {
                None
            }
        };
        if let Some(batch) = batch {
            // A task of its own: a caller that gives up must not take the others' answers
            // with it.
            tokio::spawn(Arc::clone(self).flush(group.clone(), batch));
        }
        answer.await.unwrap_or_else(|_| Err(store_error("the batch carrying this call was dropped")))
    }

    /// Sends `batch`, then whatever queued behind it, until the lane is empty.
    async fn flush(self: Arc<Self>, group: Group, mut batch: Vec<Waiting>) {
        loop {
            self.send(&group, batch).await;
            let next = {
                let mut lanes = self.lanes.lock();
                let Some(lane) = lanes.get_mut(&group) else { return };
                if lane.pending.is_empty() {
                    lane.in_flight -= 1;
                    None
                } else {
                    Some(lane.take())
                }
            };
            match next {
                Some(more) => batch = more,
                None => return,
            }
        }
    }

    async fn send(&self, group: &Group, batch: Vec<Waiting>) {
        let leases = group.leases();
        let state = group.state();
        let mut invocation = self.link.scripts.batch.prepare_invoke();
        invocation.key(&leases).key(&state).arg(EXPIRE_BATCH);
        // Fairness keys, each deployment's pair once.
        let mut homes: Vec<&Group> = Vec::new();
        for waiting in &batch {
            match &waiting.op {
                Op::Reserve { member, lease_us, fair, spec, sids } => {
                    invocation.arg("r").arg(member.as_slice()).arg(*lease_us);
                    match fair {
                        Some(Fair { home, share }) => {
                            let pair = match homes.iter().position(|h| *h == home) {
                                Some(i) => i + 1,
                                None => {
                                    invocation.key(home.fair()).key(home.asking());
                                    homes.push(home);
                                    homes.len()
                                }
                            };
                            invocation.arg(pair).arg(&*share.tenant).arg(share.weight.get());
                            invocation.arg(share.cost).arg(share.slack);
                        }
                        None => {
                            invocation.arg(0).arg("").arg(1).arg(0).arg(0);
                        }
                    }
                    invocation.arg(spec.as_slice()).arg(sids.len());
                    for sid in sids {
                        invocation.arg(sid);
                    }
                }
                Op::Settle { member, spec, sids } => {
                    invocation.arg("s").arg(member.as_slice()).arg(spec.as_slice()).arg(sids.len());
                    for sid in sids {
                        invocation.arg(sid);
                    }
                }
            }
        }
        let replies: Result<Vec<Vec<i64>>, StoreError> = self.link.call(invocation).await;
        match replies {
            Ok(replies) if replies.len() == batch.len() => {
                for (waiting, reply) in batch.into_iter().zip(replies) {
                    let _ = waiting.reply.send(Ok(reply));
                }
            }
            Ok(replies) => {
                let e = store_error(format!("batch of {} answered {} replies", batch.len(), replies.len()));
                for waiting in batch {
                    let _ = waiting.reply.send(Err(e.clone()));
                }
            }
            Err(e) => {
                for waiting in batch {
                    let _ = waiting.reply.send(Err(e.clone()));
                }
            }
        }
    }
}
