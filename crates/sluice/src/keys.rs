//! `sluice keys`: create, list and revoke runtime keys through a running gateway's admin
//! API (`/admin/keys`). The admin key comes from `SLUICE_ADMIN_KEY`, never from the
//! command line (it would stay in the shell's history and the process list).

use anyhow::Context as _;
use serde_json::{Map, Value, json};

/// Options of `sluice keys`.
#[derive(Debug, clap::Args)]
pub struct KeysArgs {
    /// The admin listener's base URL (`[admin] listen`; the gateway's own with
    /// `listen = "shared"`).
    #[arg(long, env = "SLUICE_URL", default_value = "http://127.0.0.1:9090")]
    pub url: String,
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
}

/// A `sluice keys` action.
#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Create a key; prints its secret once (on the first line), then the key as JSON.
    Create {
        /// The tenant (configured).
        #[arg(long)]
        tenant: String,
        /// The key's id (generated when left out).
        #[arg(long)]
        id: Option<String>,
        /// Its team in the tenant.
        #[arg(long)]
        team: Option<String>,
        /// Its traffic class.
        #[arg(long)]
        class: Option<String>,
        /// A model profile it may name (repeat; all when left out).
        #[arg(long = "model")]
        models: Vec<String>,
        /// Unix seconds after which it stops working.
        #[arg(long)]
        expires_at: Option<u64>,
        /// A metadata entry `NAME=VALUE` (repeat).
        #[arg(long = "metadata", value_parser = name_value)]
        metadata: Vec<(String, String)>,
        /// Make a tenant admin key instead of a client key.
        #[arg(long)]
        tenant_admin: bool,
    },
    /// List the keys (configured and runtime): id, source, tenant, team, status.
    List,
    /// Revoke a runtime key: it stops working on every instance within a second.
    Revoke {
        /// The key's id.
        id: String,
    },
}

fn name_value(text: &str) -> Result<(String, String), String> {
    let (name, value) = text.split_once('=').ok_or("expected NAME=VALUE")?;
    Ok((name.to_owned(), value.to_owned()))
}

/// Runs the action against the gateway at `args.url`.
///
/// # Errors
/// Without `SLUICE_ADMIN_KEY`, when the gateway cannot be reached, or when it refuses
/// (its error message is shown).
pub async fn run(args: KeysArgs) -> anyhow::Result<()> {
    let admin = std::env::var("SLUICE_ADMIN_KEY").context("set SLUICE_ADMIN_KEY to the gateway's admin key")?;
    let base = args.url.trim_end_matches('/');
    let http = reqwest::Client::builder().timeout(std::time::Duration::from_secs(30)).build()?;
    match args.action {
        Action::List => {
            let listed = send(http.get(format!("{base}/admin/keys")), &admin).await?;
            for key in listed["data"].as_array().into_iter().flatten() {
                let field = |name: &str| key[name].as_str().unwrap_or("-").to_owned();
                let row = [field("id"), field("source"), field("tenant"), field("team"), field("status")];
                crate::write_line(&row.join("\t"));
            }
        }
        Action::Revoke { id } => {
            let key = send(http.post(format!("{base}/admin/keys/{id}/revoke")), &admin).await?;
            crate::write_line(&format!("revoked {}", key["id"].as_str().unwrap_or(&id)));
        }
        create @ Action::Create { .. } => {
            let created = send(http.post(format!("{base}/admin/keys")).json(&body_of(create)), &admin).await?;
            crate::write_line(created["secret"].as_str().unwrap_or_default());
            crate::write_line(&created["key"].to_string());
        }
    }
    Ok(())
}

/// The `POST /admin/keys` body of a create action.
fn body_of(action: Action) -> Value {
    let Action::Create { tenant, id, team, class, models, expires_at, metadata, tenant_admin } = action else {
        return Value::Null;
    };
    let metadata: Map<String, Value> = metadata.into_iter().map(|(k, v)| (k, Value::String(v))).collect();
    let mut body = json!({"tenant": tenant, "metadata": metadata});
    for (name, value) in
        [("id", json!(id)), ("team", json!(team)), ("class", json!(class)), ("expires_at", json!(expires_at))]
    {
        if !value.is_null() {
            body[name] = value;
        }
    }
    if !models.is_empty() {
        body["models"] = json!(models);
    }
    if tenant_admin {
        body["role"] = json!("tenant_admin");
    }
    body
}

/// Sends the request with the admin key; its JSON answer, or the gateway's error message.
async fn send(request: reqwest::RequestBuilder, admin: &str) -> anyhow::Result<Value> {
    let response = request.bearer_auth(admin).send().await.context("calling the gateway")?;
    let status = response.status();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    if !status.is_success() {
        let message = body["error"]["message"].as_str().unwrap_or("no error message");
        anyhow::bail!("the gateway answered {status}: {message}");
    }
    Ok(body)
}
