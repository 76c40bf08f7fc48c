//! `GET /admin/usage`'s query: its parameters, the grouping of daily rollups, and the
//! answer as JSON or CSV (RFC 4180, UTF-8, one row per group, text cells safe to open in
//! a spreadsheet).

use std::collections::BTreeMap;

use super::dates::{civil, parse_instant};
use serde_json::{Map, Value, json};
use sluice_jobs::{Day, UsageCounts, UsageKey};

/// The longest range one query may span.
pub const MAX_DAYS: i64 = 366;
/// The most rows one answer may have.
pub const MAX_ROWS: usize = 10_000;
/// The range when `from` is left out: the 30 days up to `to`.
const DEFAULT_DAYS: i64 = 30;
const DAY_SECS: i64 = 86_400;

/// What a usage row may be grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Dim {
    /// The tenant.
    Tenant,
    /// The team.
    Team,
    /// The key's id.
    Key,
    /// The model profile.
    Profile,
    /// The deployment.
    Deployment,
    /// The UTC day.
    Day,
}

impl Dim {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "tenant" => Self::Tenant,
            "team" => Self::Team,
            "key" => Self::Key,
            "profile" | "model" | "model_profile" => Self::Profile,
            "deployment" => Self::Deployment,
            "day" => Self::Day,
            _ => return None,
        })
    }

    /// The column's name.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Tenant => "tenant",
            Self::Team => "team",
            Self::Key => "key",
            Self::Profile => "profile",
            Self::Deployment => "deployment",
            Self::Day => "day",
        }
    }

    fn of(self, key: &UsageKey) -> String {
        match self {
            Self::Tenant => key.tenant.clone(),
            Self::Team => key.team.clone(),
            Self::Key => key.key.clone(),
            Self::Profile => key.profile.clone(),
            Self::Deployment => key.deployment.clone(),
            Self::Day => civil(key.day),
        }
    }
}

/// A usage query, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// The first day included.
    pub first: Day,
    /// The last day included.
    pub last: Day,
    /// The grouping, in the caller's order.
    pub group_by: Vec<Dim>,
    /// Only this tenant's usage.
    pub tenant: Option<String>,
    /// Answer in CSV.
    pub csv: bool,
}

/// A refused parameter: its name and what is wrong.
pub type Invalid = (String, String);

fn invalid(param: &str, message: impl Into<String>) -> Invalid {
    (param.to_owned(), message.into())
}

/// Reads the query's parameters; `today` is the day a missing `to` ends with, `wants_csv`
/// whether the request's `Accept` asks for `text/csv`.
///
/// # Errors
/// The parameter that is wrong, and why.
pub fn parse(params: &[(String, String)], today: Day, wants_csv: bool) -> Result<Query, Invalid> {
    let mut query = Query { first: 0, last: 0, group_by: Vec::new(), tenant: None, csv: wants_csv };
    let (mut from, mut to) = (None, None);
    for (name, value) in params {
        match name.as_str() {
            "from" => from = Some(instant("from", value)?),
            "to" => to = Some(instant("to", value)?),
            "group_by" => query.group_by = group_by(value)?,
            "tenant" => query.tenant = Some(value.clone()),
            "format" => query.csv = format(value)?,
            other => return Err(invalid(other, "unknown parameter (known: from, to, group_by, tenant, format)")),
        }
    }
    let to = to.unwrap_or((i64::from(today) + 1) * DAY_SECS);
    let from = from.unwrap_or(to - DEFAULT_DAYS * DAY_SECS);
    if from < 0 {
        return Err(invalid("from", "must be 1970-01-01 or later"));
    }
    if to <= from {
        return Err(invalid("to", "must be after `from` (`to` is exclusive)"));
    }
    // Rollups are daily: a range covers every day it touches.
    let (first, end) = (from.div_euclid(DAY_SECS), (to + DAY_SECS - 1).div_euclid(DAY_SECS));
    if end - first > MAX_DAYS {
        return Err(invalid("from", format!("the range spans {} days; at most {MAX_DAYS} per query", end - first)));
    }
    query.first = Day::try_from(first).map_err(|_| invalid("from", "out of range"))?;
    query.last = Day::try_from(end - 1).map_err(|_| invalid("to", "out of range"))?;
    Ok(query)
}

fn instant(param: &str, value: &str) -> Result<i64, Invalid> {
    parse_instant(value).ok_or_else(|| {
        invalid(param, format!("`{value}` is not a date (2026-11-01) or an RFC 3339 time (2026-11-01T00:00:00Z)"))
    })
}

fn group_by(value: &str) -> Result<Vec<Dim>, Invalid> {
    let mut dims = Vec::new();
    for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let Some(dim) = Dim::parse(name) else {
            return Err(invalid(
                "group_by",
                format!("unknown `{name}` (known: tenant, team, key, profile, deployment, day)"),
            ));
        };
        if !dims.contains(&dim) {
            dims.push(dim);
        }
    }
    Ok(dims)
}

fn format(value: &str) -> Result<bool, Invalid> {
    match value {
        "json" => Ok(false),
        "csv" => Ok(true),
        other => Err(invalid("format", format!("`{other}` is not json or csv"))),
    }
}

/// One answer row: its group's values (in `group_by` order) and its counts.
pub type Row = (Vec<String>, UsageCounts);

/// Sums `rollups` into one row per group of `query` (sorted by the group's values),
/// keeping only its days and tenant.
///
/// # Errors
/// More than [`MAX_ROWS`] groups (named as `group_by`'s fault, with what would help).
pub fn aggregate(
    rollups: impl IntoIterator<Item = (UsageKey, UsageCounts)>,
    query: &Query,
) -> Result<Vec<Row>, Invalid> {
    let mut groups: BTreeMap<Vec<String>, UsageCounts> = BTreeMap::new();
    let wanted = |key: &UsageKey| {
        (query.first..=query.last).contains(&key.day) && query.tenant.as_ref().is_none_or(|t| *t == key.tenant)
    };
    for (key, counts) in rollups.into_iter().filter(|(key, _)| wanted(key)) {
        let group = query.group_by.iter().map(|dim| dim.of(&key)).collect();
        groups.entry(group).or_default().add(&counts);
        if groups.len() > MAX_ROWS {
            let message =
                format!("more than {MAX_ROWS} rows: narrow `from`/`to`, set `tenant` or group by fewer fields");
            return Err(invalid("group_by", message));
        }
    }
    Ok(groups.into_iter().collect())
}

/// A cost in nano-units as an exact decimal (`12.000000250`).
#[must_use]
pub fn decimal(nanos: u64) -> String {
    format!("{}.{:09}", nanos / 1_000_000_000, nanos % 1_000_000_000)
}

fn counts_json(counts: &UsageCounts, into: &mut Map<String, Value>) {
    into.insert("requests".into(), counts.requests.into());
    into.insert("input_tokens".into(), counts.input_tokens.into());
    into.insert("cached_input_tokens".into(), counts.cached_input_tokens.into());
    into.insert("output_tokens".into(), counts.output_tokens.into());
    into.insert("reasoning_tokens".into(), counts.reasoning_tokens.into());
    // A JSON number for tools, and the exact decimal for books that must add up.
    into.insert("cost".into(), json!(counts.cost_nanos as f64 / 1e9));
    into.insert("cost_decimal".into(), decimal(counts.cost_nanos).into());
    // Where the figures came from: the rest of the requests were the provider's reports.
    into.insert("counted_requests".into(), counts.counted_requests.into());
    into.insert("estimated_requests".into(), counts.estimated_requests.into());
}

/// The answer as JSON: the range (`to` exclusive), the grouping, each row and the total.
#[must_use]
pub fn to_json(rows: &[Row], query: &Query, currency: &str) -> Value {
    let mut total = UsageCounts::default();
    let rows: Vec<Value> = rows
        .iter()
        .map(|(group, counts)| {
            total.add(counts);
            let mut row = Map::new();
            for (dim, value) in query.group_by.iter().zip(group) {
                row.insert(dim.name().into(), value.clone().into());
            }
            counts_json(counts, &mut row);
            Value::Object(row)
        })
        .collect();
    let mut sum = Map::new();
    counts_json(&total, &mut sum);
    json!({
        "from": civil(query.first),
        "to": civil(query.last.saturating_add(1)),
        "group_by": query.group_by.iter().map(|d| d.name()).collect::<Vec<_>>(),
        "tenant": query.tenant,
        "currency": currency,
        "rows": rows,
        "total": sum,
    })
}

/// The answer as CSV: a header row, then one row per group; CRLF line ends, UTF-8 with a
/// byte-order mark (so that spreadsheets read it as UTF-8).
#[must_use]
pub fn to_csv(rows: &[Row], query: &Query, currency: &str) -> String {
    let mut out = String::from("\u{feff}");
    let mut header: Vec<&str> = query.group_by.iter().map(|d| d.name()).collect();
    header.extend([
        "requests",
        "input_tokens",
        "cached_input_tokens",
        "output_tokens",
        "reasoning_tokens",
        "cost",
        "currency",
        "counted_requests",
        "estimated_requests",
    ]);
    line(&mut out, header.iter().map(|h| cell(h)));
    for (group, c) in rows {
        let numbers = [c.requests, c.input_tokens, c.cached_input_tokens, c.output_tokens, c.reasoning_tokens];
        let cells = group.iter().map(|v| cell(v)).chain(numbers.iter().map(u64::to_string));
        let sources = [c.counted_requests, c.estimated_requests].map(|n| n.to_string());
        line(&mut out, cells.chain([decimal(c.cost_nanos), cell(currency)]).chain(sources));
    }
    out
}

fn line(out: &mut String, cells: impl Iterator<Item = String>) {
    let cells: Vec<String> = cells.collect();
    out.push_str(&cells.join(","));
    out.push_str("\r\n");
}

/// A text cell: a leading `=`, `+`, `-`, `@`, tab or CR (which a spreadsheet would run as
/// a formula) gets a `'` before it; a cell with a comma, quote or line break is quoted,
/// its quotes doubled (RFC 4180).
#[must_use]
pub fn cell(value: &str) -> String {
    let formula = value.starts_with(['=', '+', '-', '@', '\t', '\r']);
    let value = if formula { format!("'{value}") } else { value.to_owned() };
    if value.contains([',', '"', '\r', '\n']) { format!("\"{}\"", value.replace('"', "\"\"")) } else { value }
}
