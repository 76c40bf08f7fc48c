//! A batch's input and output files, line by line (pure: no store, no gateway).
//!
//! Input: one JSON object per line, `{"custom_id", "method": "POST", "url", "body"}`.
//! Every line is checked before anything runs; any error rejects the whole batch (as
//! OpenAI does), each error naming its line. Output: one line per request in input order,
//! OpenAI's batch output shape, answered requests in the output file and failed or
//! cancelled ones in the error file.

use std::collections::HashSet;

use crate::{Job, JobState};
use serde_json::{Value, json};

/// Errors reported for one rejected batch (the rest are not listed).
pub const MAX_ERRORS: usize = 100;
/// Longest `custom_id`.
const MAX_CUSTOM_ID: usize = 512;

/// One request of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// The client's id for it.
    pub custom_id: String,
    /// The request body (JSON).
    pub body: Vec<u8>,
    /// Its line number in the input file (1-based).
    pub number: usize,
}

/// Why a batch's input was refused, as OpenAI's `errors.data[]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    /// OpenAI's error code (`invalid_json_line`, `duplicate_custom_id`, ...).
    pub code: &'static str,
    /// What is wrong, for the client.
    pub message: String,
    /// The field at fault, if one is.
    pub param: Option<&'static str>,
    /// The line at fault (1-based), if one is.
    pub line: Option<usize>,
}

impl LineError {
    /// An error at line `number`.
    #[must_use]
    pub fn at(number: usize, code: &'static str, param: Option<&'static str>, message: String) -> Self {
        Self { code, message, param, line: Some(number) }
    }

    /// The error as an entry of OpenAI's `errors.data[]`.
    #[must_use]
    pub fn view(&self) -> Value {
        json!({"code": self.code, "message": self.message, "param": self.param, "line": self.line})
    }
}

/// The well-formed requests of `input` (each for `url`) and the errors of the others; any
/// error refuses the batch, the requests are still checked further to report all at once.
#[must_use]
pub fn parse(input: &[u8], url: &str, max_lines: usize) -> (Vec<Line>, Vec<LineError>) {
    let Ok(text) = std::str::from_utf8(input) else {
        let error =
            LineError { code: "invalid_file", message: "the file is not UTF-8".into(), param: None, line: None };
        return (Vec::new(), vec![error]);
    };
    let (mut lines, mut errors, mut seen) = (Vec::new(), Vec::new(), HashSet::new());
    for (index, raw) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        if lines.len() + errors.len() >= max_lines {
            let message = format!("a batch holds at most {max_lines} requests (`[jobs] max_batch_lines`)");
            errors.push(LineError::at(index + 1, "too_many_requests", None, message));
            break;
        }
        match line(raw, index + 1, url) {
            Ok(line) if !seen.insert(line.custom_id.clone()) => errors.push(LineError::at(
                line.number,
                "duplicate_custom_id",
                Some("custom_id"),
                format!("the custom_id `{}` is used by an earlier line", line.custom_id),
            )),
            Ok(line) => lines.push(line),
            Err(e) => errors.push(e),
        }
        if errors.len() >= MAX_ERRORS {
            break;
        }
    }
    if lines.is_empty() && errors.is_empty() {
        errors.push(LineError {
            code: "empty_file",
            message: "the file has no requests".into(),
            param: None,
            line: None,
        });
    }
    (lines, errors)
}

fn line(raw: &str, number: usize, url: &str) -> Result<Line, LineError> {
    let bad = |code, param, message: String| LineError::at(number, code, param, message);
    let value: Value =
        serde_json::from_str(raw).map_err(|e| bad("invalid_json_line", None, format!("not a JSON object: {e}")))?;
    let custom_id = match value.get("custom_id") {
        Some(Value::String(id)) if !id.is_empty() && id.len() <= MAX_CUSTOM_ID => id.clone(),
        _ => {
            return Err(bad(
                "missing_required_parameter",
                Some("custom_id"),
                "custom_id must be a string of 1 to 512 characters".into(),
            ));
        }
    };
    if value.get("method").and_then(Value::as_str) != Some("POST") {
        return Err(bad("invalid_method", Some("method"), "method must be POST".into()));
    }
    if value.get("url").and_then(Value::as_str) != Some(url) {
        return Err(bad("invalid_url", Some("url"), format!("url must be the batch's endpoint, {url}")));
    }
    let Some(body @ Value::Object(_)) = value.get("body") else {
        return Err(bad("missing_required_parameter", Some("body"), "body must be a JSON object".into()));
    };
    Ok(Line { custom_id, body: serde_json::to_vec(body).unwrap_or_default(), number })
}

/// Counts of a batch's requests, as OpenAI's `request_counts`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RequestCounts {
    /// Requests in the batch.
    pub total: usize,
    /// Requests answered.
    pub completed: usize,
    /// Requests failed, cancelled or expired.
    pub failed: usize,
}

/// How far the batch's jobs are: `None` while any is still queued or running.
/// A job that no longer exists (retired) counts as failed.
#[must_use]
pub fn counts(jobs: &[Option<Job>]) -> (RequestCounts, bool) {
    let mut counts = RequestCounts { total: jobs.len(), ..RequestCounts::default() };
    let mut done = true;
    for job in jobs {
        match job.as_ref().map(|j| j.state) {
            Some(JobState::Completed) => counts.completed += 1,
            Some(state) if !state.is_terminal() => done = false,
            _ => counts.failed += 1,
        }
    }
    (counts, done)
}

/// The output and error files of finished jobs, in input order (JSONL).
#[must_use]
pub fn outputs(entries: &[(String, String)], jobs: &[Option<Job>]) -> (Vec<u8>, Vec<u8>) {
    let (mut output, mut errors) = (Vec::new(), Vec::new());
    for ((custom_id, job_id), job) in entries.iter().zip(jobs) {
        let request_id = format!("batch_req_{}", job_id.trim_start_matches("job_"));
        let (line, into) = match job.as_ref().and_then(|j| j.result.as_ref().map(|r| (j, r))) {
            Some((job, result)) if job.state == JobState::Completed => {
                let body = serde_json::from_str(&result.body).unwrap_or_else(|_| Value::String(result.body.clone()));
                let response = json!({"status_code": result.status, "request_id": job_id, "body": body});
                (json!({"id": request_id, "custom_id": custom_id, "response": response, "error": null}), &mut output)
            }
            _ => (
                json!({"id": request_id, "custom_id": custom_id, "response": null, "error": failure(job.as_ref())}),
                &mut errors,
            ),
        };
        into.extend_from_slice(line.to_string().as_bytes());
        into.push(b'\n');
    }
    (output, errors)
}

fn failure(job: Option<&Job>) -> Value {
    match job {
        None => json!({"code": "expired", "message": "the request's record expired before the batch finished"}),
        Some(job) if job.error.as_deref() == Some(crate::machine::CANCELLED) => {
            json!({"code": "batch_cancelled", "message": "the batch was cancelled before this request started"})
        }
        Some(job) => json!({"code": "request_failed", "message": job.error.clone().unwrap_or_default()}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "/v1/chat/completions";

    fn request(id: &str) -> String {
        json!({"custom_id": id, "method": "POST", "url": URL, "body": {"model": "m", "messages": []}}).to_string()
    }

    #[test]
    fn good_lines_become_requests_in_order() {
        let input = format!("{}\n\n{}\n", request("a"), request("b"));
        let (lines, errors) = parse(input.as_bytes(), URL, 10);
        assert!(errors.is_empty());
        let ids: Vec<_> = lines.iter().map(|l| (l.custom_id.as_str(), l.number)).collect();
        assert_eq!(ids, [("a", 1), ("b", 3)]);
    }

    #[test]
    fn every_bad_line_is_named() {
        let wrong_url = request("c").replace(URL, "/v1/embeddings");
        let input = format!("{}\n{}\nnot json\n{wrong_url}\n", request("a"), request("a"));
        let (lines, errors) = parse(input.as_bytes(), URL, 10);
        assert_eq!(lines.len(), 1);
        let named: Vec<_> = errors.iter().map(|e| (e.code, e.line)).collect();
        assert_eq!(named, [("duplicate_custom_id", Some(2)), ("invalid_json_line", Some(3)), ("invalid_url", Some(4))]);
        assert_eq!(parse(b"\n", URL, 10).1[0].code, "empty_file");
        let three = format!("{}\n{}\n{}\n", request("a"), request("b"), request("c"));
        assert_eq!(parse(three.as_bytes(), URL, 2).1[0].line, Some(3));
    }
}
