//! The built-in live dashboard: one self-contained page (no CDN, vanilla JS, canvas
//! charts) polling `/admin/state` once a second.
//!
//! Access needs the admin key, and the key never goes into a URL: `GET /dashboard` shows
//! a login form that POSTs the key to `/dashboard/login`, which sets an HttpOnly,
//! SameSite=Strict session cookie (see [`crate::AdminKey`]). Scripts and headless browsers
//! use a one-time ticket instead: `POST /admin/dashboard/ticket` (bearer admin key)
//! returns `/dashboard/ticket/T`, good once within a minute.
//!
//! Failed logins are throttled per peer address ([`crate::LoginThrottle`]): a locked-out
//! address gets the structured `429` with `Retry-After` before its body is read.

use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sluice_server::error::{Envelope, ErrorResponse, GatewayError};
use sluice_server::read_body;
use sluice_server::trace::Trace;

use crate::AdminState;
use crate::table::{Table, Verb};

const PAGE: &str = include_str!("../assets/dashboard.html");
const STYLE: &str = include_str!("../assets/dashboard.css");
const SCRIPT: &str = include_str!("../assets/dashboard.js");
const LOGIN: &str = include_str!("../assets/login.html");

/// Inline scripts and styles of our own page only; nothing from elsewhere.
const CSP: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; \
                   img-src data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The dashboard's routes.
pub(crate) fn table() -> Table {
    Table::new().add(Verb::Get, "/dashboard", page).add(Verb::Post, "/dashboard/login", login).add(
        Verb::Get,
        "/dashboard/ticket/{ticket}",
        redeem,
    )
}

async fn page(State(state): State<AdminState>, headers: HeaderMap) -> Response {
    let Some(key) = &state.sessions.key else { return sluice_server::error::absent() };
    if !key.cookie_ok(&headers) {
        return html(StatusCode::OK, LOGIN.replace("{{message}}", ""), None);
    }
    let page = PAGE.replace("/*{{style}}*/", STYLE).replace("/*{{script}}*/", SCRIPT);
    html(StatusCode::OK, page, None)
}

async fn login(State(state): State<AdminState>, request: Request) -> Response {
    let Some(key) = &state.sessions.key else { return sluice_server::error::absent() };
    let (parts, body) = request.into_parts();
    let fail =
        |error| ErrorResponse { error, envelope: Envelope::OpenAi, trace_id: Trace::from_headers(&parts.headers).id };
    let peer = crate::throttle::peer(&parts.extensions);
    let gateway = state.current();
    let logins = &state.sessions.logins;
    if let Some(wait) = logins.locked(peer, gateway.services.clock.now()) {
        return fail(GatewayError::LoginThrottled(wait)).into_response();
    }
    // The same cap as every other route: `max_body_bytes`, not the framework's default.
    let body = match read_body(body, gateway.max_body_bytes).await {
        Ok(body) => body,
        Err(error) => return fail(error).into_response(),
    };
    let submitted = form_value(&body, "key").unwrap_or_default();
    if !key.matches(&submitted) {
        let lockout = logins.failed(peer, gateway.services.clock.now());
        tracing::info!(%peer, ?lockout, "dashboard: login refused");
        let page = LOGIN.replace("{{message}}", "<p class=\"error\">That is not the admin key.</p>");
        return html(sluice_server::error::LOGIN_REFUSED, page, None);
    }
    logins.succeeded(peer);
    to_dashboard(&key.set_cookie())
}

async fn redeem(State(state): State<AdminState>, Path(ticket): Path<String>) -> Response {
    let Some(key) = &state.sessions.key else { return sluice_server::error::absent() };
    if !key.redeem_ticket(&ticket, state.current().services.clock.now()) {
        let page = LOGIN.replace("{{message}}", "<p class=\"error\">That ticket is used or expired.</p>");
        return html(sluice_server::error::LOGIN_REFUSED, page, None);
    }
    to_dashboard(&key.set_cookie())
}

fn to_dashboard(cookie: &str) -> Response {
    let mut response = html(StatusCode::SEE_OTHER, String::new(), Some(cookie));
    response.headers_mut().insert(header::LOCATION, HeaderValue::from_static("/dashboard"));
    response
}

fn html(status: StatusCode, body: String, cookie: Option<&str>) -> Response {
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if let Some(value) = cookie.and_then(|c| HeaderValue::from_str(c).ok()) {
        headers.insert(header::SET_COOKIE, value);
    }
    response
}

/// The value of `name` in an `application/x-www-form-urlencoded` body.
fn form_value(body: &[u8], name: &str) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    let (_, raw) = text.split('&').filter_map(|pair| pair.split_once('=')).find(|(k, _)| *k == name)?;
    let mut bytes = Vec::with_capacity(raw.len());
    let mut iter = raw.bytes();
    while let Some(b) = iter.next() {
        match b {
            b'+' => bytes.push(b' '),
            b'%' => {
                let hex = [iter.next()?, iter.next()?];
                bytes.push(u8::from_str_radix(std::str::from_utf8(&hex).ok()?, 16).ok()?);
            }
            b => bytes.push(b),
        }
    }
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_values_are_decoded() {
        assert_eq!(form_value(b"key=a%2Bb+c&x=1", "key").as_deref(), Some("a+b c"));
        assert_eq!(form_value(b"x=1", "key"), None);
        assert_eq!(form_value(b"key=%zz", "key"), None);
    }

    #[test]
    fn the_page_is_self_contained() {
        for asset in [PAGE, STYLE, SCRIPT, LOGIN] {
            assert!(!asset.contains("http://") && !asset.contains("https://"), "no external resources");
        }
        assert!(PAGE.contains("/*{{style}}*/") && PAGE.contains("/*{{script}}*/"));
    }
}
