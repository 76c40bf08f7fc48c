//! `POST /v1/embeddings`: deterministic vectors (floats or base64), real token counts.

use std::borrow::Cow;
use std::sync::Arc;

use axum::Extension;
use axum::extract::State;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{invalid, resolve};
use crate::admission::Cost;
use crate::conn::ConnCtl;
use crate::errors::ApiError;
use crate::flow::{self, Prepared};
use crate::sim::{Ask, Sim};
use crate::tokens::Tokenizer;

/// The request body.
#[derive(Debug, Deserialize)]
struct EmbeddingsRequest<'a> {
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(default)]
    input: Option<Value>,
    #[serde(borrow, default)]
    encoding_format: Option<Cow<'a, str>>,
    #[serde(default)]
    dimensions: Option<usize>,
    #[serde(borrow, default)]
    user: Option<Cow<'a, str>>,
}

/// Inputs as texts or token arrays, with their token counts.
fn inputs(input: &Value, tok: &Tokenizer) -> Option<Vec<(String, u64)>> {
    let one = |v: &Value| match v {
        Value::String(s) => Some((s.clone(), tok.count(s))),
        Value::Array(ids) if ids.iter().all(Value::is_u64) => {
            Some((Value::Array(ids.clone()).to_string(), ids.len() as u64))
        }
        _ => None,
    };
    match input {
        Value::Array(items) if !items.is_empty() && !items.iter().all(Value::is_u64) => items.iter().map(one).collect(),
        other => one(other).map(|x| vec![x]),
    }
}

/// `POST /v1/embeddings`.
pub async fn embeddings(
    State(sim): State<Arc<Sim>>,
    ctl: Option<Extension<ConnCtl>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let ctl = ctl.map(|Extension(ctl)| ctl);
    let Ok(req) = serde_json::from_slice::<EmbeddingsRequest<'_>>(&body) else {
        return invalid(&sim, &ApiError::BadJson);
    };
    let model = match resolve(&sim, req.model.as_deref()) {
        Ok(model) => model,
        Err(err) => return invalid(&sim, &err),
    };
    let Some(items) = req.input.as_ref().and_then(|input| inputs(input, &model.tokenizer)) else {
        let message = "'input' must be a string, an array of strings, or an array of token arrays".into();
        return invalid(&sim, &ApiError::Invalid { message, param: Some("input") });
    };
    let tokens: u64 = items.iter().map(|(_, n)| n).sum();
    #[expect(clippy::cast_precision_loss, reason = "token counts are far below 2^52")]
    let ask = Ask { cost: Cost { tokens: tokens as f64, ..Cost::default() }, stream: false, cap: 1 };
    let tenant = crate::text::tenant(&headers, req.user.as_deref());
    let prepared = Prepared { model, ask, input: tokens, cached: 0, tenant, marker: None, prompt_cache: None };
    let ticket = match flow::admit(&sim, ctl.as_ref(), &prepared, &headers).await {
        Ok(ticket) => ticket,
        Err(response) => return response,
    };
    if !ticket.delays.ttft.is_zero() {
        tokio::time::sleep(ticket.delays.ttft).await;
    }
    let dims = req.dimensions.filter(|d| *d > 0).unwrap_or(prepared.model.config.embedding_dims);
    let base64 = req.encoding_format.as_deref() == Some("base64");
    let data: Vec<Value> = items
        .iter()
        .enumerate()
        .map(|(index, (text, _))| {
            let vector = vector(text, dims);
            let embedding = if base64 { Value::String(encode_base64(&vector)) } else { json!(vector) };
            json!({"object": "embedding", "index": index, "embedding": embedding})
        })
        .collect();
    let name = &prepared.model.config.name;
    let body = json!({"object": "list", "data": data, "model": name, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}});
    sim.complete(&prepared.model, 0, &prepared.served(0));
    crate::respond::json(
        &sim,
        prepared.model.flavor,
        Some(&ticket.snapshot),
        StatusCode::OK,
        serde_json::to_vec(&body).unwrap_or_default(),
    )
}

/// A deterministic unit vector derived from `text`.
fn vector(text: &str, dims: usize) -> Vec<f32> {
    let mut state =
        text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    let mut v: Vec<f32> = (0..dims)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            #[expect(clippy::cast_precision_loss, reason = "a pseudo-random value needs no precision")]
            let unit = (state >> 11) as f32 / (1_u64 << 53) as f32;
            unit * 2.0 - 1.0
        })
        .collect();
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(f32::EPSILON);
    v.iter_mut().for_each(|x| *x /= norm);
    v
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Little-endian f32s as standard base64 (what `encoding_format: "base64"` returns).
fn encode_base64(vector: &[f32]) -> String {
    let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_standard_alphabet() {
        let one = encode_base64(&[1.0]);
        assert_eq!(one, "AACAPw==");
        assert_eq!(encode_base64(&[1.0, 1.0, 1.0]).len(), 16);
    }

    #[test]
    fn vectors_are_deterministic_unit_vectors() {
        let a = vector("hello", 32);
        assert_eq!(a, vector("hello", 32));
        assert_ne!(a, vector("hellp", 32));
        let norm: f32 = a.iter().map(|x| x * x).sum();
        assert!((norm - 1.0).abs() < 1e-4);
    }

    #[test]
    fn inputs_accept_strings_and_token_arrays() {
        let t = Tokenizer::new(crate::tokens::Encoding::Cl100kBase);
        assert_eq!(inputs(&json!("hello world"), &t).unwrap()[0].1, 2);
        assert_eq!(inputs(&json!(["a", "b c"]), &t).unwrap().len(), 2);
        assert_eq!(inputs(&json!([1, 2, 3]), &t).unwrap()[0].1, 3);
        assert_eq!(inputs(&json!([[1, 2], [3]]), &t).unwrap().len(), 2);
        assert!(inputs(&json!(5), &t).is_none());
    }
}
