//! Ctrl-C and termination requests, as messages rather than a killed process.
//!
//! [`listen`] replaces the default action of SIGINT (and, on Unix, SIGTERM) for the rest of the
//! process: instead of dying mid-write, `rein chat` cancels the running turn (cause `user`), lets
//! the session write the turn's end, and decides what comes next (see `chat.rs`).

use tokio::sync::mpsc;

/// A request from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    /// Ctrl-C (SIGINT).
    Interrupt,
    /// SIGTERM: cancel what runs and end the chat.
    Terminate,
}

/// Installs the handlers; each signal then arrives on the channel. Must run inside the tokio
/// runtime.
pub(crate) fn listen() -> std::io::Result<mpsc::UnboundedReceiver<Signal>> {
    let (tx, rx) = mpsc::unbounded_channel();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        tokio::spawn(async move {
            loop {
                let signal = tokio::select! {
                    Some(()) = interrupt.recv() => Signal::Interrupt,
                    Some(()) = terminate.recv() => Signal::Terminate,
                    else => break,
                };
                if tx.send(signal).is_err() {
                    break;
                }
            }
        });
    }
    #[cfg(not(unix))]
    {
        let mut interrupt = tokio::signal::windows::ctrl_c()?;
        tokio::spawn(async move {
            while interrupt.recv().await.is_some() {
                if tx.send(Signal::Interrupt).is_err() {
                    break;
                }
            }
        });
    }
    Ok(rx)
}
