//! The repair wake: a session whose actor ended while a turn of its log was open (it failed, was
//! killed, or its log failed under it) is woken again at once, so that the reopened session
//! resumes that turn — or closes it `interrupted` — without waiting for the next call.
//!
//! The reopening itself can fail for the same reason the log did: the database is away (a
//! restart, a cut). Then the wake is tried again, after 100 ms doubling to 5 s
//! ([`next_delay`]), for as long as the store's error may pass ([`may_open_later`]), the session
//! is served here and the runtime runs. Without that, a turn cut by a database restart would stay
//! open until someone called its session — and on a node of a cluster, whose partition stays
//! with it, nobody else would resume it (SPEC §11, §12).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use super::message::ClientMsg;
use super::{SessionError, Sessions};
use crate::session_log::LogError;
use crate::store::StoreError;

/// The first wait before the wake is tried again.
const FIRST_DELAY: Duration = Duration::from_millis(100);
/// The longest wait between two tries.
const MAX_DELAY: Duration = Duration::from_secs(5);

/// Wakes session `id` (a turn of it is open) at once, and again until it opens or until trying
/// again cannot help. The first wake is sent before this returns (as the actor that ended is
/// dropped); what follows runs in a task, when a tokio runtime is there to run it.
pub(crate) fn repair(sessions: &Arc<Sessions>, id: &Arc<str>) {
    let Some(opened) = wake(sessions, id) else { return };
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
    runtime.spawn(again(Arc::clone(sessions), Arc::clone(id), opened));
}

/// Sends the session an `Open`; its answer, or `None` when it could not be sent.
fn wake(
    sessions: &Arc<Sessions>,
    id: &Arc<str>,
) -> Option<oneshot::Receiver<Result<(), SessionError>>> {
    let (reply, opened) = oneshot::channel();
    match sessions.directory.send(sessions, id, ClientMsg::Open(reply)) {
        Ok(()) => Some(opened),
        Err(SessionError::ShutDown) => None,
        Err(error) => {
            tracing::warn!(session.id = %id, %error, "could not wake the session to close its interrupted turn");
            None
        }
    }
}

/// Waits for `opened`; while the session could not open for a reason that may pass, wakes it
/// again after [`next_delay`]'s waits.
async fn again(
    sessions: Arc<Sessions>,
    id: Arc<str>,
    mut opened: oneshot::Receiver<Result<(), SessionError>>,
) {
    let mut delay = FIRST_DELAY;
    loop {
        let error = match opened.await {
            Ok(Err(error)) if may_open_later(&error) => error,
            // Opened (the turn is resumed or closed), a log that cannot open, or the actor gone.
            _ => return,
        };
        tracing::warn!(session.id = %id, %error, retry_in_ms = delay.as_millis() as u64, "the session with an open turn could not reopen: waking it again");
        tokio::time::sleep(delay).await;
        if !sessions.is_local(&id) {
            return; // its partition moved: the node that serves it now resumes it
        }
        let Some(next) = wake(&sessions, &id) else { return };
        opened = next;
        delay = next_delay(delay);
    }
}

/// The wait after `delay`: twice as long, at most [`MAX_DELAY`].
fn next_delay(delay: Duration) -> Duration {
    (delay * 2).min(MAX_DELAY)
}

/// Whether a session that could not open may open when woken again: its store was unreachable,
/// busy or failing — not a log that cannot be read, nor a session this process may no longer
/// write.
fn may_open_later(error: &SessionError) -> bool {
    let SessionError::Open { source, .. } = error else { return false };
    match &**source {
        LogError::Store(store) => !matches!(
            store,
            StoreError::Corrupt { .. }
                | StoreError::InvalidSessionId(_)
                | StoreError::Unwritable { .. }
                | StoreError::Fenced { .. }
                | StoreError::NotOwned { .. }
                | StoreError::Clustered { .. }
                | StoreError::OutOfOrder { .. }
        ),
        LogError::Closed | LogError::Failed(_) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(error: LogError) -> SessionError {
        SessionError::Open { session: "s".into(), source: Arc::new(error) }
    }

    #[test]
    fn a_store_that_may_come_back_is_tried_again_a_log_that_cannot_open_is_not() {
        let cases: Vec<(SessionError, bool)> = vec![
            (open(StoreError::Postgres("the database is unreachable".into()).into()), true),
            (open(StoreError::Sqlite("database is locked".into()).into()), true),
            (open(StoreError::Closed.into()), true),
            (open(LogError::Closed), true),
            (open(LogError::Failed("panicked".into())), true),
            (
                open(
                    StoreError::Corrupt { path: "s.jsonl".into(), line: 3, message: "x".into() }
                        .into(),
                ),
                false,
            ),
            (open(StoreError::InvalidSessionId("../x".into()).into()), false),
            (open(LogError::Diverged { session: "s".into(), written: 3, stored: 4 }), false),
            (SessionError::ShutDown, false),
            (SessionError::Stopped, false),
        ];
        for (error, want) in cases {
            assert_eq!(may_open_later(&error), want, "{error}");
        }
    }

    #[test]
    fn the_wait_doubles_from_100_ms_to_5_s() {
        let mut delay = FIRST_DELAY;
        let mut seen = vec![delay.as_millis()];
        for _ in 0..8 {
            delay = next_delay(delay);
            seen.push(delay.as_millis());
        }
        assert_eq!(seen, [100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000]);
    }
}
