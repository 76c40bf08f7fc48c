//! Paging the admin API's lists (keys, tenants, teams, audit) with `limit` and `cursor`:
//! every item that existed when paging began comes exactly once, in a stable order, even
//! when items are added between pages; without parameters a list comes whole, as before.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

mod common;

use std::collections::BTreeSet;

use common::{JobsEnv, KEY, sha, start_jobs};
use serde_json::{Value, json};
use sluice_sim::config::{ModelConfig, SimConfig};

const ADMIN: &str = "sk-admin-pages-test";

fn sim() -> SimConfig {
    SimConfig { models: vec![ModelConfig::openai("gpt-4o-mini")], ..SimConfig::default() }
}

fn policy() -> String {
    format!(
        r#"
[admin]
key_sha256 = "{admin}"

[[deployments]]
name = "mini"
provider = "sim"
model = "gpt-4o-mini"
limits = {{ rpm = 10000, tpm = 10000000 }}

[[models]]
name = "fast"
deployment = "mini"

[[tenants]]
name = "acme"

[[tenants.teams]]
name = "search"

[[keys]]
id = "acme-1"
tenant = "acme"
sha256 = "{key}"

[jobs]
workers = 0
"#,
        admin = sha(ADMIN),
        key = sha(KEY),
    )
}

async fn get(env: &JobsEnv, path: &str) -> (u16, Value) {
    let response = env.http.get(format!("{}{path}", env.url)).bearer_auth(ADMIN).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

async fn post(env: &JobsEnv, path: &str, body: Value) {
    let response = env.http.post(format!("{}{path}", env.url)).bearer_auth(ADMIN).json(&body).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 201, "{path}: {}", response.text().await.unwrap());
}

/// Pages through `path` with `limit`, calling `between` after each page; the names
/// (`field` of each item) in the order they came.
async fn page_through(
    env: &JobsEnv,
    path: &str,
    field: &str,
    limit: usize,
    mut between: impl AsyncFnMut(usize),
) -> Vec<String> {
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    for round in 0..100 {
        let query = cursor.as_ref().map_or(String::new(), |c| format!("&cursor={c}"));
        let (status, page) = get(env, &format!("{path}?limit={limit}{query}")).await;
        assert_eq!(status, 200, "{page}");
        let data = page["data"].as_array().unwrap();
        assert!(data.len() <= limit, "{page}");
        seen.extend(data.iter().map(|item| item[field].as_str().unwrap().to_owned()));
        if page["has_more"] == json!(false) {
            assert_eq!(page["next_cursor"], Value::Null);
            return seen;
        }
        cursor = Some(page["next_cursor"].as_str().unwrap().to_owned());
        between(round).await;
    }
    panic!("paging {path} did not end");
}

fn once(seen: &[String], expected: &BTreeSet<String>) {
    let distinct: BTreeSet<String> = seen.iter().cloned().collect();
    assert_eq!(distinct.len(), seen.len(), "an item came twice: {seen:?}");
    assert!(expected.is_subset(&distinct), "missing {:?} in {seen:?}", expected.difference(&distinct));
}

fn names(list: &Value, field: &str) -> BTreeSet<String> {
    list["data"].as_array().unwrap().iter().map(|item| item[field].as_str().unwrap().to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_keys_returns_each_once_while_keys_are_added() {
    let env = start_jobs(sim(), &policy()).await;
    for i in 0..7 {
        post(&env, "/admin/keys", json!({"id": format!("k-{i}"), "tenant": "acme"})).await;
    }
    let (status, whole) = get(&env, "/admin/keys").await;
    assert_eq!((status, &whole["has_more"]), (200, &json!(false)), "no parameters: the whole list");
    let before = names(&whole, "id");
    assert_eq!(before.len(), 8, "{whole}");
    let seen = page_through(&env, "/admin/keys", "id", 3, async |round| {
        // One sorts before every cursor, one after.
        post(&env, "/admin/keys", json!({"id": format!("a-{round}"), "tenant": "acme"})).await;
        post(&env, "/admin/keys", json!({"id": format!("z-{round}"), "tenant": "acme"})).await;
    })
    .await;
    once(&seen, &before);
    assert_eq!(seen[0], "acme-1", "file keys first");
    assert!(seen.iter().any(|id| id.starts_with("z-")), "a key added after the cursor comes: {seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_tenants_and_teams_returns_each_once_while_tenants_are_added() {
    let env = start_jobs(sim(), &policy()).await;
    for i in 0..5 {
        post(&env, "/admin/tenants", json!({"name": format!("t-{i}"), "teams": {"x": {}, "y": {}}})).await;
    }
    let (_, tenants) = get(&env, "/admin/tenants").await;
    let (_, teams) = get(&env, "/admin/teams").await;
    let teams: BTreeSet<String> = teams["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| format!("{}/{}", t["tenant"].as_str().unwrap(), t["name"].as_str().unwrap()))
        .collect();
    assert_eq!(teams.len(), 11, "acme/search and two per runtime tenant: {teams:?}");
    let seen = page_through(&env, "/admin/tenants", "name", 2, async |round| {
        post(&env, "/admin/tenants", json!({"name": format!("s-{round}"), "teams": {"x": {}}})).await;
    })
    .await;
    once(&seen, &names(&tenants, "name"));
    let mut seen = Vec::new();
    let mut cursor = String::new();
    for _ in 0..100 {
        let (status, page) = get(&env, &format!("/admin/teams?limit=4{cursor}")).await;
        assert_eq!(status, 200, "{page}");
        seen.extend(
            page["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| format!("{}/{}", t["tenant"].as_str().unwrap(), t["name"].as_str().unwrap())),
        );
        let Some(next) = page["next_cursor"].as_str() else { break };
        cursor = format!("&cursor={next}");
        post(&env, "/admin/tenants", json!({"name": format!("u-{}", seen.len()), "teams": {"x": {}}})).await;
    }
    once(&seen, &teams);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_the_audit_log_returns_each_once_while_changes_are_made() {
    let env = start_jobs(sim(), &policy()).await;
    for i in 0..6 {
        post(&env, "/admin/keys", json!({"id": format!("k-{i}"), "tenant": "acme"})).await;
    }
    let (_, whole) = get(&env, "/admin/audit?limit=500").await;
    let before = names(&whole, "id");
    assert_eq!(before.len(), 6, "{whole}");
    let seen = page_through(&env, "/admin/audit", "id", 4, async |round| {
        post(&env, "/admin/keys", json!({"id": format!("n-{round}"), "tenant": "acme"})).await;
    })
    .await;
    once(&seen, &before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_limit_or_cursor_is_a_400_naming_it() {
    let env = start_jobs(sim(), &policy()).await;
    for path in ["/admin/keys", "/admin/tenants", "/admin/teams", "/admin/audit"] {
        for (query, param) in [("limit=0", "limit"), ("limit=501", "limit"), ("cursor=zz", "cursor")] {
            let (status, value) = get(&env, &format!("{path}?{query}")).await;
            assert_eq!((status, value["error"]["param"].as_str()), (400, Some(param)), "{path}?{query}: {value}");
        }
    }
}
