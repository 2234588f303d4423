//! Declining a retry because the route's retry budget is spent (`docs/runtime-semantics.md`,
//! "Route health"): [`run`] appends `retry/throttled {turn, step, provider, plugin, code}` for
//! the payload's failure and answers `Next`, so the rest of the chain decides (`fallback` may
//! still switch to a healthy route; the end of the chain fails the turn).
//!
//! Shared by the plugins that schedule `llm/retry` (`llm-retry`, `auto-retry`). Which retries
//! are declined is their pure decisions' business (`throttle` in each); this only performs it.
//! A turn cancelled or a plugin disposed first writes nothing and answers `Stop` (the waterfall
//! fails closed anyway); a refused append (a live invariant, a closed log) is logged and the
//! answer is still `Next`: the retry is declined either way.

use rein_runtime::event::{Event, RetryThrottled};
use rein_runtime::plugin::{Recovery, Verdict};

/// Appends `retry/throttled` by `plugin` for `recovery`'s failure and answers `Next` (see the
/// module docs).
pub async fn run(recovery: &Recovery, plugin: &str) -> Verdict {
    if recovery.interrupted().is_some() {
        return Verdict::Stop;
    }
    let p = &recovery.payload;
    let tokens = p.health.route(&p.provider).map(|s| s.tokens);
    tracing::info!(
        plugin,
        provider = %p.provider,
        code = p.failure.code(),
        ?tokens,
        "the route's retry budget is spent: retry declined"
    );
    let throttled = RetryThrottled {
        turn: p.turn,
        step: p.step,
        provider: p.provider.clone(),
        plugin: plugin.to_owned(),
        code: p.failure.code().to_owned(),
    };
    if let Err(error) = p.log.append(vec![Event::RetryThrottled(throttled)]).await {
        tracing::warn!(%error, "the session log refused retry/throttled");
    }
    Verdict::Next
}
