//! The model profile a passed-through request names, and its body with the deployment's
//! model in its place: in a JSON body's `model`, a multipart form's `model` field, the
//! `x-sluice-model` header, or the query's `model`.

use axum::http::{HeaderMap, header};
use bytes::Bytes;
use serde_json::Value;

use super::MODEL_HEADER;

/// The multipart form field holding the model, up to its value.
const FORM_FIELD: &[u8] = b"name=\"model\"\r\n\r\n";

fn is_json(headers: &HeaderMap) -> bool {
    headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|t| t.contains("json"))
}

/// Where a multipart form's `model` value lies in `body`.
fn form_value(body: &[u8]) -> Option<std::ops::Range<usize>> {
    let start = body.windows(FORM_FIELD.len()).position(|w| w == FORM_FIELD)? + FORM_FIELD.len();
    let len = body.get(start..)?.windows(2).position(|w| w == b"\r\n")?;
    Some(start..start + len)
}

/// The model profile the request names.
pub fn model_of(headers: &HeaderMap, body: &[u8], query: Option<&str>) -> Option<String> {
    let header = headers.get(MODEL_HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let json = || {
        let value: Value = serde_json::from_slice(body).ok()?;
        value.get("model")?.as_str().map(str::to_owned)
    };
    let form = || String::from_utf8(body.get(form_value(body)?)?.to_vec()).ok();
    let query = || {
        let pairs = query?.split('&').filter_map(|pair| pair.split_once('='));
        pairs.into_iter().find(|(k, _)| *k == "model").map(|(_, v)| v.to_owned())
    };
    header.or_else(|| if is_json(headers) { json() } else { form() }).or_else(query).filter(|m| !m.is_empty())
}

/// `body` with the deployment's `model` where the client named profile `named`.
pub fn with_model(headers: &HeaderMap, body: Bytes, named: &str, model: &str) -> Bytes {
    if is_json(headers) {
        let Ok(Value::Object(mut object)) = serde_json::from_slice::<Value>(&body) else { return body };
        if object.get("model").and_then(Value::as_str) != Some(named) {
            return body;
        }
        object.insert("model".into(), Value::String(model.to_owned()));
        return serde_json::to_vec(&object).map_or(body, Bytes::from);
    }
    match form_value(&body).filter(|range| body.get(range.clone()) == Some(named.as_bytes())) {
        Some(range) => [&body[..range.start], model.as_bytes(), &body[range.end..]].concat().into(),
        None => body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(content_type: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, http::HeaderValue::from_static(content_type));
        headers
    }

    #[test]
    fn the_model_is_read_and_replaced_in_json_and_forms() {
        let json = typed("application/json");
        let body = Bytes::from_static(br#"{"model":"fast","input":"x"}"#);
        assert_eq!(model_of(&json, &body, None).as_deref(), Some("fast"));
        let replaced: Value = serde_json::from_slice(&with_model(&json, body, "fast", "gpt-x")).unwrap_or_default();
        assert_eq!(replaced["model"], "gpt-x");
        let form = typed("multipart/form-data; boundary=b");
        let body =
            Bytes::from_static(b"--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nfast\r\n--b--\r\n");
        assert_eq!(model_of(&form, &body, None).as_deref(), Some("fast"));
        let replaced = with_model(&form, body, "fast", "whisper-1");
        assert!(replaced.windows(13).any(|w| w == b"\r\nwhisper-1\r\n"));
        assert_eq!(model_of(&HeaderMap::new(), b"", Some("a=1&model=m")).as_deref(), Some("m"));
        assert_eq!(model_of(&HeaderMap::new(), b"", None), None);
    }
}
