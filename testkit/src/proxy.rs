//! [`Proxy`]: a TCP proxy on loopback between a process and a server, that can cut the line —
//! a network partition as a client sees it: its connections stay open, what it sends is taken
//! (the proxy's kernel acknowledges it) and never delivered, and nothing comes back, until the
//! line is restored. New connections made while the line is cut hang the same way.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A running proxy to one server; dropping it stops accepting (connections end with the
/// runtime).
pub struct Proxy {
    addr: SocketAddr,
    cut: Arc<watch::Sender<bool>>,
    stopped: Arc<AtomicBool>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::Release);
    }
}

impl Proxy {
    /// Starts a proxy on a free loopback port to `target`, on the current tokio runtime.
    pub async fn start(target: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (cut, _) = watch::channel(false);
        let cut = Arc::new(cut);
        let stopped = Arc::new(AtomicBool::new(false));
        let (accepting, stop) = (Arc::clone(&cut), Arc::clone(&stopped));
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if stop.load(Ordering::Acquire) {
                    return;
                }
                let cut = Arc::clone(&accepting);
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(target).await else { return };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    let up = pump(client_read, server_write, cut.subscribe());
                    let down = pump(server_read, client_write, cut.subscribe());
                    tokio::join!(up, down);
                });
            }
        });
        Proxy { addr, cut, stopped }
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Cuts the line: nothing more gets through, either way, until [`Proxy::restore`].
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    /// Restores the line: what was held is delivered, and traffic flows again.
    pub fn restore(&self) {
        self.cut.send_replace(false);
    }
}

/// Copies `from` to `to`, holding each read while the line is cut.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut cut: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if cut.wait_for(|cut| !*cut).await.is_err() {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
