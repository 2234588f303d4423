//! One turn of `rein chat`: prompt the session (or take the turn it resumed after a crash), show
//! the turn's events as they are committed, cancel it on Ctrl-C, and print its turn-tail panel
//! when it retried or failed (folded from the turn's own events, so a turn costs the same on a
//! session of 2,000 turns as on a new one).
//!
//! The turn's events are forwarded from its [`TurnHandle`](rein_runtime::turn_handle::TurnHandle)
//! by a task of their own, so waiting for the next one can race the signals without dropping a
//! half-read event. A Ctrl-C (or SIGTERM) cancels the turn with cause `user`; the turn still ends
//! the normal way — the session writes its `turn/end {aborted}` — and the events keep coming
//! until then. A second Ctrl-C while the cancellation settles, or a SIGTERM, also ends the chat.
//!
//! On a terminal, the loop also wakes when the waiting line ([`Stall`]) changes: an attempt that
//! produced nothing for a while is shown waiting, the seconds counting. It also wakes when a
//! route's breaker opens or closes ([`Breakers`]), for a status line.

use rein_runtime::clock::{Clock, WallClock};
use rein_runtime::event::{CancelCause, Envelope, TurnEndReason};
use rein_runtime::panel::panels;
use rein_runtime::session::{Session, SessionError, TurnHandle};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::breakers::Breakers;
use super::console::Console;
use super::signals::Signal;
use super::stall::Stall;
use super::telemetry::Spans;
use super::view::{self, View};

/// How a turn went.
#[derive(Debug)]
pub(crate) struct Ran {
    /// How it ended.
    pub(crate) reason: TurnEndReason,
    /// The chat should end after it (SIGTERM, or Ctrl-C twice).
    pub(crate) quit: bool,
}

/// How a turn is shown: the panel expanded, each route's watchdog (for the waiting line), the
/// routes' breakers (for a status line when one opens or closes).
pub(crate) struct Shown {
    /// Expand every panel.
    pub(crate) expand: bool,
    /// Each route's dead-air watchdog, by route name.
    pub(crate) watchdogs: Vec<(String, Duration)>,
    /// The breakers of the routes with route health.
    pub(crate) breakers: Breakers,
}

/// Runs the turn of `prompt` to its end.
pub(crate) async fn run(
    session: &Session,
    prompt: String,
    signals: &mut mpsc::UnboundedReceiver<Signal>,
    spans: &mut Spans,
    console: &mut Console,
    shown: &mut Shown,
) -> Result<Ran, SessionError> {
    follow(session, session.prompt(prompt)?, signals, spans, console, shown).await
}

/// Shows the turn of `handle` to its end (a prompted turn, or the one the session resumed).
pub(crate) async fn follow(
    session: &Session,
    mut handle: TurnHandle,
    signals: &mut mpsc::UnboundedReceiver<Signal>,
    spans: &mut Spans,
    console: &mut Console,
    shown: &mut Shown,
) -> Result<Ran, SessionError> {
    let (tx, mut events) = mpsc::unbounded_channel::<Envelope>();
    let forward = tokio::spawn(async move {
        while let Some(event) = handle.next_event().await {
            if tx.send(event).is_err() {
                break;
            }
        }
        handle.outcome().await
    });

    let mut view = View::new(console.answer_is_terminal());
    let mut stall = console.status_is_terminal().then(|| Stall::new(shown.watchdogs.clone()));
    let (mut cancelled, mut quit) = (false, false);
    // The turn's own events, for its panel: the panel needs nothing from before the turn, and
    // reading the whole log back after each turn would make a long session's turns ever slower.
    let mut seen = Vec::new();
    loop {
        let wake = stall.as_ref().and_then(|s| s.next_change(Instant::now()));
        tokio::select! {
            event = events.recv() => match event {
                Some(event) => {
                    spans.observe(&event.event);
                    console.show(view.on(&event.event));
                    if let Some(stall) = &mut stall {
                        stall.on(&event.event, Instant::now());
                        draw(stall, &mut view, console);
                    }
                    seen.push(event);
                }
                None => break,
            },
            (route, now) = shown.breakers.changed() => {
                console.show(view.health(&route, &now, WallClock.now_ms()));
            },
            () = tokio::time::sleep_until(wake.unwrap_or_else(Instant::now)), if wake.is_some() => {
                if let Some(stall) = &stall {
                    draw(stall, &mut view, console);
                }
            },
            Some(signal) = signals.recv() => {
                quit |= signal == Signal::Terminate || cancelled;
                if !cancelled {
                    cancelled = true;
                    console.show(view.close());
                    console.note("cancelling the turn…");
                    session.cancel(CancelCause::User).await?;
                }
            }
        }
    }
    console.waiting(None);
    // A breaker that changed as the turn ended.
    for (route, now) in shown.breakers.unseen() {
        console.show(view.health(&route, &now, WallClock.now_ms()));
    }
    console.show(view.close());
    let outcome = forward.await.map_err(|_| SessionError::Stopped)??;
    tail(&seen, outcome.turn, &outcome.reason, console, shown.expand);
    Ok(Ran { reason: outcome.reason, quit })
}

/// Draws the waiting line as it stands now (an open answer line ended first), or erases it.
fn draw(stall: &Stall, view: &mut View, console: &mut Console) {
    let line = stall.line(Instant::now());
    if line.is_some() {
        console.show(view.before_status());
    }
    console.waiting(line.as_deref());
}

/// The turn's panel, folded from its events (`turn`), when it has one (it retried or failed;
/// expanded when it failed or `expand`), else a line when it did not complete.
fn tail(
    turn_events: &[Envelope],
    turn: u32,
    reason: &TurnEndReason,
    console: &mut Console,
    expand: bool,
) {
    let panel = panels(turn_events).into_iter().find(|p| p.turn == turn);
    match panel {
        Some(panel) => {
            let failed = matches!(reason, TurnEndReason::Error { .. });
            console.styled(&rein::show::panel(&panel, expand || failed));
        }
        None => {
            if let Some(line) = view::ending(turn, reason) {
                console.note(&line);
            }
        }
    }
}
