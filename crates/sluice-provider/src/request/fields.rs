//! Typed access to the fields of a JSON object, turning every mismatch into a
//! [`RequestError`] that names the field.

use serde_json::{Map, Value};

use crate::error::RequestError;

pub(crate) type Object = Map<String, Value>;

/// The field's value, treating an explicit `null` like an absent field (the OpenAI and
/// Anthropic APIs both accept `null` for optional parameters).
pub(crate) fn present<'a>(obj: &'a Object, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|v| !v.is_null())
}

/// `model`: a non-empty string.
pub(crate) fn model(obj: &Object) -> Result<String, RequestError> {
    match present(obj, "model") {
        None => Err(RequestError::missing("model")),
        Some(Value::String(s)) if s.is_empty() => Err(RequestError::invalid("model", "must not be empty")),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(RequestError::wrong_type("model", "a string")),
    }
}

/// An optional non-negative integer.
pub(crate) fn opt_u64(obj: &Object, key: &str) -> Result<Option<u64>, RequestError> {
    let Some(value) = present(obj, key) else {
        return Ok(None);
    };
    match value {
        Value::Number(n) if n.as_u64().is_some() => Ok(n.as_u64()),
        Value::Number(n) if n.as_i64().is_some() => Err(RequestError::invalid(key, "must be >= 0")),
        _ => Err(RequestError::wrong_type(key, "an integer")),
    }
}

/// An optional boolean.
pub(crate) fn opt_bool(obj: &Object, key: &str) -> Result<Option<bool>, RequestError> {
    match present(obj, key) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(RequestError::wrong_type(key, "a boolean")),
    }
}

/// An optional object.
pub(crate) fn opt_object<'a>(obj: &'a Object, key: &str) -> Result<Option<&'a Object>, RequestError> {
    match present(obj, key) {
        None => Ok(None),
        Some(Value::Object(o)) => Ok(Some(o)),
        Some(_) => Err(RequestError::wrong_type(key, "an object")),
    }
}

/// An optional array, `path` naming it in errors.
pub(crate) fn opt_array<'a>(
    obj: &'a Object,
    key: &str,
    path: impl FnOnce() -> String,
) -> Result<Option<&'a Vec<Value>>, RequestError> {
    match present(obj, key) {
        None => Ok(None),
        Some(Value::Array(a)) => Ok(Some(a)),
        Some(_) => Err(RequestError::wrong_type(path(), "an array")),
    }
}

/// A required non-empty array of objects (`messages`), yielding the objects.
pub(crate) fn object_list<'a>(obj: &'a Object, key: &str) -> Result<Vec<&'a Object>, RequestError> {
    let list = match present(obj, key) {
        None => return Err(RequestError::missing(key)),
        Some(Value::Array(a)) => a,
        Some(_) => return Err(RequestError::wrong_type(key, "an array")),
    };
    if list.is_empty() {
        return Err(RequestError::invalid(key, "must contain at least one item"));
    }
    list.iter()
        .enumerate()
        .map(|(i, v)| v.as_object().ok_or_else(|| RequestError::wrong_type(format!("{key}[{i}]"), "an object")))
        .collect()
}

/// A required string field of a nested object; `path` is the object's own path.
pub(crate) fn nested_str<'a>(obj: &'a Object, key: &str, path: &dyn Fn() -> String) -> Result<&'a str, RequestError> {
    match present(obj, key) {
        None => Err(RequestError::missing(format!("{}.{key}", path()))),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(RequestError::wrong_type(format!("{}.{key}", path()), "a string")),
    }
}

/// An optional string field of a nested object.
pub(crate) fn nested_opt_str<'a>(
    obj: &'a Object,
    key: &str,
    path: &dyn Fn() -> String,
) -> Result<Option<&'a str>, RequestError> {
    match present(obj, key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(RequestError::wrong_type(format!("{}.{key}", path()), "a string")),
    }
}

/// Content parts / blocks: every item an object with a string `type`; `text` parts need a
/// string `text`.
pub(crate) fn typed_parts(parts: &[Value], path: &dyn Fn() -> String) -> Result<(), RequestError> {
    for (i, part) in parts.iter().enumerate() {
        let at = || format!("{}[{i}]", path());
        let Some(part) = part.as_object() else {
            return Err(RequestError::wrong_type(at(), "an object"));
        };
        if nested_str(part, "type", &at)? == "text" {
            nested_str(part, "text", &at)?;
        }
    }
    Ok(())
}
