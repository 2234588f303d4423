//! [`CancelScope`]: a cancellation token together with *why* it was cancelled.
//!
//! Cancellation travels through actor links: a session stops its turn actor, whose stop stops
//! its step. Waits that live outside that tree — a provider stream, a tool, a plugin's backoff, a
//! downstream consultation — cannot be stopped by a link, so they race a token that the actor
//! owning them cancels as it stops (and, should it be killed, as its state is dropped): a turn's
//! scope, and its step's child scope. A token only says *that* it fired; `turn/end` must also say
//! *who* cancelled (`user`, `parent`, `disposed`, `hook`). So a scope records its cause (first
//! writer wins) — the session records it before it stops the turn ([`CancelScope::record`]) —
//! and a child whose own cause is unset reports its parent's.
//!
//! # Why a scope is sealed when its turn ends on its own
//!
//! `Session::cancel` tells its caller whether the cancellation landed, and a caller acts on that
//! answer (a stress run counts landed cancellations against the turns that ended `aborted`).
//! A turn can decide to end on its own — its last step completed — at the same moment the
//! session records a cause. Both go through the scope's one cell, set once: the turn seals it
//! as it decides (`CancelScope::seal`), the session records in it. Whoever comes first wins:
//! a cause recorded first makes the turn end `aborted` with it (cancellation beats what the
//! step concluded), and the session answers "landed"; a seal first leaves the turn's own end,
//! and the session answers "not landed". The answer is always what the log then says.

use std::sync::{Arc, OnceLock};

use tokio_util::sync::CancellationToken;

use crate::event::CancelCause;

/// How a scope's owner ends: cancelled with a cause, or on its own. Set once; the first wins.
#[derive(Debug, Clone)]
enum Fate {
    Cancelled(CancelCause),
    Ended,
}

/// A cancellation token and the cause of its first cancellation.
#[derive(Debug, Clone, Default)]
pub struct CancelScope {
    token: CancellationToken,
    fate: Arc<OnceLock<Fate>>,
    parent: Option<Arc<OnceLock<Fate>>>,
}

impl CancelScope {
    /// A fresh root scope.
    pub fn new() -> Self {
        Self::default()
    }

    /// A scope cancelled whenever this one is; its cause is its own if recorded first, else
    /// this scope's, else `parent`.
    pub fn child(&self) -> Self {
        Self {
            token: self.token.child_token(),
            fate: Arc::new(OnceLock::new()),
            parent: Some(Arc::clone(&self.fate)),
        }
    }

    /// Cancels with `cause` (the first cause recorded wins).
    pub fn cancel(&self, cause: CancelCause) {
        let _ = self.fate.set(Fate::Cancelled(cause));
        self.token.cancel();
    }

    /// Records `cause` as the reason of a cancellation to come, without cancelling (the first
    /// cause recorded wins). The session does this before it stops a turn actor: the turn cancels
    /// its scope as it stops, and the cause is the one the session gave.
    ///
    /// Returns whether the scope's owner ends cancelled: true when this call recorded the cause
    /// or a cause was recorded before it; false when the owner had already decided to end on
    /// its own (`CancelScope::seal`), so nothing is cancelled and the owner's own end stands.
    pub fn record(&self, cause: CancelCause) -> bool {
        let _ = self.fate.set(Fate::Cancelled(cause));
        matches!(self.fate.get(), Some(Fate::Cancelled(_)))
    }

    /// The owner ends on its own: from now on [`CancelScope::record`] answers false. Returns the
    /// cause when a cancellation was recorded first — the owner then ends cancelled with it, as
    /// the canceller was told.
    pub(crate) fn seal(&self) -> Option<CancelCause> {
        let _ = self.fate.set(Fate::Ended);
        match self.fate.get() {
            Some(Fate::Cancelled(cause)) => Some(cause.clone()),
            _ => None,
        }
    }

    /// A guard that cancels the scope when dropped: an actor keeps it in its state, so the waits
    /// it owns end however the actor ends — stopped, failed or killed.
    pub(crate) fn guard(&self) -> tokio_util::sync::DropGuard {
        self.token.clone().drop_guard()
    }

    /// Whether it was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Why it was cancelled (`None` while it was not).
    pub fn cause(&self) -> Option<CancelCause> {
        if !self.is_cancelled() {
            return None;
        }
        let recorded = |fate: &OnceLock<Fate>| match fate.get() {
            Some(Fate::Cancelled(cause)) => Some(cause.clone()),
            _ => None,
        };
        let inherited = || self.parent.as_deref().and_then(recorded);
        Some(recorded(&self.fate).or_else(inherited).unwrap_or(CancelCause::Parent))
    }

    /// The token (to race, or to hand to a provider, a tool or the waterfall).
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_cause_wins_and_children_inherit_their_parents() {
        let scope = CancelScope::new();
        assert_eq!(scope.cause(), None);
        scope.cancel(CancelCause::User);
        scope.cancel(CancelCause::Disposed);
        assert!(scope.is_cancelled());
        assert_eq!(scope.cause(), Some(CancelCause::User));

        let root = CancelScope::new();
        let turn = root.child();
        root.cancel(CancelCause::Disposed);
        assert!(turn.token().is_cancelled());
        assert_eq!(turn.cause(), Some(CancelCause::Disposed), "inherited");

        let root = CancelScope::new();
        let turn = root.child();
        turn.cancel(CancelCause::Hook { reason: "budget".into() });
        assert!(!root.is_cancelled(), "a turn's cancellation does not reach its parent");
        root.cancel(CancelCause::Disposed);
        assert_eq!(turn.cause(), Some(CancelCause::Hook { reason: "budget".into() }), "own first");

        let token = CancellationToken::new();
        let orphan = CancelScope { token: token.clone(), ..CancelScope::new() };
        token.cancel();
        assert_eq!(orphan.cause(), Some(CancelCause::Parent), "a token fired without a cause");
    }

    #[test]
    fn a_recorded_cancellation_and_the_owners_own_end_exclude_each_other() {
        // (what happens first, then second: `record`'s answers and `seal`'s cause)
        let user = || CancelCause::User;
        let recorded_first = CancelScope::new();
        assert!(recorded_first.record(user()), "it lands");
        assert!(recorded_first.record(CancelCause::Disposed), "a second one too: still cancelled");
        assert_eq!(recorded_first.seal(), Some(user()), "the owner ends cancelled, first cause");
        assert!(recorded_first.record(CancelCause::Parent), "sealing changes nothing after it");

        let ended_first = CancelScope::new();
        assert_eq!(ended_first.seal(), None, "the owner's own end stands");
        assert!(!ended_first.record(user()), "too late: nothing is cancelled");
        assert_eq!(ended_first.seal(), None);
        assert_eq!(ended_first.cause(), None, "nothing recorded, not cancelled");
        ended_first.cancel(CancelCause::Disposed);
        assert_eq!(ended_first.cause(), Some(CancelCause::Parent), "its token still fires");

        let cancelled = CancelScope::new();
        cancelled.cancel(CancelCause::Disposed);
        assert_eq!(cancelled.seal(), Some(CancelCause::Disposed));
        assert!(cancelled.record(user()));
        let child = cancelled.child();
        assert_eq!(child.cause(), Some(CancelCause::Disposed), "a child inherits the cause");
    }
}
