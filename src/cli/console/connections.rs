//! How the console serves its connections: HTTP/1.1 on each accepted socket, with a time limit
//! on reading a request's head, and a stop that is bounded in time.
//!
//! - A request's head (request line and headers) must arrive within [`HEAD_TIMEOUT`] of the
//!   moment the server starts reading it (an idle keep-alive connection included): a client
//!   that sends it byte by byte, or stops halfway, is disconnected then. The body has its own
//!   limit (`body.rs`).
//! - [`serve`] stops taking connections once `stop` resolves, asks every open one to finish the
//!   request it serves and close (an idle one closes at once), and waits at most [`GRACE`] for
//!   them. Whatever is still open then — a client that never finishes its request, one that
//!   does not read its answer — is dropped, so a stop never waits for a client.
//!
//! Why not `axum::serve`: it sets no timer (hyper's head timeout never fires) and its graceful
//! shutdown waits for every connection without a bound, so one half-sent request held the
//! console forever.

use std::future::Future;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// The longest a request's head may take to arrive.
pub(crate) const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a stop waits for open connections before it drops them.
pub(crate) const GRACE: Duration = Duration::from_secs(3);

/// How long the accept loop pauses after a failed accept (out of file descriptors…), so that
/// it does not spin.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// How a stop went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stopped {
    /// Connections still open after [`GRACE`], dropped.
    pub(crate) dropped: usize,
}

/// Serves `router` on the connections of `listener` until `stop` resolves; then stops as the
/// module says and returns once no connection is left.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    stop: impl Future<Output = ()>,
) -> Stopped {
    let (draining, drain) = watch::channel(false);
    let mut connections = JoinSet::new();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(connection(stream, router.clone(), drain.clone()));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "rein console: cannot accept a connection");
                    tokio::time::sleep(ACCEPT_PAUSE).await;
                }
            },
            // Reaps the connections that ended.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    // Every connection task holds a receiver, so the send reaches them all.
    let _ = draining.send(true);
    let settled =
        tokio::time::timeout(GRACE, async { while connections.join_next().await.is_some() {} })
            .await;
    let dropped = if settled.is_ok() { 0 } else { connections.len() };
    connections.shutdown().await;
    Stopped { dropped }
}

/// One connection: served until it closes; asked to finish and close once `drain` says so.
async fn connection(stream: TcpStream, router: Router, mut drain: watch::Receiver<bool>) {
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(HEAD_TIMEOUT);
    let served = builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(router));
    tokio::pin!(served);
    let result = tokio::select! {
        result = served.as_mut() => result,
        () = async { drop(drain.wait_for(|stopping| *stopping).await) } => {
            served.as_mut().graceful_shutdown();
            served.await
        }
    };
    if let Err(e) = result {
        // A client that went away or was too slow: nothing to tell anyone but a trace.
        tracing::debug!(error = %e, "rein console: a connection ended");
    }
}
