//! Serving on one single-threaded runtime per core: each thread accepts on a listener of
//! its own (`SO_REUSEPORT` on the same address, so the kernel spreads connections over
//! them; shared within this process only: an address another process serves is refused) and runs every task of its connections — the request, the admission, the pooled
//! upstream connection (see `sluice-upstream`) — without handing work to another thread.
//! A request then costs no cross-thread wake-ups, which under load were a third of the
//! gateway's CPU on a shared multi-threaded runtime.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use socket2::{Domain, Protocol, Socket, Type};

/// What a serving thread's server is handed to know when to stop: resolves once the
/// shutdown of [`serve`] has begun (or its caller is gone).
pub type Shutdown = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The pending connections each listener keeps (the kernel caps it at `somaxconn`).
const BACKLOG: i32 = 1024;

/// `count` listeners on `addr`, all bound with `SO_REUSEPORT`; port 0 picks one free port
/// for all of them (the kernel's pick for the first, so no probe frees it in between). They share the address only with each other: an address another
/// process listens on is refused first, though the kernel would let a process of the same
/// user share it (and take part of its connections).
///
/// # Errors
/// When a socket cannot be made or bound; `AddrInUse`, naming the address, when another
/// process listens on it.
pub fn listeners(addr: SocketAddr, count: usize) -> std::io::Result<Vec<std::net::TcpListener>> {
    let mut bound = Vec::with_capacity(count.max(1));
    // Port 0: the first listener asks the kernel for a port nobody holds, and the rest take
    // it. A probe closed before the bind would free the port it was given for another
    // process picking one in that instant (tests start many at once), which could then
    // share it with these listeners and take part of their connections.
    let mut addr = if addr.port() == 0 { addr } else { unclaimed(addr)? };
    for _ in 0..count.max(1) {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        socket.set_reuse_address(true)?;
        socket.set_reuse_port(true)?;
        socket.set_nonblocking(true)?;
        socket.bind(&addr.into())?;
        socket.listen(BACKLOG)?;
        let listener = std::net::TcpListener::from(socket);
        // The next listeners take the port the first one got.
        addr = listener.local_addr()?;
        bound.push(listener);
    }
    Ok(bound)
}

/// `addr` (its port picked when 0) once a socket without `SO_REUSEPORT` could bind it:
/// nothing else listens there. The probe is closed before the listeners bind; two processes
/// starting in the same instant could still both pass it.
fn unclaimed(addr: SocketAddr) -> std::io::Result<SocketAddr> {
    let probe = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    // Connections of an earlier run in TIME_WAIT do not hold the address.
    probe.set_reuse_address(true)?;
    match probe.bind(&addr.into()) {
        Ok(()) => probe.local_addr()?.as_socket().ok_or_else(|| std::io::Error::other("not an IP address")),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Err(std::io::Error::new(
            std::io::ErrorKind::AddrInUse,
            format!("{addr} is already in use: another process listens on it (another sluice?)"),
        )),
        Err(e) => Err(e),
    }
}

/// Serves each of `listeners` from a thread of its own, each a single-threaded runtime,
/// with the server `serve_one` makes of it (in sluice, the gateway's `serve_with_grace`
/// on its state), until `shutdown` resolves; then every thread drains as that server does.
/// A thread keeps its runtime (and the tasks on it) until all have drained, since a
/// request on one thread may wait on a task another started.
///
/// # Errors
/// When a thread or runtime cannot be started, or a thread's serving failed.
pub async fn serve<F, S>(
    listeners: Vec<std::net::TcpListener>,
    serve_one: F,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()>
where
    F: Fn(tokio::net::TcpListener, Shutdown) -> S + Clone + Send + 'static,
    S: Future<Output = std::io::Result<()>>,
{
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let drained = Arc::new(tokio::sync::Barrier::new(listeners.len()));
    let mut threads = Vec::with_capacity(listeners.len());
    // Every runtime is built before any thread starts: none can be missing at the drain.
    let runtimes = listeners
        .iter()
        .map(|_| tokio::runtime::Builder::new_current_thread().enable_all().build())
        .collect::<std::io::Result<Vec<_>>>()?;
    for (i, (listener, runtime)) in listeners.into_iter().zip(runtimes).enumerate() {
        let (done, finished) = tokio::sync::oneshot::channel();
        let drained = Arc::clone(&drained);
        let one = Thread { listener, runtime, serve_one: serve_one.clone(), stopped: stopped.clone(), drained };
        std::thread::Builder::new().name(format!("sluice-serve-{i}")).spawn(move || {
            let _ = done.send(one.run());
        })?;
        threads.push(finished);
    }
    drop(stopped);
    shutdown.await;
    stop.send_replace(true);
    let mut result = Ok(());
    for thread in threads {
        let ended = thread.await.unwrap_or_else(|_| Err(std::io::Error::other("a serving thread panicked")));
        result = result.and(ended);
    }
    result
}

/// One serving thread's share.
struct Thread<F> {
    listener: std::net::TcpListener,
    runtime: tokio::runtime::Runtime,
    serve_one: F,
    stopped: tokio::sync::watch::Receiver<bool>,
    drained: Arc<tokio::sync::Barrier>,
}

impl<F, S> Thread<F>
where
    F: Fn(tokio::net::TcpListener, Shutdown) -> S,
    S: Future<Output = std::io::Result<()>>,
{
    fn run(self) -> std::io::Result<()> {
        let Self { listener, runtime, serve_one, mut stopped, drained } = self;
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            let shutdown = async move {
                // An error means the caller is gone: stop as well.
                let _ = stopped.wait_for(|stopping| *stopping).await;
            };
            let served = serve_one(listener, Box::pin(shutdown)).await;
            drained.wait().await;
            served
        })
    }
}
