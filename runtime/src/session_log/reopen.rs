//! Opening a session's log: load it, rebuild the projections, repair what a crash left open.
//!
//! The log is read from the store once: the built-in projections and those the opener brought
//! ([`OpenOptions`]) are folded, and its validators replayed, in the same pass.
//!
//! The store has already cut a torn last line while loading (and reported it). What remains is
//! a contiguous log; folding it gives the projections, and [`OpenTurn::repair`] names the events
//! that close a turn a crash left open — unless the opener keeps that turn open to resume it
//! (`OpenOptions::keep_open_turn`). A new (empty) log gets its `session/start` instead.
//!
//! # Why the claim comes first
//!
//! The log claims its session from the store ([`SessionStore::claim`]) before it loads it, and
//! holds the claim until it closes: another process writing the same session would make what
//! was loaded stale, and its running turn would look like a crash to be repaired. A session
//! another process holds fails the open with the store's `Locked` error; nothing is written.
//!
//! # Why before anyone holds a handle
//!
//! The repair is written before the log is handed out, while nobody else can reach it, so
//! nothing can interleave with it and every caller starts on a closed log. A failed load is a
//! [`LogError::Store`] naming the file and line.

use std::sync::Arc;

use crate::clock::Clock;
use crate::event::{Event, LOG_FORMAT, SessionStart};
use crate::store::{SessionStore, check_session_id};

use super::open_turn::{OpenTurn, OpenTurnProjection};
use super::state::LogState;
use super::{LogError, OpenOptions, OpenReport};

/// Loads `session`'s log from `store` (creating it when new) and repairs it; `opening`'s
/// projections and validators see the loaded log and the repair, like the built-in ones.
pub(crate) async fn reopen(
    store: Arc<dyn SessionStore>,
    clock: Arc<dyn Clock>,
    session: &str,
    opening: OpenOptions,
) -> Result<(LogState, OpenReport), LogError> {
    check_session_id(session)?;
    // Before reading: what is read must be what nobody else appends to.
    let claim = store.claim(session).await?;
    let loaded = store.load(session).await?.unwrap_or_default();
    if let Some(torn) = &loaded.torn {
        tracing::warn!(
            line = torn.line,
            bytes = torn.bytes,
            "opened a log whose torn last line was cut"
        );
    }
    let keep_open_turn = opening.keep_open_turn;
    let mut state =
        LogState::new(Arc::from(session), store, clock, claim, &loaded.events, opening)?;
    let created = loaded.events.is_empty();
    drop(loaded.events);

    let open: OpenTurn = state.read(OpenTurnProjection::KEY)?;
    let kept = open.turn.filter(|_| keep_open_turn);
    let mut repair = if kept.is_some() { Vec::new() } else { open.repair() };
    if created {
        repair.insert(
            0,
            Event::SessionStart(SessionStart { session: session.to_owned(), format: LOG_FORMAT }),
        );
    }
    let interrupted_turn = open.turn.filter(|_| kept.is_none());
    if let Some(turn) = interrupted_turn {
        tracing::warn!(turn, step = open.step, "closing a turn a crash left open as interrupted");
    }
    state.append_unchecked(repair).await?;
    let report = OpenReport {
        created,
        torn: loaded.torn,
        interrupted_turn,
        open_turn: kept,
        events: state.len(),
    };
    Ok((state, report))
}
