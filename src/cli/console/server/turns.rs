//! The turn endpoints, for programs: a turn's events as they are committed, one JSON object a
//! line (`application/x-ndjson`), then how it ended — what `rein stress --nodes` drives its
//! nodes with, and what any client that wants a turn's acknowledged events (not the page's
//! updates) reads.
//!
//! - `POST /api/sessions/{id}/turns` `{"text"}`: opens the session (created if new) and prompts
//!   it; on a node of a cluster the prompt goes to the node serving the session and its events
//!   come back from there.
//! - `GET /api/sessions/{id}/turns/{turn}?from=SEQ`: follows turn `turn` in the log, from `seq`
//!   `SEQ` (default: its `turn/start`) up to its `turn/end` — read from the store, so wherever
//!   the turn runs (after a takeover, on whichever node took it over). What a client whose
//!   stream was cut (its node went away) reads to learn how its turn went on.
//!
//! Lines: `{"event": EVENT}` (the event as its log holds it; each one is durable at the store's
//! durability), then `{"outcome": {"turn", "kind"}}` after the turn's `turn/end`, or `{"error":
//! {"kind", "message", "started"}}` when the stream ends without it (`started`: whether an
//! event of the turn was sent; an error before any event on the prompt's stream means the
//! prompt did not start a turn; `notFound` when the turn ended before `SEQ`, or the log has no
//! such turn but later ones). A stream is cut when the console stops.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, Query};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use rein_runtime::event::{Envelope, Event};
use rein_runtime::session::TurnHandle;
use rein_runtime::store::check_session_id;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{Body, Shared, bad_request, error, no_session, read_only_console, session_error};
use crate::cli::console::logs::{Logs, Reader};
use crate::cli::console::reader::Read;
use crate::cli::console::request::{self, BadRequest};

/// How often a followed turn is read without being told of an append (appends made by another
/// node are not told).
const POLL: Duration = Duration::from_millis(50);

/// `?from=SEQ`.
#[derive(Debug, serde::Deserialize)]
pub(super) struct From {
    from: Option<u64>,
}

/// The lines of an answer, sent as they come.
struct Lines(mpsc::UnboundedSender<Bytes>);

impl Lines {
    fn send(&self, value: &Value) -> bool {
        let mut line = value.to_string();
        line.push('\n');
        self.0.send(Bytes::from(line)).is_ok()
    }

    fn event(&self, event: &Envelope) -> bool {
        self.send(&json!({ "event": event }))
    }

    fn outcome(&self, turn: u32, kind: &str) {
        self.send(&json!({"outcome": {"turn": turn, "kind": kind}}));
    }

    fn error(&self, kind: &str, message: &str, started: bool) {
        self.send(&json!({"error": {"kind": kind, "message": message, "started": started}}));
    }
}

/// An answer streaming what `produce` sends.
fn streamed(produce: impl FnOnce(Lines) -> tokio::task::JoinHandle<()>) -> Response {
    let (lines, receiver) = mpsc::unbounded_channel();
    drop(produce(Lines(lines)));
    let stream = futures::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|line| (Ok::<_, Infallible>(line), receiver))
    });
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        axum::body::Body::from_stream(stream),
    )
        .into_response()
}

/// `POST /api/sessions/{id}/turns`.
pub(super) async fn prompt(
    axum::extract::State(app): Shared,
    Path(id): Path<String>,
    Body(body): Body,
) -> Response {
    let Some(live) = &app.live else { return read_only_console() };
    let text = match request::prompt(&body) {
        Ok(text) => text,
        Err(e) => return bad_request(&e),
    };
    if let Err(e) = check_session_id(&id) {
        return bad_request(&BadRequest { field: "id".into(), message: e.to_string() });
    }
    let session = match live.runtime.session(&id).await {
        Ok(session) => session,
        Err(e) => return session_error(&e),
    };
    let handle = match session.prompt(text) {
        Ok(handle) => handle,
        Err(e) => return session_error(&e),
    };
    let (closing, tasks) = (app.closing.clone(), app.turns.clone());
    streamed(move |lines| {
        tasks.spawn(async move {
            tokio::select! {
                () = stream_turn(handle, &lines) => {}
                () = closing.cancelled() => lines.error("unavailable", "the console is stopping", true),
            }
        })
    })
}

/// Sends the turn's events, then its outcome.
async fn stream_turn(mut handle: TurnHandle, lines: &Lines) {
    let mut started = false;
    while let Some(event) = handle.next_event().await {
        started = true;
        lines.event(&event);
    }
    match handle.outcome().await {
        Ok(outcome) => {
            lines.outcome(outcome.turn, rein_cli::stress::summary::outcome_kind(&outcome.reason))
        }
        Err(e) => lines.error("session", &e.to_string(), started),
    }
}

/// `GET /api/sessions/{id}/turns/{turn}`.
pub(super) async fn follow(
    axum::extract::State(app): Shared,
    Path((id, turn)): Path<(String, u32)>,
    Query(From { from }): Query<From>,
) -> Response {
    let events = match app.logs.read(&id).await {
        Ok(Some(events)) => events,
        Ok(None) => return no_session(&id),
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, "unreadable", e),
    };
    // From its turn/start; when it has not started yet, from what comes next.
    let started = |e: &&Envelope| matches!(&e.event, Event::TurnStart(s) if s.turn == turn);
    let from =
        from.unwrap_or_else(|| events.iter().find(started).map_or(events.len() as u64, |e| e.seq));
    let ended = events.iter().find(|e| matches!(&e.event, Event::TurnEnd(end) if end.turn == turn));
    let later = events.iter().any(|e| matches!(&e.event, Event::TurnStart(s) if s.turn > turn));
    let gone = match ended {
        Some(end) if end.seq < from => {
            Some(format!("turn {turn} ended at seq {}, before seq {from}", end.seq))
        }
        None if later => Some(format!("session {id:?} has no turn {turn}")),
        _ => None,
    };
    if let Some(message) = gone {
        return streamed(move |lines| {
            tokio::spawn(async move { lines.error("notFound", &message, false) })
        });
    }
    let mut changes = app.changes(Some(&id));
    let mut reader = match &app.logs {
        Logs::Store(store) => {
            Reader::Store { store: Arc::clone(store), id: id.clone(), next: from }
        }
        Logs::Files(_) => app.logs.reader(&id),
    };
    let (closing, tasks) = (app.closing.clone(), app.turns.clone());
    streamed(move |lines| {
        tasks.spawn(async move {
            let mut next = from;
            let mut pending: Vec<Envelope> = events.into_iter().filter(|e| e.seq >= from).collect();
            let mut started = false;
            loop {
                for event in pending.drain(..) {
                    next = event.seq + 1;
                    match &event.event {
                        Event::TurnStart(start) if start.turn > turn => {
                            let message = format!("turn {turn} ended before seq {from}");
                            return lines.error("notFound", &message, started);
                        }
                        Event::TurnEnd(end) if end.turn == turn => {
                            lines.event(&event);
                            let kind = rein_cli::stress::summary::outcome_kind(&end.reason);
                            return lines.outcome(turn, kind);
                        }
                        _ => {}
                    }
                    started = true;
                    if !lines.event(&event) {
                        return; // the client went away
                    }
                }
                tokio::select! {
                    () = changes.next() => {}
                    () = tokio::time::sleep(POLL) => {}
                    () = closing.cancelled() => {
                        return lines.error("unavailable", "the console is stopping", started);
                    }
                }
                match reader.read().await {
                    Ok(Read::New(read) | Read::Again(read)) => {
                        pending = read.into_iter().filter(|e| e.seq >= next).collect();
                    }
                    Err(e) => tracing::debug!(error = %e, "a followed turn could not be read"),
                }
            }
        })
    })
}
