//! A node's connections besides its store's: one shared connection for commands and replies
//! (connected again when it broke), and the listening connection that hears the other nodes'
//! notices (`LISTEN`), reconnecting with backoff for as long as the node runs.
//!
//! | channel | payload | sent by | heard by |
//! |---|---|---|---|
//! | `rein_commands` | `PARTITION:ID` | a node forwarding a request, or giving one back | the node holding the partition |
//! | `rein_replies` | `ID` | the node that served the request | the node waiting for it |
//! | `rein_appended` | `P1,P2,…` | every batch of a node's store | nodes following a turn in one of those partitions |
//! | `rein_settings` | the plugin's record name | a node that saved settings | every node |
//!
//! After every (re)connection the listener reports [`Heard::Connected`]: notices sent while it
//! was away are lost, so whoever relies on them looks again.

use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt as _;
use tokio::sync::mpsc;
use tokio_postgres::{AsyncMessage, Client, NoTls};
use tokio_util::sync::CancellationToken;

use crate::store::Durability;
use crate::store::postgres::{Target, backoff, client_config, connect, message};

/// The shared connection, connected on first use and again after it broke.
pub(crate) struct Link {
    target: Target,
    client: Mutex<Option<Arc<Client>>>,
}

impl Link {
    pub(crate) fn new(target: Target) -> Self {
        Self { target, client: Mutex::new(None) }
    }

    /// The connection, or why the database cannot be reached (the URL without its password).
    pub(crate) async fn client(&self) -> Result<Arc<Client>, String> {
        {
            let held = self.client.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(client) = held.as_ref().filter(|c| !c.is_closed()) {
                return Ok(Arc::clone(client));
            }
        }
        let client = connect(&self.target, Durability::Disk).await.map_err(|e| {
            format!("{}: the database is unreachable: {}", self.target.shown(), message(&e))
        })?;
        let client = Arc::new(client);
        *self.client.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&client));
        Ok(client)
    }
}

/// What the listener heard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Heard {
    /// It (re)connected and listens: notices sent meanwhile were missed.
    Connected,
    /// A notice: its channel and payload.
    Notice(String, String),
}

/// Listens on every channel of the table above until `closing` fires, telling `heard`.
pub(crate) async fn listen(
    target: Target,
    heard: mpsc::UnboundedSender<Heard>,
    closing: CancellationToken,
) {
    let mut failed = 0u32;
    loop {
        if let Ok((client, mut connection)) = client_config(&target).connect(NoTls).await {
            let (notices, mut received) = mpsc::unbounded_channel();
            let driver = tokio::spawn(async move {
                let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
                while let Some(Ok(message)) = messages.next().await {
                    if let AsyncMessage::Notification(n) = message {
                        let notice = Heard::Notice(n.channel().to_owned(), n.payload().to_owned());
                        if notices.send(notice).is_err() {
                            break;
                        }
                    }
                }
            });
            let listening = client
                .batch_execute(
                    "LISTEN rein_commands; LISTEN rein_replies; LISTEN rein_appended; \
                     LISTEN rein_settings",
                )
                .await;
            if listening.is_ok() {
                failed = 0;
                if heard.send(Heard::Connected).is_err() {
                    return;
                }
                loop {
                    tokio::select! {
                        notice = received.recv() => match notice {
                            Some(notice) => {
                                if heard.send(notice).is_err() {
                                    return;
                                }
                            }
                            None => break,
                        },
                        () = closing.cancelled() => {
                            driver.abort();
                            return;
                        }
                    }
                }
            }
            driver.abort();
        }
        let wait = backoff(failed);
        failed = failed.saturating_add(1);
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = closing.cancelled() => return,
        }
    }
}
