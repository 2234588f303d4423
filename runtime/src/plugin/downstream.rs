//! [`Downstream`]: a plugin's handle on the rest of the chain, and what the chain answered
//! ([`DownstreamAnswer`]). See the `plugin` module docs, "Why downstream is a handle".

use std::sync::{Arc, OnceLock};

use tokio_util::sync::CancellationToken;

use crate::future::BoxFuture;

/// What the rest of the chain answered when a plugin consulted it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DownstreamAnswer {
    /// Some plugin downstream will rerun the request (it has already waited, if it waits).
    Retry,
    /// Nobody downstream recovers the failure (the end of the chain answers `Stop`).
    Stop,
    /// The consultation could not reach an answer: the runtime was shutting down, or the
    /// consultation itself failed. (A downstream *plugin* that panics does not make the whole
    /// consultation crash: its answer counts as `Next` and the walk goes on.)
    Crashed,
}

/// Walks the rest of the chain under the given cancellation scope (a closure: for testing a
/// plugin alone, see [`Downstream::answering`]).
pub type RestOfChain =
    Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, DownstreamAnswer> + Send>;

/// The rest of the chain after a plugin, as its [`Downstream`] walks it: the runtime's own walk
/// implements it, so this module depends on no driver of the chain. It also holds the answer
/// (one allocation per offer for the handle and the answer the runtime reads back).
pub(crate) trait DownstreamWalk: Send + Sync {
    /// The token the consultation's scope is a child of (the turn's), and the asking plugin's
    /// `disposed` token — read from the walk when asked, not copied into every handle.
    fn tokens(&self) -> (CancellationToken, CancellationToken);

    /// Walks the rest of the chain under the consultation's cancellation `scope` (called at most
    /// once per handle).
    fn walk(&self, scope: CancellationToken) -> BoxFuture<'static, DownstreamAnswer>;

    /// Where the consultation's answer is kept once given.
    fn answer(&self) -> &OnceLock<DownstreamAnswer>;
}

/// A given closure as the rest of the chain (a plugin tested alone). Behind a mutex only so the
/// handle is `Sync` (a recovery holding it may be borrowed across an await).
struct Given {
    rest: std::sync::Mutex<Option<RestOfChain>>,
    cancel: CancellationToken,
    disposed: CancellationToken,
    answer: OnceLock<DownstreamAnswer>,
}

impl DownstreamWalk for Given {
    fn tokens(&self) -> (CancellationToken, CancellationToken) {
        (self.cancel.clone(), self.disposed.clone())
    }

    fn walk(&self, scope: CancellationToken) -> BoxFuture<'static, DownstreamAnswer> {
        let rest = self.rest.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        match rest {
            Some(rest) => rest(scope),
            None => Box::pin(async { DownstreamAnswer::Crashed }),
        }
    }

    fn answer(&self) -> &OnceLock<DownstreamAnswer> {
        &self.answer
    }
}

/// A plugin's handle on the rest of the chain (downstream of it).
pub struct Downstream {
    rest: Arc<dyn DownstreamWalk>,
    /// Whether `ask` started the walk (it is walked at most once).
    walked: bool,
}

impl std::fmt::Debug for Downstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Downstream").field("answer", &self.answered()).finish_non_exhaustive()
    }
}

/// Where the runtime reads whether (and what) a plugin's downstream answered.
#[derive(Clone)]
pub(crate) struct AskedDownstream(Arc<dyn DownstreamWalk>);

impl std::fmt::Debug for AskedDownstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("AskedDownstream").field(&self.answer()).finish()
    }
}

impl AskedDownstream {
    /// The answer, if the plugin consulted downstream.
    pub(crate) fn answer(&self) -> Option<DownstreamAnswer> {
        self.0.answer().get().copied()
    }
}

impl Downstream {
    /// A handle whose `ask` runs `rest` under a child of `cancel`, aborted when `disposed` is
    /// cancelled. Returns the handle and where the runtime reads the answer back.
    pub(crate) fn new(
        rest: RestOfChain,
        cancel: CancellationToken,
        disposed: CancellationToken,
    ) -> (Self, AskedDownstream) {
        let rest = std::sync::Mutex::new(Some(rest));
        Self::chain(Arc::new(Given { rest, cancel, disposed, answer: OnceLock::new() }))
    }

    /// A handle on the runtime's chain after a plugin: nothing is walked until the plugin asks;
    /// `ask` walks it under a child of the turn's token, aborted when the asking plugin is
    /// disposed. Returns the handle and where the runtime reads the answer back.
    pub(crate) fn chain(rest: Arc<dyn DownstreamWalk>) -> (Self, AskedDownstream) {
        let asked = AskedDownstream(Arc::clone(&rest));
        (Self { rest, walked: false }, asked)
    }

    /// A handle on a chain that answers `answer` when asked (for testing a plugin alone).
    pub fn answering(answer: DownstreamAnswer) -> Self {
        let rest: RestOfChain = Box::new(move |_| Box::pin(async move { answer }));
        Self::new(rest, CancellationToken::new(), CancellationToken::new()).0
    }

    /// A handle on the end of the chain: asking it answers `Stop`.
    pub fn end() -> Self {
        Self::answering(DownstreamAnswer::Stop)
    }

    /// Consults the rest of the chain and returns its answer; asking again returns the same
    /// answer without walking the chain again.
    ///
    /// A disposed plugin never consults: it gets `Stop` (fail closed). If the plugin is disposed
    /// while the consultation runs, the consultation's cancellation scope is cancelled (the
    /// plugins downstream see `payload.cancel` cancelled and give up their waits), `ask` waits
    /// until it settled and answers `Stop`.
    pub async fn ask(&mut self) -> DownstreamAnswer {
        let cell = self.rest.answer();
        if let Some(answer) = cell.get() {
            return *answer;
        }
        if std::mem::replace(&mut self.walked, true) {
            // A walk started before and was dropped unfinished: fail closed.
            return *cell.get_or_init(|| DownstreamAnswer::Stop);
        }
        let (cancel, disposed) = self.rest.tokens();
        let answer = if disposed.is_cancelled() {
            DownstreamAnswer::Stop
        } else {
            let scope = cancel.child_token();
            let mut walk = self.rest.walk(scope.clone());
            tokio::select! {
                biased;
                answer = &mut walk => answer,
                () = disposed.cancelled() => {
                    scope.cancel();
                    let _settled = walk.await;
                    DownstreamAnswer::Stop
                }
            }
        };
        *self.rest.answer().get_or_init(|| answer)
    }

    /// Whether [`Downstream::ask`] was called and answered.
    pub fn answered(&self) -> Option<DownstreamAnswer> {
        self.rest.answer().get().copied()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    fn counting(walks: Arc<AtomicUsize>, answer: DownstreamAnswer) -> RestOfChain {
        Box::new(move |_| {
            walks.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move { answer })
        })
    }

    #[tokio::test]
    async fn asking_twice_walks_once_and_remembers() {
        let walks = Arc::new(AtomicUsize::new(0));
        let (mut down, asked) = Downstream::new(
            counting(Arc::clone(&walks), DownstreamAnswer::Retry),
            CancellationToken::new(),
            CancellationToken::new(),
        );
        assert_eq!(asked.answer(), None);
        assert_eq!(down.ask().await, DownstreamAnswer::Retry);
        assert_eq!(down.ask().await, DownstreamAnswer::Retry);
        assert_eq!(walks.load(Ordering::SeqCst), 1);
        assert_eq!(asked.answer(), Some(DownstreamAnswer::Retry));
        assert_eq!(down.answered(), Some(DownstreamAnswer::Retry));
    }

    #[tokio::test]
    async fn a_disposed_plugin_never_consults_downstream() {
        let walks = Arc::new(AtomicUsize::new(0));
        let disposed = CancellationToken::new();
        disposed.cancel();
        let (mut down, asked) = Downstream::new(
            counting(Arc::clone(&walks), DownstreamAnswer::Retry),
            CancellationToken::new(),
            disposed,
        );
        assert_eq!(down.ask().await, DownstreamAnswer::Stop);
        assert_eq!(walks.load(Ordering::SeqCst), 0);
        assert_eq!(asked.answer(), Some(DownstreamAnswer::Stop));
    }

    #[tokio::test(start_paused = true)]
    async fn disposal_during_a_consultation_cancels_its_scope_and_waits_for_it() {
        let disposed = CancellationToken::new();
        let turn = CancellationToken::new();
        let settled = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&settled);
        // Downstream waits an hour unless its scope is cancelled, then answers Retry (which
        // the disposed asker must not pass on).
        let rest: RestOfChain = Box::new(move |scope: CancellationToken| {
            Box::pin(async move {
                tokio::select! {
                    () = scope.cancelled() => {}
                    () = tokio::time::sleep(Duration::from_secs(3600)) => {}
                }
                seen.fetch_add(1, Ordering::SeqCst);
                DownstreamAnswer::Retry
            })
        });
        let (mut down, _) = Downstream::new(rest, turn.clone(), disposed.clone());
        let asking = tokio::spawn(async move { down.ask().await });
        tokio::time::sleep(Duration::from_millis(10)).await;
        let before = tokio::time::Instant::now();
        disposed.cancel();
        assert_eq!(asking.await.unwrap(), DownstreamAnswer::Stop);
        assert_eq!(before.elapsed(), Duration::ZERO, "promptly");
        assert_eq!(settled.load(Ordering::SeqCst), 1, "the consultation settled first");
        assert!(!turn.is_cancelled(), "the turn itself is not cancelled");
    }

    #[tokio::test]
    async fn test_handles_answer_what_they_were_given() {
        assert_eq!(Downstream::end().ask().await, DownstreamAnswer::Stop);
        let mut crashed = Downstream::answering(DownstreamAnswer::Crashed);
        assert_eq!(crashed.ask().await, DownstreamAnswer::Crashed);
    }
}
