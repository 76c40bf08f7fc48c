//! `sluice healthcheck`: asks a running gateway whether it is ready, for a container's
//! `HEALTHCHECK` (the image has no shell tools to do it, and `/bin/sh` there is dash).

use std::time::Duration;

use anyhow::Context as _;
use http_body_util::Empty;
use hyper::body::Bytes;

/// The readiness URL of a gateway serving in the same container.
const DEFAULT_URL: &str = "http://127.0.0.1:8080/readyz";

/// Options of `sluice healthcheck`.
#[derive(Debug, clap::Args)]
pub struct HealthArgs {
    /// The readiness URL (plain HTTP).
    #[arg(long, default_value = DEFAULT_URL)]
    pub url: hyper::Uri,
    /// How long to wait for the whole answer.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
}

/// Exits 0 when `GET url` answers 200 within the timeout, 1 otherwise (with the reason
/// on standard error).
pub async fn run(args: HealthArgs) -> std::process::ExitCode {
    match tokio::time::timeout(args.timeout, status(&args.url)).await {
        Ok(Ok(hyper::StatusCode::OK)) => std::process::ExitCode::SUCCESS,
        Ok(Ok(status)) => fail(&format!("{} answered {status}", args.url)),
        Ok(Err(e)) => fail(&format!("{}: {e:#}", args.url)),
        Err(_) => fail(&format!("{}: no answer within {:?}", args.url, args.timeout)),
    }
}

fn fail(reason: &str) -> std::process::ExitCode {
    // Standard error is what `docker inspect` shows of a failed check.
    eprintln!("unhealthy: {reason}");
    std::process::ExitCode::FAILURE
}

/// The status of one `GET url` over a fresh HTTP/1.1 connection.
async fn status(url: &hyper::Uri) -> anyhow::Result<hyper::StatusCode> {
    anyhow::ensure!(url.scheme_str() == Some("http"), "only http:// URLs are supported");
    let host = url.host().context("the URL names no host")?;
    let port = url.port_u16().unwrap_or(80);
    let stream = tokio::net::TcpStream::connect((host, port)).await.context("connecting")?;
    let io = hyper_util::rt::TokioIo::new(stream);
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await.context("handshake")?;
    tokio::spawn(connection);
    let path = url.path_and_query().map_or("/", |p| p.as_str());
    let request = hyper::Request::get(path)
        .header(hyper::header::HOST, url.authority().map_or(host, |a| a.as_str()))
        .body(Empty::<Bytes>::new())?;
    Ok(sender.send_request(request).await.context("sending")?.status())
}
