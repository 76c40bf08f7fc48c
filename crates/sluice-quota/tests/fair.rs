//! Fair queuing: shares by weight and token cost, borrowing and reclaiming, priorities.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::collections::HashMap;
use std::num::NonZeroU32;

use sluice_quota::Nanos;
use sluice_quota::waiting::{Block, FairQueue, Waiter, WaiterId};

const FAR: Nanos = Nanos(u64::MAX);

struct Sim {
    queue: FairQueue,
    next_id: u64,
}

impl Sim {
    fn new() -> Self {
        Self { queue: FairQueue::new(), next_id: 0 }
    }

    fn push(&mut self, tenant: u32, priority: u8, weight: u32, cost: u64) {
        self.next_id += 1;
        let weight = NonZeroU32::new(weight).unwrap();
        self.queue.push(Waiter {
            id: WaiterId(self.next_id),
            tenant,
            lane: tenant,
            priority,
            weight,
            cost,
            deadline: FAR,
            retries: 0,
        });
    }

    /// Admits the next waiter; each tenant keeps `backlog` requests waiting.
    fn serve(&mut self, rounds: usize, refill: impl Fn(&mut Self, u32)) -> HashMap<u32, u64> {
        let mut served = HashMap::new();
        for _ in 0..rounds {
            let Some(waiter) = self.queue.next(Nanos(0)).cloned() else { break };
            self.queue.admitted(waiter.id);
            *served.entry(waiter.tenant).or_default() += waiter.cost;
            refill(self, waiter.tenant);
        }
        served
    }
}

fn jain(values: &[f64]) -> f64 {
    let sum: f64 = values.iter().sum();
    let squares: f64 = values.iter().map(|v| v * v).sum();
    sum * sum / (values.len() as f64 * squares)
}

#[test]
fn equal_weights_share_tokens_equally_whatever_the_request_sizes() {
    let mut sim = Sim::new();
    let sizes = [100u64, 1_000, 5_000];
    for (tenant, size) in sizes.iter().enumerate() {
        for _ in 0..4 {
            sim.push(tenant as u32, 0, 1, *size);
        }
    }
    let served = sim.serve(5_000, |s, t| s.push(t, 0, 1, sizes[t as usize]));
    let tokens: Vec<f64> = (0..3).map(|t| served[&t] as f64).collect();
    assert!(jain(&tokens) >= 0.99, "served {tokens:?}");
}

#[test]
fn weights_two_one_one_give_half_a_quarter_a_quarter() {
    let mut sim = Sim::new();
    let weights = [2u32, 1, 1];
    for (tenant, weight) in weights.iter().enumerate() {
        sim.push(tenant as u32, 0, *weight, 500);
    }
    let served = sim.serve(4_000, |s, t| s.push(t, 0, weights[t as usize], 500));
    let total: u64 = served.values().sum();
    for (tenant, want) in [(0u32, 0.5), (1, 0.25), (2, 0.25)] {
        let share = served[&tenant] as f64 / total as f64;
        assert!((share - want).abs() <= 0.03, "tenant {tenant}: {share:.3}");
    }
}

#[test]
fn a_lone_tenant_borrows_everything_and_a_newcomer_is_served_at_once() {
    let mut sim = Sim::new();
    sim.push(0, 0, 1, 100);
    let served = sim.serve(1_000, |s, t| s.push(t, 0, 1, 100));
    assert_eq!(served.len(), 1, "a lone tenant takes every slot");
    // Tenant 1 appears after tenant 0 has been served for a long time: no waiting behind
    // tenant 0's history, and no credit for its own idle time either.
    sim.push(1, 0, 1, 100);
    let next: Vec<u32> = (0..4)
        .map(|_| {
            let w = sim.queue.next(Nanos(0)).cloned().unwrap();
            sim.queue.admitted(w.id);
            sim.push(w.tenant, 0, 1, 100);
            w.tenant
        })
        .collect();
    assert!(next[..2].contains(&1), "the newcomer waited: {next:?}");
    assert_eq!(next.iter().filter(|&&t| t == 1).count(), 2, "then they alternate: {next:?}");
}

#[test]
fn higher_classes_go_first_and_a_blocked_tenant_blocks_only_itself() {
    let mut sim = Sim::new();
    sim.push(0, 5, 1, 100); // batch
    sim.push(1, 0, 1, 100); // interactive
    sim.push(2, 0, 1, 100); // interactive
    assert!(sim.queue.has_waiting_at_or_above(0));
    let first = sim.queue.next(Nanos(0)).cloned().unwrap();
    assert_eq!(first.priority, 0);
    // Tenant of the head is at its own cap: the other interactive tenant goes.
    sim.queue.refused(first.id, Block::Lane, Nanos(1_000));
    let second = sim.queue.next(Nanos(0)).cloned().unwrap();
    assert_ne!(second.tenant, first.tenant);
    assert_eq!(second.priority, 0);
    sim.queue.admitted(second.id);
    // Only batch is left ready while the blocked tenant waits out its block.
    assert_eq!(sim.queue.next(Nanos(0)).unwrap().priority, 5);
    // Another lane of the blocked tenant is not blocked.
    sim.next_id += 1;
    let other_lane = Waiter {
        id: WaiterId(sim.next_id),
        tenant: first.tenant,
        lane: 99,
        priority: 0,
        weight: NonZeroU32::new(1).unwrap(),
        cost: 100,
        deadline: FAR,
        retries: 0,
    };
    sim.queue.push(other_lane);
    assert_eq!(sim.queue.next(Nanos(0)).map(|w| w.lane), Some(99));
    sim.queue.remove(WaiterId(sim.next_id));
    assert_eq!(sim.queue.next(Nanos(1_000)).unwrap().tenant, first.tenant);
    // A shared refusal stops everyone until it ends.
    sim.queue.refused(first.id, Block::Shared, Nanos(2_000));
    assert!(sim.queue.next(Nanos(1_500)).is_none());
    assert_eq!(sim.queue.wake_at(Nanos(1_500)), Some(Nanos(2_000)));
    assert!(sim.queue.next(Nanos(2_000)).is_some());
}

#[test]
fn waiters_past_their_deadline_leave_and_pauses_hold_back() {
    let mut queue = FairQueue::new();
    let weight = NonZeroU32::new(1).unwrap();
    queue.push(Waiter {
        id: WaiterId(1),
        tenant: 0,
        lane: 0,
        priority: 0,
        weight,
        cost: 10,
        deadline: Nanos(100),
        retries: 0,
    });
    queue.push(Waiter {
        id: WaiterId(2),
        tenant: 1,
        lane: 1,
        priority: 0,
        weight,
        cost: 10,
        deadline: Nanos(900),
        retries: 0,
    });
    assert_eq!(queue.ahead(0, 2, 0).tokens, 20);
    assert_eq!(queue.wake_at(Nanos(0)), Some(Nanos(100)));
    let gone = queue.expire(Nanos(100));
    assert_eq!(gone.iter().map(|w| w.id).collect::<Vec<_>>(), [WaiterId(1)]);
    queue.pause_tenant(1, true);
    assert!(queue.next(Nanos(200)).is_none());
    queue.pause_tenant(1, false);
    assert_eq!(queue.next(Nanos(200)).map(|w| w.id), Some(WaiterId(2)));
    assert_eq!(queue.remove(WaiterId(2)).map(|w| w.tenant), Some(1));
    assert!(queue.is_empty());
}

#[test]
fn passed_over_names_the_earlier_fronts_that_a_fairer_or_higher_request_overtakes() {
    use sluice_quota::waiting::PassedOver;
    let mut sim = Sim::new();
    // Tenant 1 borrows alone: its first admission puts it ahead of the virtual clock.
    sim.push(1, 1, 1, 1_000);
    let first = sim.queue.next(Nanos(0)).unwrap().id;
    assert!(sim.queue.passed_over(first, Nanos(0)).is_empty(), "alone: nobody passed over");
    sim.queue.admitted(first);
    // Tenant 1 waits again (ids 2, 3; only the front, 2, can be passed over), lower-class
    // work of tenant 3 waits (id 4), then tenant 2 arrives (id 5), then more of tenant 3.
    sim.push(1, 1, 1, 1_000);
    sim.push(1, 1, 1, 1_000);
    sim.push(3, 2, 1, 10);
    sim.push(2, 1, 1, 1_000);
    sim.push(3, 2, 1, 10);
    let chosen = sim.queue.next(Nanos(0)).unwrap().clone();
    assert_eq!((chosen.tenant, chosen.id), (2, WaiterId(5)), "the newcomer goes first");
    let mut passed = sim.queue.passed_over(chosen.id, Nanos(0));
    passed.sort_by_key(|(id, _)| *id);
    assert_eq!(passed, vec![(WaiterId(2), PassedOver::Fairness), (WaiterId(4), PassedOver::Priority)]);
    // A blocked line could not have gone: not passed over.
    sim.queue.refused(WaiterId(2), Block::Lane, Nanos(10));
    let passed = sim.queue.passed_over(chosen.id, Nanos(0));
    assert_eq!(passed, vec![(WaiterId(4), PassedOver::Priority)]);
    // In FIFO order (the earliest goes) nobody is passed over.
    sim.queue.admitted(chosen.id);
    let next = sim.queue.next(Nanos(20)).unwrap().id;
    assert_eq!(next, WaiterId(2));
    assert_eq!(sim.queue.passed_over(next, Nanos(20)), vec![]);
}

#[test]
fn a_tenant_waits_besides_its_head_only_with_another_waiter_free_to_go() {
    let mut sim = Sim::new();
    sim.push(1, 0, 1, 100);
    sim.push(2, 0, 1, 100);
    let (alone, other) = (WaiterId(1), WaiterId(2));
    assert!(!sim.queue.waits_besides(1, alone, Nanos(0)), "its only waiter is the head");
    sim.push(1, 1, 1, 100);
    assert!(sim.queue.waits_besides(1, alone, Nanos(0)), "a waiter of a lower class counts");
    assert!(!sim.queue.waits_besides(2, other, Nanos(0)));
    // The tenant's own limits refused its lane: what waits behind cannot go, so it does not count.
    sim.queue.refused(WaiterId(3), Block::Lane, Nanos(1_000));
    assert!(!sim.queue.waits_besides(1, alone, Nanos(0)));
    assert!(sim.queue.waits_besides(1, alone, Nanos(1_000)), "the lane is free again");
    // A shared refusal holds everyone alike and does not change whether the tenant waits.
    sim.queue.refused(WaiterId(2), Block::Shared, Nanos(5_000));
    assert!(sim.queue.waits_besides(1, alone, Nanos(2_000)));
}

#[test]
fn a_shared_block_outlives_the_waiter_whose_refusal_set_it() {
    // A large request at the head needs the deployment's window idle at 5,000; it gives up
    // before. The small one behind it waits until then too: the window goes idle for
    // whoever comes next, large or small, instead of being kept busy by small ones.
    let mut sim = Sim::new();
    sim.push(1, 0, 1, 3_000);
    sim.push(1, 0, 1, 200);
    let (large, small) = (WaiterId(1), WaiterId(2));
    sim.queue.refused(large, Block::Shared, Nanos(5_000));
    sim.queue.remove(large);
    assert!(sim.queue.next(Nanos(1_000)).is_none());
    assert_eq!(sim.queue.wake_at(Nanos(1_000)), Some(Nanos(5_000)));
    assert_eq!(sim.queue.next(Nanos(5_000)).map(|w| w.id), Some(small));
    // Capacity given back (a settlement) lifts it at once.
    sim.queue.refused(small, Block::Shared, Nanos(9_000));
    sim.queue.unblock();
    assert_eq!(sim.queue.next(Nanos(6_000)).map(|w| w.id), Some(small));
}

fn waiter(id: u64, lane: u32, retries: u8) -> Waiter {
    let weight = NonZeroU32::new(1).unwrap();
    Waiter { id: WaiterId(id), tenant: 0, lane, priority: 0, weight, cost: 10, deadline: FAR, retries }
}

/// Serves the queue to the end and lists the order.
fn drain(queue: &mut FairQueue) -> Vec<u64> {
    let mut order = Vec::new();
    while let Some(w) = queue.next(Nanos(0)).cloned() {
        queue.admitted(w.id);
        order.push(w.id.0);
    }
    order
}

#[test]
fn a_retried_request_goes_before_its_own_keys_first_attempts_and_nobody_elses() {
    let mut queue = FairQueue::new();
    // Lane 1 (one key) has three first attempts waiting; lane 2 (another key of the same
    // tenant) two, interleaved.
    for (id, lane) in [(1, 1), (2, 2), (3, 1), (4, 2), (5, 1)] {
        queue.push(waiter(id, lane, 0));
    }
    // Ahead of a retry of lane 1: everything but lane 1's first attempts.
    assert_eq!(queue.ahead(0, 1, 1).tokens, 20);
    assert_eq!(queue.ahead(0, 1, 0).tokens, 50, "a first attempt waits behind everyone");
    queue.push(waiter(6, 1, 1));
    // A second retry goes before the first one.
    queue.push(waiter(7, 1, 2));
    // A later first attempt still waits at the back.
    queue.push(waiter(8, 1, 0));
    // Lane 2's requests keep their places (second and fourth); lane 1's places hold its
    // requests in their new order.
    assert_eq!(drain(&mut queue), [7, 2, 6, 4, 1, 3, 5, 8]);
}

#[test]
fn retries_in_one_tenant_leave_other_tenants_shares_alone() {
    let mut queue = FairQueue::new();
    let weight = NonZeroU32::new(1).unwrap();
    for id in 1..=4 {
        queue.push(Waiter {
            id: WaiterId(id),
            tenant: 1,
            lane: 1,
            priority: 0,
            weight,
            cost: 10,
            deadline: FAR,
            retries: 0,
        });
    }
    for id in 5..=8 {
        queue.push(Waiter {
            id: WaiterId(id),
            tenant: 0,
            lane: 0,
            priority: 0,
            weight,
            cost: 10,
            deadline: FAR,
            retries: 3,
        });
    }
    let order = drain(&mut queue);
    // The tenants still alternate: a retry moves within its own tenant's line only.
    let tenants: Vec<u32> = order.iter().map(|id| u32::from(*id <= 4)).collect();
    assert_eq!(tenants, [1, 0, 1, 0, 1, 0, 1, 0]);
}
