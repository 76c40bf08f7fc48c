//! A limits object sent as JSON (the admin API, runtime keys and tenants) read in the
//! configuration's own vocabulary: turned into the file's TOML and validated by the config's
//! parser, so the API and the file accept exactly the same limits. Pure: no IO, no state.

use serde_json::Value;
use sluice_quota::ScopeKind;

/// The JSON limits object as TOML for the config's own validation: numbers only, names
/// as plain words (anything else is refused naming it).
///
/// # Errors
/// The field and what is wrong with it.
pub fn limits_toml(body: &[u8]) -> Result<String, (String, String)> {
    let value: Value = serde_json::from_slice(body).map_err(|e| ("limits".to_owned(), format!("invalid JSON: {e}")))?;
    let Value::Object(map) = value else {
        return Err(("limits".into(), "send a JSON object like {\"rpm\": 500, \"tpm\": 30000}".into()));
    };
    map_toml(&map)
}

/// A runtime tenant's, team's or key's limits object validated as the configuration's
/// caller limits are (the whole window as their default burst): `(field, message)` when not.
///
/// # Errors
/// The field and what is wrong with it.
pub fn limits_of(map: &serde_json::Map<String, Value>) -> Result<sluice_quota::Limits, (String, String)> {
    let text = map_toml(map)?;
    sluice_config::parse_limits(ScopeKind::Tenant, "limits", &text).map_err(|e| (e.field, e.message))
}

/// The limits object as the file's TOML: numbers, and tables of numbers (`budget`:
/// `{"day": 25.0, "month": 500}`); the vocabulary itself is checked by the config's parser.
fn map_toml(map: &serde_json::Map<String, Value>) -> Result<String, (String, String)> {
    let mut text = String::new();
    for (name, value) in map {
        let field = format!("limits.{name}");
        let value = match value {
            Value::Object(table) => {
                let mut entries = Vec::with_capacity(table.len());
                for (inner, value) in table {
                    let field = format!("{field}.{inner}");
                    entries.push(format!("{} = {}", toml_name(inner, &field)?, number(value, &field)?));
                }
                format!("{{ {} }}", entries.join(", "))
            }
            value => number(value, &field)?,
        };
        text.push_str(&format!("{} = {value}\n", toml_name(name, &field)?));
    }
    Ok(text)
}

/// `name` when it can be a limit's name (lowercase letters and `_`), else the refusal.
fn toml_name<'a>(name: &'a str, field: &str) -> Result<&'a str, (String, String)> {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
        return Err((field.to_owned(), "unknown limit".into()));
    }
    Ok(name)
}

fn number(value: &Value, field: &str) -> Result<String, (String, String)> {
    match value {
        Value::Number(n) => Ok(n.to_string()),
        _ => Err((field.to_owned(), "must be a number".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_json_becomes_toml_or_names_the_field() {
        assert_eq!(limits_toml(br#"{"rpm": 5, "burst_seconds": 1.5}"#).unwrap(), "burst_seconds = 1.5\nrpm = 5\n");
        assert_eq!(limits_toml(br#"{"rpm": "5"}"#).unwrap_err().0, "limits.rpm");
        assert_eq!(limits_toml(br#"{"r\npm = 1\ntpm": 5}"#).unwrap_err().0, "limits.r\npm = 1\ntpm");
        assert_eq!(limits_toml(b"[1]").unwrap_err().0, "limits");
        assert_eq!(limits_toml(b"{").unwrap_err().0, "limits");
        let budget = limits_toml(br#"{"budget": {"day": 0.01, "month": 5}, "rpm": 60}"#).unwrap();
        assert_eq!(budget, "budget = { day = 0.01, month = 5 }\nrpm = 60\n");
        assert_eq!(limits_toml(br#"{"budget": {"day": "1"}}"#).unwrap_err().0, "limits.budget.day");
        assert_eq!(limits_toml(br#"{"budget": {"d = 1, x": 1}}"#).unwrap_err().0, "limits.budget.d = 1, x");
        assert_eq!(limits_toml(br#"{"budget": {"day": {"x": 1}}}"#).unwrap_err().0, "limits.budget.day");
    }
}
