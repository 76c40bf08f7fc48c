//! The admin API's key bodies and their validation: unknown fields, bad ids, unknown
//! tenants, teams, classes or profiles, bad limits, oversized metadata, regions or labels no
//! deployment has (or that would widen the tenant's) and an `expires_at` in the past are
//! refused naming the field.

use rand::Rng as _;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use std::sync::Arc;

use sluice_config::Allowed;
use sluice_server::keys::{KeyRecord, Role};
use sluice_server::state::{Gateway, Route};

/// Most metadata entries on one key.
pub const MAX_METADATA_ENTRIES: usize = 32;
/// Longest metadata name, in characters.
const MAX_METADATA_NAME: usize = 64;
/// Longest metadata value, in characters.
pub const MAX_METADATA_VALUE: usize = 1024;
/// Longest key id.
const MAX_ID: usize = 64;
/// Most profiles a key may be restricted to.
const MAX_MODELS: usize = 256;
/// Most regions, or labels, a key may be limited to.
const MAX_CONSTRAINTS: usize = 64;

/// `POST /admin/keys`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Create {
    pub id: Option<String>,
    pub tenant: String,
    pub team: Option<String>,
    pub class: Option<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub limits: Map<String, Value>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub metadata: Map<String, Value>,
    pub models: Option<Vec<String>>,
    pub regions: Option<Vec<String>>,
    pub labels: Option<Vec<String>>,
    pub expires_at: Option<u64>,
    #[serde(default)]
    #[schema(value_type = String)]
    pub role: Role,
}

/// `PATCH /admin/keys/{id}`: absent fields stay; `null` clears an optional one.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Update {
    #[serde(default, deserialize_with = "not_null")]
    pub tenant: Option<String>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub team: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub class: Option<Option<String>>,
    #[serde(default, deserialize_with = "not_null")]
    #[schema(value_type = Option<Object>)]
    pub limits: Option<Map<String, Value>>,
    #[serde(default, deserialize_with = "not_null")]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Map<String, Value>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Vec<String>>)]
    pub models: Option<Option<Vec<String>>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Vec<String>>)]
    pub regions: Option<Option<Vec<String>>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Vec<String>>)]
    pub labels: Option<Option<Vec<String>>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<u64>)]
    pub expires_at: Option<Option<u64>>,
}

/// `POST /admin/keys/{id}/rotate`.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Rotate {
    /// How long the old secret keeps working (default [`DEFAULT_GRACE_SECONDS`]).
    pub grace_seconds: Option<u64>,
}

/// The old secret's grace when a rotation names none.
pub const DEFAULT_GRACE_SECONDS: u64 = 300;
/// The longest grace a rotation may give the old secret (7 days).
pub const MAX_GRACE_SECONDS: u64 = 7 * 24 * 3600;

/// A field present in the body, `null` included (`Some(None)`).
fn present<'de, T: Deserialize<'de>, D: Deserializer<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// A field that may be left out but not cleared: `null` is refused.
fn not_null<'de, T: Deserialize<'de>, D: Deserializer<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// `body` as `T`, or `(param, message)`: an empty body is `{}`.
pub fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, (String, String)> {
    let body = if body.iter().all(u8::is_ascii_whitespace) { b"{}".as_slice() } else { body };
    serde_json::from_slice(body).map_err(|e| ("body".to_owned(), format!("invalid key body: {e}")))
}

impl Update {
    /// The names of the fields this update sets.
    #[must_use]
    pub fn fields(&self) -> Vec<String> {
        let set = [
            ("tenant", self.tenant.is_some()),
            ("team", self.team.is_some()),
            ("class", self.class.is_some()),
            ("limits", self.limits.is_some()),
            ("metadata", self.metadata.is_some()),
            ("models", self.models.is_some()),
            ("regions", self.regions.is_some()),
            ("labels", self.labels.is_some()),
            ("expires_at", self.expires_at.is_some()),
        ];
        set.into_iter().filter(|(_, s)| *s).map(|(n, _)| n.to_owned()).collect()
    }

    /// Applies the update to `record`.
    pub fn apply(self, record: &mut KeyRecord) {
        if let Some(tenant) = self.tenant {
            record.tenant = tenant;
        }
        if let Some(team) = self.team {
            record.team = team;
        }
        if let Some(class) = self.class {
            record.class = class;
        }
        if let Some(limits) = self.limits {
            record.limits = limits;
        }
        if let Some(metadata) = self.metadata {
            record.metadata = metadata;
        }
        if let Some(models) = self.models {
            record.models = models;
        }
        if let Some(regions) = self.regions {
            record.regions = regions;
        }
        if let Some(labels) = self.labels {
            record.labels = labels;
        }
        if let Some(expires_at) = self.expires_at {
            record.expires_at = expires_at;
        }
    }
}

/// Whether `id` is an acceptable name: 1 to [`MAX_ID`] of `A-Z a-z 0-9 . _ -`, starting
/// with a letter or a digit (so never `.` or `..`). Key ids, tenant and team names.
///
/// # Errors
/// `(param, message)` naming the rule.
pub fn check_id(id: &str) -> Result<(), (String, String)> {
    let first = id.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric());
    let ok =
        first && id.len() <= MAX_ID && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(("id".into(), format!("a key id is 1 to {MAX_ID} of A-Z a-z 0-9 . _ -, starting with a letter or digit")))
    }
}

/// The id of a new key of `tenant`, from the `asked` one (`None`: sluice picks one).
///
/// A key id is a name ([`check_id`]) or `<tenant>:<name>` for a key of that tenant. Ids
/// are namespaced per tenant for tenant admins (`namespaced`): the name a tenant admin
/// asks for becomes `<tenant>:<name>`, so it can only ever clash with its own tenant's
/// keys, and a taken id tells it nothing about another tenant.
///
/// # Errors
/// `(param, message)` naming the rule.
pub fn key_id(asked: Option<&str>, tenant: &str, namespaced: bool) -> Result<String, (String, String)> {
    let own = |id: &str| id.strip_prefix(tenant).and_then(|rest| rest.strip_prefix(':')).map(str::to_owned);
    let (prefixed, name) = match asked {
        None => (false, format!("key-{}", sluice_server::keys::hex(&rand::rng().random::<[u8; 6]>()))),
        Some(id) if !id.contains(':') => (false, id.to_owned()),
        Some(id) => match own(id) {
            Some(name) => (true, name),
            None => {
                let message = "a key id with a `:` starts with the key's own tenant: `<tenant>:<name>`";
                return Err(("id".into(), message.into()));
            }
        },
    };
    check_id(&name)?;
    Ok(if namespaced || prefixed { format!("{tenant}:{name}") } else { name })
}

/// Whether a tenant admin's `limits` keep every limit the root admin set (`root`): each
/// present, at most the root admin's value (a tenant admin may tighten, never clear or
/// loosen them).
///
/// # Errors
/// What is wrong, naming the limit.
pub fn within_root(limits: &Map<String, Value>, root: &Map<String, Value>) -> Result<(), String> {
    let asked = amounts(limits);
    for (name, set) in amounts(root) {
        let asked = asked.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
        if asked.is_none_or(|asked| asked > set) {
            return Err(format!(
                "limits.{name} was set to {set} by the root admin: a tenant admin may lower it, not clear or raise it"
            ));
        }
    }
    Ok(())
}

/// Every amount of a limits object by its name, a table's as `budget.day`.
fn amounts(limits: &Map<String, Value>) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for (name, value) in limits {
        match value {
            Value::Object(table) => {
                out.extend(table.iter().filter_map(|(inner, v)| Some((format!("{name}.{inner}"), v.as_f64()?))));
            }
            value => out.extend(value.as_f64().map(|v| (name.clone(), v))),
        }
    }
    out
}

/// Whether `record` is a key the configuration in force can serve, at `now_s`.
///
/// # Errors
/// `(param, message)` naming the first field that is wrong.
pub fn check(record: &KeyRecord, gateway: &Gateway, now_s: u64) -> Result<(), (String, String)> {
    let directory = &gateway.directory;
    let runtime = gateway.services.runtime_keys.tenants();
    let name = record.tenant.as_str();
    let Some(tenant) = directory.tenants.get(name).or_else(|| runtime.get(name)) else {
        return Err(("tenant".into(), format!("no tenant named `{}` is configured", record.tenant)));
    };
    if let Some(team) = record.team.as_deref().filter(|t| !tenant.teams.contains_key(*t)) {
        return Err(("team".into(), format!("tenant `{}` has no team named `{team}`", record.tenant)));
    }
    let wider = record.team.as_deref().and_then(|t| tenant.teams.get(t)).map_or(&tenant.allowed, |t| &t.allowed);
    check_allowed(record, wider, &gateway.deployments)?;
    if let Some(class) = record.class.as_deref().filter(|c| !directory.classes.iter().any(|k| *k.name == **c)) {
        return Err(("class".into(), format!("no traffic class named `{class}`")));
    }
    sluice_server::limits_json::limits_of(&record.limits)?;
    check_metadata(&record.metadata)?;
    if let Some(models) = &record.models {
        if models.len() > MAX_MODELS {
            return Err(("models".into(), format!("at most {MAX_MODELS} model profiles")));
        }
        if let Some(unknown) = models.iter().find(|m| !gateway.profiles.contains_key(m.as_str())) {
            return Err(("models".into(), format!("no model profile named `{unknown}`")));
        }
    }
    match record.expires_at {
        Some(at) if at <= now_s => Err(("expires_at".into(), "expires_at must be in the future (unix seconds)".into())),
        _ => Ok(()),
    }
}

/// A key's own `regions` and `labels`: each list not empty, each name once and one some
/// deployment has, its regions within `wider`'s (its tenant's and team's), and all of it
/// together admitting at least one deployment.
fn check_allowed(record: &KeyRecord, wider: &Allowed, routes: &[Route]) -> Result<(), (String, String)> {
    let of = |field: &str, r: &Route| -> Vec<Arc<str>> {
        if field == "regions" { r.region.iter().cloned().collect() } else { r.labels.clone() }
    };
    for (field, list) in [("regions", &record.regions), ("labels", &record.labels)] {
        let Some(list) = list else { continue };
        let what = field.trim_end_matches('s');
        if list.is_empty() {
            return Err((field.into(), format!("an empty list admits no deployment (null allows any {what})")));
        }
        if list.len() > MAX_CONSTRAINTS {
            return Err((field.into(), format!("at most {MAX_CONSTRAINTS} {field}")));
        }
        for (j, name) in list.iter().enumerate() {
            if list[..j].contains(name) {
                return Err((field.into(), format!("`{name}` is listed twice")));
            }
            if !routes.iter().any(|r| of(field, r).iter().any(|n| **n == **name)) {
                return Err((field.into(), format!("no deployment has the {what} `{name}`")));
            }
            let outside = wider.regions.as_ref().filter(|w| field == "regions" && !w.iter().any(|r| **r == **name));
            if let Some(above) = outside {
                let above: Vec<&str> = above.iter().map(|r| &**r).collect();
                let message = format!(
                    "`{name}` is outside its tenant's and team's regions ({}): a key only narrows them",
                    above.join(", ")
                );
                return Err((field.into(), message));
            }
        }
    }
    let own = record.allowed();
    let effective = wider.narrowed(&own);
    if !own.is_unconstrained() && !routes.iter().any(|r| effective.admits(r.region.as_deref(), &r.labels)) {
        let field = if record.labels.is_some() { "labels" } else { "regions" };
        return Err((field.into(), format!("no deployment is admitted by {effective}: the key could never be served")));
    }
    Ok(())
}

fn check_metadata(metadata: &Map<String, Value>) -> Result<(), (String, String)> {
    if metadata.len() > MAX_METADATA_ENTRIES {
        return Err(("metadata".into(), format!("at most {MAX_METADATA_ENTRIES} metadata entries")));
    }
    for (name, value) in metadata {
        let field = format!("metadata.{}", name.chars().take(MAX_METADATA_NAME).collect::<String>());
        if name.is_empty() || name.chars().count() > MAX_METADATA_NAME {
            return Err((field, format!("a metadata name is 1 to {MAX_METADATA_NAME} characters")));
        }
        let Value::String(text) = value else { return Err((field, "a metadata value is a string".into())) };
        if text.chars().count() > MAX_METADATA_VALUE {
            return Err((field, format!("a metadata value is at most {MAX_METADATA_VALUE} characters")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn names_start_with_a_letter_or_digit_and_keep_to_the_charset() {
        for good in ["a", "A-1", "ci.bot_2", &"x".repeat(MAX_ID)] {
            assert!(check_id(good).is_ok(), "{good}");
        }
        for bad in ["", ".", "..", "-a", "_a", ".a", "a/b", "a:b", "a b", "é", &"x".repeat(MAX_ID + 1)] {
            assert!(check_id(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_tenant_admins_ids_are_namespaced_by_its_tenant() {
        assert_eq!(key_id(Some("ci"), "acme", false).unwrap(), "ci");
        assert_eq!(key_id(Some("ci"), "acme", true).unwrap(), "acme:ci");
        assert_eq!(key_id(Some("acme:ci"), "acme", true).unwrap(), "acme:ci");
        assert_eq!(key_id(Some("acme:ci"), "acme", false).unwrap(), "acme:ci");
        assert!(key_id(None, "acme", true).unwrap().starts_with("acme:key-"));
        assert!(key_id(None, "acme", false).unwrap().starts_with("key-"));
        let elsewhere = key_id(Some("globex:ci"), "acme", true).unwrap_err();
        assert_eq!(elsewhere, key_id(Some("globex:unused"), "acme", true).unwrap_err(), "taken or not, alike");
        assert!(key_id(Some("acme:.."), "acme", true).is_err());
        assert!(key_id(Some("acme:a:b"), "acme", true).is_err());
    }

    #[test]
    fn a_root_limit_may_be_lowered_never_cleared_or_raised() {
        let root = json!({"rpm": 100, "burst_seconds": 1.5});
        let root = root.as_object().unwrap();
        let ok = |limits: serde_json::Value| within_root(limits.as_object().unwrap(), root).is_ok();
        assert!(ok(json!({"rpm": 100, "burst_seconds": 1.5})));
        assert!(ok(json!({"rpm": 1, "burst_seconds": 0.5, "tpm": 10})));
        assert!(!ok(json!({"burst_seconds": 1.5})), "cleared");
        assert!(!ok(json!({"rpm": 101, "burst_seconds": 1.5})), "raised");
        assert!(!ok(json!({"rpm": 100, "burst_seconds": 2})), "a longer burst is looser");
        assert!(within_root(&Map::new(), &Map::new()).is_ok());
        let root = json!({"budget": {"day": 5.0}});
        let root = root.as_object().unwrap();
        let ok = |limits: serde_json::Value| within_root(limits.as_object().unwrap(), root).is_ok();
        assert!(ok(json!({"budget": {"day": 1, "month": 20}})));
        assert!(!ok(json!({"budget": {"month": 20}})), "a root budget cleared");
        assert!(!ok(json!({"budget": {"day": 5.5}})), "a root budget raised");
    }
}
