//! Images, the one non-text input both protocols accept in user turns: OpenAI `image_url`
//! parts (a `data:` URL or an http(s) URL) ⇄ Anthropic `image` blocks (a base64 or url
//! source).

use serde_json::Value;

use super::error::TranslateError;
use super::json::{self, Object, object};
use crate::protocol::Protocol;

/// Media types Anthropic accepts for base64 images.
const ANTHROPIC_MEDIA_TYPES: [&str; 4] = ["image/jpeg", "image/png", "image/gif", "image/webp"];

/// An OpenAI `image_url` part as an Anthropic `image` block. `detail` has no counterpart
/// and is dropped (it only tunes OpenAI's resolution/pricing trade-off).
pub(crate) fn to_anthropic(part: &Object, path: &str) -> Result<Value, TranslateError> {
    let url = match json::present(part, "image_url") {
        Some(Value::String(url)) => url.as_str(),
        Some(Value::Object(image)) => json::req_str(image, "url", &json::join(path, "image_url"))?,
        _ => return Err(TranslateError::invalid(json::join(path, "image_url"), "must be an object with a url")),
    };
    let source = if let Some(rest) = url.strip_prefix("data:") {
        base64_source(rest, path)?
    } else if url.starts_with("https://") || url.starts_with("http://") {
        object([("type", Value::from("url")), ("url", Value::from(url))])
    } else {
        return Err(TranslateError::unsupported(
            json::join(path, "image_url.url"),
            Protocol::AnthropicMessages,
            "only data: and http(s) image URLs can be passed on",
        ));
    };
    Ok(Value::Object(object([("type", Value::from("image")), ("source", Value::Object(source))])))
}

/// The part of a `data:` URL after the scheme, `<media type>;base64,<data>`, as a base64
/// source.
fn base64_source(rest: &str, path: &str) -> Result<Object, TranslateError> {
    let field = || json::join(path, "image_url.url");
    let Some((media_type, data)) = rest.split_once(";base64,") else {
        return Err(TranslateError::invalid(field(), "must be a base64 data: URL"));
    };
    if !ANTHROPIC_MEDIA_TYPES.contains(&media_type) {
        return Err(TranslateError::unsupported(
            field(),
            Protocol::AnthropicMessages,
            "the image must be JPEG, PNG, GIF or WebP",
        ));
    }
    Ok(object([("type", Value::from("base64")), ("media_type", Value::from(media_type)), ("data", Value::from(data))]))
}

/// An Anthropic `image` block as an OpenAI `image_url` part: a base64 source becomes a
/// `data:` URL, a url source stays a URL. File-API sources have no counterpart.
pub(crate) fn to_openai(block: &Object, path: &str) -> Result<Value, TranslateError> {
    let source_path = json::join(path, "source");
    let source = json::as_object(json::present(block, "source").unwrap_or(&Value::Null), &source_path)?;
    let url = match json::req_str(source, "type", &source_path)? {
        "base64" => {
            let media_type = json::req_str(source, "media_type", &source_path)?;
            let data = json::req_str(source, "data", &source_path)?;
            format!("data:{media_type};base64,{data}")
        }
        "url" => json::req_str(source, "url", &source_path)?.to_owned(),
        _ => {
            return Err(TranslateError::unsupported(
                json::join(&source_path, "type"),
                Protocol::OpenAiChat,
                "only base64 and url image sources can be passed on",
            ));
        }
    };
    let image_url = object([("url", Value::from(url))]);
    Ok(Value::Object(object([("type", Value::from("image_url")), ("image_url", Value::Object(image_url))])))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn obj(value: Value) -> Object {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn data_url_becomes_base64_and_back() {
        let part =
            obj(json!({"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"high"}}));
        let block = to_anthropic(&part, "messages[0].content[1]").unwrap();
        assert_eq!(
            block,
            json!({"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}})
        );
        let back = to_openai(&obj(block), "messages[0].content[1]").unwrap();
        assert_eq!(back, json!({"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}));
    }

    #[test]
    fn http_url_becomes_url_source() {
        let part = obj(json!({"type":"image_url","image_url":{"url":"https://example.com/cat.jpg"}}));
        let block = to_anthropic(&part, "p").unwrap();
        assert_eq!(block, json!({"type":"image","source":{"type":"url","url":"https://example.com/cat.jpg"}}));
        assert_eq!(to_openai(&obj(block), "p").unwrap()["image_url"]["url"], "https://example.com/cat.jpg");
    }

    #[test]
    fn refuses_what_the_other_side_cannot_take() {
        let tiff = obj(json!({"type":"image_url","image_url":{"url":"data:image/tiff;base64,AAAA"}}));
        let err = to_anthropic(&tiff, "messages[0].content[0]").unwrap_err();
        assert_eq!(err.field(), Some("messages[0].content[0].image_url.url"));
        let file = obj(json!({"type":"image","source":{"type":"file","file_id":"file_011"}}));
        assert_eq!(to_openai(&file, "m").unwrap_err().field(), Some("m.source.type"));
    }
}
