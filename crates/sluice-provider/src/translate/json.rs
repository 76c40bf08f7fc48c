//! Small typed readers over `serde_json` values, shared by the translators.

use serde_json::{Map, Value};

use super::error::TranslateError;

/// A JSON object.
pub(crate) type Object = Map<String, Value>;

/// The field's value, an explicit `null` counting as absent (both APIs accept `null` for
/// optional parameters).
pub(crate) fn present<'a>(obj: &'a Object, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|v| !v.is_null())
}

/// `path.key`, or `key` at the top level (`path` empty).
pub(crate) fn join(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_owned() } else { format!("{path}.{key}") }
}

/// An optional string field; another type is an error naming `path`.
pub(crate) fn opt_str<'a>(obj: &'a Object, key: &str, path: &str) -> Result<Option<&'a str>, TranslateError> {
    match present(obj, key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(TranslateError::invalid(join(path, key), "must be a string")),
    }
}

/// A required string field.
pub(crate) fn req_str<'a>(obj: &'a Object, key: &str, path: &str) -> Result<&'a str, TranslateError> {
    opt_str(obj, key, path)?.ok_or_else(|| TranslateError::invalid(join(path, key), "is required"))
}

/// `value` as an object, or an error naming `path`.
pub(crate) fn as_object<'a>(value: &'a Value, path: &str) -> Result<&'a Object, TranslateError> {
    value.as_object().ok_or_else(|| TranslateError::invalid(path, "must be an object"))
}

/// An optional array field (`null` and absent give an empty slice).
pub(crate) fn opt_array<'a>(obj: &'a Object, key: &str, path: &str) -> Result<&'a [Value], TranslateError> {
    match present(obj, key) {
        None => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(TranslateError::invalid(join(path, key), "must be an array")),
    }
}

/// A `{"type": "text", "text": ..}` block (the same shape in both protocols).
pub(crate) fn text_block(text: &str) -> Value {
    let mut block = Object::new();
    block.insert("type".to_owned(), Value::from("text"));
    block.insert("text".to_owned(), Value::from(text));
    Value::Object(block)
}

/// Builds an object from `(key, value)` pairs.
pub(crate) fn object<const N: usize>(pairs: [(&str, Value); N]) -> Object {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// Tool-call arguments (a JSON text) as an input object; blank means no arguments.
pub(crate) fn parse_arguments(arguments: &str, path: &str) -> Result<Value, TranslateError> {
    if arguments.trim().is_empty() {
        return Ok(Value::Object(Object::new()));
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(input)) => Ok(Value::Object(input)),
        _ => Err(TranslateError::invalid(path, "must be a JSON object")),
    }
}

/// Parses a response body into an object.
pub(crate) fn parse_body(body: &[u8]) -> Result<Object, TranslateError> {
    match serde_json::from_slice(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(TranslateError::invalid("body", "must be a JSON object")),
        Err(e) => Err(TranslateError::invalid("body", format!("is not valid JSON: {e}"))),
    }
}

/// Serializes a value that holds only JSON data (cannot fail).
pub(crate) fn to_vec(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}
