//! Live state as JSON: buckets per scope, queues per deployment and class, store health
//! and the request-path counters. Names and numbers only (no keys, no key hashes, no
//! store error texts, which could carry a connection URL).

use serde_json::{Value, json};
use sluice_quota::{Calendar, QuotaStore, ScopeSnapshot, StoreError};
use sluice_server::inventory::Entry;

use crate::AdminState;

/// `GET /admin/state`'s body.
pub async fn render(state: &AdminState) -> Value {
    let (gateway, admin) = (state.current(), state.admin.policy());
    let mut scopes = Vec::with_capacity(admin.inventory.entries.len());
    let calendar = gateway.calendar();
    for entry in &admin.inventory.entries {
        scopes.push(scope(entry, gateway.services.store.snapshot(entry.id).await, calendar));
    }
    let paused = state.admin.paused_classes();
    let classes: Vec<Value> = admin
        .classes
        .iter()
        .map(|c| json!({"name": &*c.name, "priority": c.priority, "paused": paused.contains(&c.name)}))
        .collect();
    let class_of = |priority: u8| {
        let names: Vec<&str> = admin.classes.iter().filter(|c| c.priority == priority).map(|c| &*c.name).collect();
        names.join("/")
    };
    let queues: Vec<Value> = gateway
        .deployments
        .iter()
        .map(|route| {
            let by_class: Vec<Value> = route
                .queue
                .depth_by_priority()
                .into_iter()
                .map(|(priority, depth)| json!({"class": class_of(priority), "priority": priority, "depth": depth}))
                .collect();
            let labels = &route.counters.labels;
            json!({"deployment": &*route.name, "provider": labels.provider, "model": labels.model,
                   "depth": route.queue.depth(), "classes": by_class})
        })
        .collect();
    let samples = samples(state);
    let pools = pools(&gateway).await;
    json!({
        "store": store(gateway.services.store.as_ref()),
        "scopes": scopes,
        "queues": queues,
        "pools": pools,
        "classes": classes,
        "counters": super::counters::summarize(&samples),
        "spend": super::counters::per_tenant(&samples, &gateway.currency),
    })
}

/// Each pool: its strategy, the requests waiting in its queue, and per member its tier,
/// weight, health and how much of its tightest bucket is free now (`free`: 0 spent, 1 full;
/// read from the shared store, so the whole fleet's use).
async fn pools(gateway: &sluice_server::state::Gateway) -> Vec<Value> {
    let now = gateway.services.clock.now();
    let mut names: Vec<_> =
        gateway.profiles.iter().filter_map(|(n, p)| p.pool.as_ref().map(|pool| (n, pool))).collect();
    names.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = Vec::with_capacity(names.len());
    for (name, pool) in names {
        let mut members = Vec::with_capacity(pool.members.len());
        for member in &pool.members {
            let route = &gateway.deployments[member.deployment];
            let snapshot = gateway.services.store.snapshot(route.scope).await.ok().flatten();
            let free = snapshot.as_ref().and_then(|s| {
                let fractions =
                    s.rates.iter().filter(|r| r.limit > 0).map(|r| r.remaining as f64 / r.burst.max(1) as f64);
                fractions.reduce(f64::min)
            });
            let open = route.breaker.is_open(now);
            members.push(json!({
                "deployment": &*route.name, "tier": member.tier, "weight": member.weight,
                "breaker_open": open, "cooldown_ms": if open { route.breaker.remaining(now).as_millis() } else { 0 },
                "held": snapshot.as_ref().is_some_and(|s| s.held),
                "free": free, "latency_ms": route.latency.mean_ms(),
            }));
        }
        out.push(json!({"model": &**name, "strategy": pool.strategy.name(), "waiting": pool.queue.depth(),
                        "members": members}));
    }
    out
}

fn store(store: &dyn QuotaStore) -> Value {
    let health = store.health();
    json!({"degraded": health.degraded, "errors": health.errors, "open_reservations": store.open_reservations()})
}

fn scope(entry: &Entry, snapshot: Result<Option<ScopeSnapshot>, StoreError>, calendar: Calendar) -> Value {
    let mut out = json!({"kind": entry.kind.as_str(), "name": &*entry.name});
    let Value::Object(map) = &mut out else { return out };
    match snapshot {
        Ok(Some(s)) => {
            let limits: Vec<Value> = s
                .rates
                .iter()
                .map(|r| {
                    json!({"limiter": r.limiter.to_string(), "limit": r.limit, "burst": r.burst,
                           "remaining": r.remaining, "reset_ms": r.reset.as_millis()})
                })
                .collect();
            map.insert("held".into(), json!(s.held));
            map.insert("in_flight".into(), json!(s.in_flight.0));
            map.insert("concurrency".into(), json!(s.in_flight.1));
            map.insert("limits".into(), json!(limits));
            let budgets: Vec<Value> =
                sluice_server::budgets::standing(&s.budgets, calendar).iter().map(|b| b.json()).collect();
            map.insert("budgets".into(), json!(budgets));
        }
        Ok(None) => {
            map.insert("limits".into(), json!([]));
        }
        Err(_) => {
            map.insert("error".into(), json!("store unavailable"));
        }
    }
    out
}

/// Every sample of the process's metrics (empty if they cannot be encoded).
fn samples(state: &AdminState) -> Vec<super::counters::Sample> {
    let mut text = String::new();
    if prometheus_client::encoding::text::encode(&mut text, &state.registry).is_err() {
        return Vec::new();
    }
    super::counters::parse_samples(&text)
}
