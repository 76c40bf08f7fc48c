//! Error classification from real-looking provider responses, one table per provider.

use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};
use proptest::prelude::*;
use sluice_provider::{
    ErrorClass, Phase, ProviderFlavor, TransportFailure, classify, classify_transport, classify_with_hints, parse_hints,
};

use ErrorClass::{
    Auth, ContextLength, NotFound, Other, Overloaded, Permission, SafetyRefusal, ServerError, SpendLimit, Validation,
};

const fn limited(retry_after_ms: Option<u64>, daily: bool) -> ErrorClass {
    let retry_after = match retry_after_ms {
        Some(ms) => Some(Duration::from_millis(ms)),
        None => None,
    };
    ErrorClass::RateLimited { retry_after, daily }
}

/// One response: status, headers, body, expected class.
type Case = (u16, &'static [(&'static str, &'static str)], &'static str, ErrorClass);

fn run(provider: ProviderFlavor, cases: &[Case]) {
    for (status, pairs, body, want) in cases {
        let headers: HeaderMap =
            pairs.iter().map(|(k, v)| (HeaderName::from_static(k), HeaderValue::from_static(v))).collect();
        let got = classify(*status, &headers, body.as_bytes(), provider);
        assert_eq!(got, *want, "{provider:?} {status} {body}");
    }
}

#[test]
fn openai() {
    run(
        ProviderFlavor::OpenAi,
        &[
            (
                429,
                &[("x-ratelimit-remaining-tokens", "0"), ("x-ratelimit-reset-tokens", "20ms")],
                r#"{"error":{"message":"Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Used 29800, Requested 900. Please try again in 20ms.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}"#,
                limited(Some(20), false),
            ),
            (
                429,
                &[("retry-after", "3")],
                r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#,
                SpendLimit,
            ),
            (
                400,
                &[],
                r#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
                ContextLength,
            ),
            (
                400,
                &[],
                r#"{"error":{"message":"Invalid type for 'max_tokens': expected an integer.","type":"invalid_request_error","param":"max_tokens","code":"invalid_type"}}"#,
                Validation,
            ),
            (
                401,
                &[],
                r#"{"error":{"message":"Incorrect API key provided: sk-abc***. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#,
                Auth,
            ),
            (
                403,
                &[],
                r#"{"error":{"code":"unsupported_country_region_territory","message":"Country, region, or territory not supported","param":null,"type":"request_forbidden"}}"#,
                Permission,
            ),
            (
                404,
                &[],
                r#"{"error":{"message":"The model `gpt-9` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}"#,
                NotFound,
            ),
            (
                400,
                &[],
                r#"{"error":{"message":"Your request was rejected as a result of our safety system.","type":"invalid_request_error","param":null,"code":"content_policy_violation"}}"#,
                SafetyRefusal,
            ),
            (
                400,
                &[],
                r#"{"error":{"message":"Invalid prompt: your prompt was flagged as potentially violating our usage policy.","type":"invalid_request_error","param":null,"code":"invalid_prompt"}}"#,
                SafetyRefusal,
            ),
            (
                500,
                &[],
                r#"{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}"#,
                ServerError,
            ),
            (
                503,
                &[],
                r#"{"error":{"message":"The engine is currently overloaded, please try again later.","type":"server_error","param":null,"code":null}}"#,
                Overloaded,
            ),
            (502, &[], "<html><head><title>502 Bad Gateway</title></head><body>cloudflare</body></html>", ServerError),
            (524, &[], "", ServerError),
            (408, &[], "", ServerError),
            (409, &[], "", Other),
            (501, &[], "", Other),
            // An error chunk inside a stream that had started with 200.
            (
                200,
                &[],
                r#"{"error":{"message":"The server had an error while processing your request.","type":"server_error"}}"#,
                ServerError,
            ),
            (200, &[], r#"{"id":"chatcmpl-1","object":"chat.completion"}"#, Other),
        ],
    );
}

#[test]
fn azure() {
    run(
        ProviderFlavor::Azure,
        &[
            (
                429,
                &[("retry-after-ms", "2000"), ("retry-after", "2"), ("x-ratelimit-remaining-tokens", "0")],
                r#"{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 2 seconds."}}"#,
                limited(Some(2_000), false),
            ),
            (
                429,
                &[],
                r#"{"error":{"code":"429","message":"The system is currently experiencing high demand and cannot process your request. Please try again later."}}"#,
                Overloaded,
            ),
            (
                400,
                &[],
                r#"{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy.","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{"hate":{"filtered":true,"severity":"high"}}}}}"#,
                SafetyRefusal,
            ),
            (
                404,
                &[],
                r#"{"error":{"code":"DeploymentNotFound","message":"The API deployment for this resource does not exist."}}"#,
                NotFound,
            ),
            (
                401,
                &[],
                r#"{"error":{"code":"401","message":"Access denied due to invalid subscription key or wrong API endpoint."}}"#,
                Auth,
            ),
            (
                400,
                &[],
                r#"{"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
                ContextLength,
            ),
        ],
    );
}

#[test]
fn anthropic() {
    run(
        ProviderFlavor::Anthropic,
        &[
            (
                429,
                &[("retry-after", "7"), ("anthropic-ratelimit-requests-remaining", "0")],
                r#"{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 50,000 input tokens per minute."}}"#,
                limited(Some(7_000), false),
            ),
            (
                429,
                &[],
                r#"{"type":"error","error":{"type":"rate_limit_error","message":"You have reached your specified API usage limits.","details":{"error_code":"enforced_spend_limit_reached"}},"request_id":"req_011"}"#,
                SpendLimit,
            ),
            (
                529,
                &[],
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_012"}"#,
                Overloaded,
            ),
            (
                500,
                &[],
                r#"{"type":"error","error":{"type":"api_error","message":"Internal server error"}}"#,
                ServerError,
            ),
            (
                504,
                &[],
                r#"{"type":"error","error":{"type":"timeout_error","message":"Request timed out"}}"#,
                ServerError,
            ),
            (
                400,
                &[],
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}"#,
                ContextLength,
            ),
            (
                400,
                &[],
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"input length and `max_tokens` exceed context limit: 197626 + 21333 > 200000, decrease input length or `max_tokens` and try again"}}"#,
                ContextLength,
            ),
            (
                400,
                &[],
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles must alternate between \"user\" and \"assistant\""}}"#,
                Validation,
            ),
            (
                401,
                &[],
                r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
                Auth,
            ),
            (
                403,
                &[],
                r#"{"type":"error","error":{"type":"permission_error","message":"Your API key does not have permission to use the specified resource."}}"#,
                Permission,
            ),
            (404, &[], r#"{"type":"error","error":{"type":"not_found_error","message":"model: claude-9"}}"#, NotFound),
            (
                413,
                &[],
                r#"{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}"#,
                Validation,
            ),
            (402, &[], r#"{"type":"error","error":{"type":"billing_error","message":"Payment required"}}"#, SpendLimit),
            // An `error` event in a stream that had started with 200.
            (200, &[], r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#, Overloaded),
            // The status decides retryability: a body cannot turn a 400 into a retry.
            (400, &[], r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#, Validation),
        ],
    );
}

const GEMINI_429: &str = r#"{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier","quotaValue":"15"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}"#;
const GEMINI_429_DAILY: &str = r#"{"error":{"code":429,"message":"You exceeded your current quota.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier","quotaValue":"1500"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"23.5s"}]}}"#;

#[test]
fn gemini() {
    run(
        ProviderFlavor::Gemini,
        &[
            (429, &[], GEMINI_429, limited(Some(37_000), false)),
            (429, &[], GEMINI_429_DAILY, limited(Some(23_500), true)),
            (
                400,
                &[],
                r#"{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}"#,
                Auth,
            ),
            (
                400,
                &[],
                r#"{"error":{"code":400,"message":"The input token count (1231432) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}"#,
                ContextLength,
            ),
            (
                400,
                &[],
                r#"{"error":{"code":400,"message":"* GenerateContentRequest.contents: contents is not specified\n","status":"INVALID_ARGUMENT"}}"#,
                Validation,
            ),
            (
                400,
                &[],
                r#"{"error":{"code":400,"message":"User location is not supported for the API use.","status":"FAILED_PRECONDITION"}}"#,
                Permission,
            ),
            (
                403,
                &[],
                r#"{"error":{"code":403,"message":"Method doesn't allow unregistered callers.","status":"PERMISSION_DENIED"}}"#,
                Permission,
            ),
            (
                404,
                &[],
                r#"{"error":{"code":404,"message":"models/gemini-9 is not found for API version v1beta.","status":"NOT_FOUND"}}"#,
                NotFound,
            ),
            (
                500,
                &[],
                r#"{"error":{"code":500,"message":"An internal error has occurred.","status":"INTERNAL"}}"#,
                ServerError,
            ),
            (
                503,
                &[],
                r#"{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}"#,
                Overloaded,
            ),
            (
                504,
                &[],
                r#"{"error":{"code":504,"message":"Deadline expired before operation could complete.","status":"DEADLINE_EXCEEDED"}}"#,
                ServerError,
            ),
        ],
    );
}

#[test]
fn ollama() {
    run(
        ProviderFlavor::Ollama,
        &[
            (503, &[], r#"{"error":"server busy, please try again.  maximum pending requests exceeded"}"#, Overloaded),
            (503, &[], "", Overloaded),
            (404, &[], r#"{"error":"model \"llama3.2\" not found, try pulling it first"}"#, NotFound),
            (
                404,
                &[],
                r#"{"error":{"message":"model \"llama3.2\" not found, try pulling it first","type":"api_error","param":null,"code":null}}"#,
                NotFound,
            ),
            (
                500,
                &[],
                r#"{"error":"model requires more system memory (12.0 GiB) than is available (7.5 GiB)"}"#,
                ServerError,
            ),
            (400, &[], r#"{"error":"invalid message format"}"#, Validation),
        ],
    );
}

#[test]
fn retryability() {
    assert!(limited(None, false).retryable());
    assert!(!limited(Some(23_500), true).retryable(), "a daily quota does not clear in seconds");
    for class in [Overloaded, ServerError] {
        assert!(class.retryable());
    }
    for class in [Validation, ContextLength, Auth, Permission, NotFound, SafetyRefusal, SpendLimit, Other] {
        assert!(!class.retryable() && !class.uncertain() && !class.may_retry(true), "{class:?}");
    }
    assert_eq!(limited(Some(7_000), false).retry_after(), Some(Duration::from_secs(7)));
}

#[test]
fn transport_failures() {
    use TransportFailure::*;
    // (failure, phase, retryable, uncertain)
    let table = [
        (ConnectRefused, Phase::Connect, true, false),
        (ConnectTimeout, Phase::Connect, true, false),
        (ResetBeforeHeaders, Phase::BeforeHeaders, false, true),
        (TimeoutBeforeHeaders, Phase::BeforeHeaders, false, true),
        (ResetWhileStreaming, Phase::Streaming, false, false),
        (TimeoutWhileStreaming, Phase::Streaming, false, false),
    ];
    for (failure, phase, retryable, uncertain) in table {
        let class = classify_transport(failure);
        let got_phase = match class {
            ErrorClass::Timeout { phase } | ErrorClass::ConnectionReset { phase } => phase,
            other => panic!("{other:?}"),
        };
        assert_eq!((got_phase, class.retryable(), class.uncertain()), (phase, retryable, uncertain), "{failure:?}");
        assert_eq!(class.may_retry(true), retryable || uncertain);
        assert_eq!(class.may_retry(false), retryable);
    }
}

#[test]
fn with_hints_read_by_the_caller_clock() {
    let mut headers = HeaderMap::new();
    headers.insert("anthropic-ratelimit-output-tokens-remaining", HeaderValue::from_static("0"));
    headers.insert("anthropic-ratelimit-output-tokens-reset", HeaderValue::from_static("2024-09-02T18:45:30Z"));
    let body = br#"{"type":"error","error":{"type":"rate_limit_error","message":"output tokens per minute"}}"#;
    // Without a Date header, `classify` cannot place the reset in time...
    assert_eq!(classify(429, &headers, body, ProviderFlavor::Anthropic), limited(None, false));
    // ...a caller with a wall clock can.
    let hints = parse_hints(&headers, Some(body), Some(1_725_302_700_000));
    assert_eq!(classify_with_hints(429, &hints, body, ProviderFlavor::Anthropic), limited(Some(30_000), false));
}

fn flavor() -> impl Strategy<Value = ProviderFlavor> {
    prop_oneof![
        Just(ProviderFlavor::OpenAi),
        Just(ProviderFlavor::Azure),
        Just(ProviderFlavor::Anthropic),
        Just(ProviderFlavor::Gemini),
        Just(ProviderFlavor::Ollama),
    ]
}

/// Error bodies assembled from the words providers use, in every combination.
fn error_body() -> impl Strategy<Value = String> {
    let word = prop_oneof![
        Just("rate_limit_error"),
        Just("insufficient_quota"),
        Just("overloaded_error"),
        Just("RESOURCE_EXHAUSTED"),
        Just("invalid_request_error"),
        Just("context_length_exceeded"),
        Just("UNAVAILABLE"),
        Just("content_filter"),
        Just("enforced_spend_limit_reached"),
        Just("prompt is too long"),
        Just("high demand"),
        Just(""),
    ];
    (word.clone(), word.clone(), word.clone(), word).prop_map(|(kind, code, status, message)| {
        format!(
            r#"{{"error":{{"type":"{kind}","code":"{code}","status":"{status}","message":"{message}","details":{{"error_code":"{code}"}}}}}}"#
        )
    })
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(
        status in any::<u16>(),
        body in proptest::collection::vec(any::<u8>(), 0..300),
        header in "[ -~]{0,30}",
        provider in flavor(),
    ) {
        let mut headers = HeaderMap::new();
        if let Ok(value) = HeaderValue::from_str(&header) {
            headers.insert("retry-after", value.clone());
            headers.insert("x-ratelimit-reset-tokens", value);
        }
        let class = classify(status, &headers, &body, provider);
        prop_assert!(class.retry_after().is_none_or(|d| d <= sluice_provider::MAX_HINT_DURATION));
    }

    #[test]
    fn client_errors_are_never_retried(
        status in 400u16..500,
        body in error_body(),
        provider in flavor(),
    ) {
        let class = classify(status, &HeaderMap::new(), body.as_bytes(), provider);
        if status != 408 && status != 429 {
            prop_assert!(!class.retryable(), "{status} {body} -> {class:?}");
        }
    }

    #[test]
    fn server_errors_stay_retryable(status in 500u16..600, body in error_body(), provider in flavor()) {
        let class = classify(status, &HeaderMap::new(), body.as_bytes(), provider);
        prop_assert_eq!(class.retryable(), status != 501 && status != 505, "{} {} -> {:?}", status, body, class);
    }
}
