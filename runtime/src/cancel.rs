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

use std::sync::{Arc, OnceLock};

use tokio_util::sync::CancellationToken;

use crate::event::CancelCause;

/// A cancellation token and the cause of its first cancellation.
#[derive(Debug, Clone, Default)]
pub struct CancelScope {
    token: CancellationToken,
    cause: Arc<OnceLock<CancelCause>>,
    parent: Option<Arc<OnceLock<CancelCause>>>,
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
            cause: Arc::new(OnceLock::new()),
            parent: Some(Arc::clone(&self.cause)),
        }
    }

    /// Cancels with `cause` (the first cause recorded wins).
    pub fn cancel(&self, cause: CancelCause) {
        let _ = self.cause.set(cause);
        self.token.cancel();
    }

    /// Records `cause` as the reason of a cancellation to come, without cancelling (the first
    /// cause recorded wins). The session does this before it stops a turn actor: the turn cancels
    /// its scope as it stops, and the cause is the one the session gave.
    pub fn record(&self, cause: CancelCause) {
        let _ = self.cause.set(cause);
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
        let inherited = self.parent.as_ref().and_then(|p| p.get());
        Some(self.cause.get().or(inherited).cloned().unwrap_or(CancelCause::Parent))
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
}
