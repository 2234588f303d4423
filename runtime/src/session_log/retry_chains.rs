//! The retry-chain projection (`docs/runtime-semantics.md`, "Retry chains"): how far each retry
//! chain of the open step has gone.
//!
//! A chain is identified by (turn, step, provider, policyKey). Its count is the `retry` of its
//! latest `llm/retry`. Because the whole map resets on `step/start`, `turn/end` and `agent/idle`,
//! every entry left in it belongs to the step that is open now, so the map is keyed by
//! (provider, policyKey) only; each [`Chain`] still records its turn and step.
//!
//! # Why a folded projection and not a counter in the plugin
//!
//! The count is read from the log, so it survives a restart by construction: reopening a session
//! folds the log again and `llm-retry` continues at retry `n + 1` with the same `retryId`. The
//! official executor and `auto-retry` read the same map, which is how `auto-retry` continues the
//! official backoff curve.
//!
//! # Why a `Vec` and not a `HashMap`
//!
//! The map lives in every open session log and is reset at every step, so it holds one or two
//! chains in practice (one per provider and policy). A vector of a few entries is smaller than an
//! empty `HashMap`'s table and a linear scan over it is faster than hashing two strings.

use crate::event::{Envelope, Event, LlmRetry};
use crate::projection::Projection;

/// The latest `llm/retry` of one chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// The turn the chain belongs to.
    pub turn: u32,
    /// The step the chain belongs to.
    pub step: u32,
    /// The retry number of the chain's latest `llm/retry` (the chain's count).
    pub retry: u64,
    /// The chain's `retryId`.
    pub retry_id: String,
}

/// The chains of the open step, keyed by (provider, policyKey).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RetryChains {
    entries: Vec<Entry>,
    /// An `llm/retry-started` came after the open step's latest `request/error`.
    failure_retried: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    provider: String,
    policy_key: String,
    chain: Chain,
}

impl RetryChains {
    /// The chain of `provider` under `policy_key`, if it has scheduled a retry in the open step.
    pub fn get(&self, provider: &str, policy_key: &str) -> Option<&Chain> {
        self.entries
            .iter()
            .find(|e| e.provider == provider && e.policy_key == policy_key)
            .map(|e| &e.chain)
    }

    /// How many chains there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no chain has scheduled a retry since the last reset.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether the open step's latest failure has a retry that started (`llm/retry-started`
    /// after its `request/error`): its recovery is decided, whatever happens to the plugin that
    /// started it.
    pub fn latest_failure_retried(&self) -> bool {
        self.failure_retried
    }

    /// Every chain as `(provider, policyKey, chain)`, in the order they began.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str, &Chain)> {
        self.entries.iter().map(|e| (e.provider.as_str(), e.policy_key.as_str(), &e.chain))
    }

    /// Folds one event: `llm/retry` records its chain's latest retry; `request/error` and
    /// `llm/retry-started` say whether the latest failure was retried; `step/start`, `turn/end`
    /// and `agent/idle` clear the map; every other event leaves it as it is.
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::LlmRetry(retry) => self.record(retry),
            Event::RequestError(_) => self.failure_retried = false,
            Event::LlmRetryStarted(_) => self.failure_retried = true,
            Event::StepStart(_) | Event::TurnEnd(_) | Event::AgentIdle(_) => {
                self.failure_retried = false;
                self.entries.clear();
                // Keep the idle memory small: a parked session should not hold an old table.
                self.entries.shrink_to(2);
            }
            _ => {}
        }
    }

    fn record(&mut self, retry: &LlmRetry) {
        let chain = Chain {
            turn: retry.turn,
            step: retry.step,
            retry: retry.retry,
            retry_id: retry.retry_id.clone(),
        };
        match self
            .entries
            .iter_mut()
            .find(|e| e.provider == retry.provider && e.policy_key == retry.policy_key)
        {
            Some(entry) => entry.chain = chain,
            None => self.entries.push(Entry {
                provider: retry.provider.clone(),
                policy_key: retry.policy_key.clone(),
                chain,
            }),
        }
    }
}

/// The [`Projection`] that folds [`RetryChains`]; registered on every session log under
/// [`RetryChainProjection::KEY`].
#[derive(Debug, Clone, Copy, Default)]
pub struct RetryChainProjection;

impl RetryChainProjection {
    /// The key it is registered under.
    pub const KEY: &'static str = "retry-chains";
}

impl Projection for RetryChainProjection {
    type State = RetryChains;

    fn key(&self) -> &'static str {
        Self::KEY
    }

    fn fold(&self, state: &mut RetryChains, event: &Envelope) {
        state.apply(&event.event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{
        AgentIdle, AssistantChunk, AssistantMessage, CancelCause, ConfigChanged, ContextCompacted,
        LlmRetryStarted, PluginCrashed, RequestError, RequestStart, RetryThrottled, RouteSwitched,
        SessionStart, StepRef, ToolCallEvent, ToolResult, TurnEnd, TurnEndReason, TurnResumed,
        TurnStart, UserMessage,
    };
    use crate::failure::Failure;

    const NORMAL: &str = r#"["normal",2,["SERVER"],500,10000,0]"#;
    const AUTO: &str = r#"["auto-retry",3,["SERVER"],1000,60000,0.2]"#;

    fn retry(provider: &str, key: &str, n: u64, id: &str) -> Event {
        Event::LlmRetry(LlmRetry {
            retry_id: id.into(),
            turn: 1,
            step: 1,
            provider: provider.into(),
            plugin: "llm-retry".into(),
            mode: "normal".into(),
            policy_key: key.into(),
            retry: n,
            max_retries: Some(2),
            delay_ms: 500.0,
            failure: Failure::new("SERVER", "down").unwrap(),
        })
    }

    fn chain(n: u64, id: &str) -> Chain {
        Chain { turn: 1, step: 1, retry: n, retry_id: id.into() }
    }

    /// One event of every type other than `llm/retry`, each labelled with whether it resets.
    fn others() -> Vec<(Event, bool)> {
        let failure = Failure::new("SERVER", "down").unwrap();
        vec![
            (Event::SessionStart(SessionStart { session: "s".into(), format: 1 }), false),
            (Event::UserMessage(UserMessage { text: "hi".into() }), false),
            (Event::TurnStart(TurnStart { turn: 2 }), false),
            (Event::StepStart(StepRef { turn: 1, step: 2 }), true),
            (
                Event::RequestStart(RequestStart {
                    turn: 1,
                    step: 1,
                    attempt: 2,
                    provider: "mock".into(),
                    model: "m".into(),
                }),
                false,
            ),
            (
                Event::AssistantChunk(AssistantChunk {
                    turn: 1,
                    step: 1,
                    attempt: 2,
                    text: "par".into(),
                }),
                false,
            ),
            (
                Event::RequestError(RequestError {
                    turn: 1,
                    step: 1,
                    attempt: 2,
                    provider: "mock".into(),
                    failure: failure.clone(),
                }),
                false,
            ),
            (
                Event::LlmRetryStarted(LlmRetryStarted {
                    retry_id: "a".into(),
                    turn: 1,
                    step: 1,
                    retry: 1,
                }),
                false,
            ),
            (
                Event::AssistantMessage(AssistantMessage {
                    turn: 1,
                    step: 1,
                    text: "x".into(),
                    tool_calls: None,
                    usage: None,
                }),
                false,
            ),
            (
                Event::ToolCall(ToolCallEvent {
                    turn: 1,
                    step: 1,
                    id: "c".into(),
                    name: "echo".into(),
                    arguments: serde_json::json!({}),
                }),
                false,
            ),
            (
                Event::ToolResult(ToolResult {
                    turn: 1,
                    step: 1,
                    id: "c".into(),
                    output: "o".into(),
                    is_error: false,
                }),
                false,
            ),
            (
                Event::RouteSwitched(RouteSwitched {
                    turn: 1,
                    step: 1,
                    from: "mock".into(),
                    to: "backup".into(),
                    code: "RATE_LIMIT".into(),
                    reason: "exhausted".into(),
                }),
                false,
            ),
            (
                Event::ContextCompacted(ContextCompacted {
                    turn: 1,
                    step: 1,
                    removed: vec![1],
                    kept: 1,
                }),
                false,
            ),
            (Event::StepEnd(StepRef { turn: 1, step: 1 }), false),
            (Event::TurnEnd(TurnEnd { turn: 1, reason: TurnEndReason::Completed }), true),
            (
                Event::TurnEnd(TurnEnd {
                    turn: 1,
                    reason: TurnEndReason::Aborted { cause: CancelCause::User },
                }),
                true,
            ),
            (Event::TurnEnd(TurnEnd { turn: 1, reason: TurnEndReason::Error { failure } }), true),
            (Event::TurnEnd(TurnEnd { turn: 1, reason: TurnEndReason::Interrupted }), true),
            (Event::AgentIdle(AgentIdle {}), true),
            (
                Event::PluginCrashed(PluginCrashed {
                    plugin: "p".into(),
                    error: "boom".into(),
                    restarts: 1,
                }),
                false,
            ),
            (
                Event::ConfigChanged(ConfigChanged {
                    plugin: "auto-retry".into(),
                    revision: 2,
                    changed: vec!["enabled".into()],
                }),
                false,
            ),
            // A resumed turn keeps its chains: a resumed retry continues its count.
            (
                Event::TurnResumed(TurnResumed { turn: 1, step: 1, pending: "retry-wait".into() }),
                false,
            ),
            // A throttled retry is no retry: the chains stand.
            (
                Event::RetryThrottled(RetryThrottled {
                    turn: 1,
                    step: 1,
                    provider: "mock".into(),
                    plugin: "llm-retry".into(),
                    code: "SERVER".into(),
                }),
                false,
            ),
        ]
    }

    #[test]
    fn the_table_covers_every_event_type() {
        let mut kinds: Vec<&str> = others().iter().map(|(e, _)| e.kind()).collect();
        kinds.push("llm/retry");
        kinds.sort_unstable();
        kinds.dedup();
        let mut all = Event::KINDS.to_vec();
        all.sort_unstable();
        assert_eq!(kinds, all);
    }

    #[test]
    fn exactly_step_start_turn_end_and_agent_idle_reset_the_map() {
        for (event, resets) in others() {
            let mut chains = RetryChains::default();
            chains.apply(&retry("mock", NORMAL, 1, "a"));
            chains.apply(&retry("other", NORMAL, 2, "b"));
            chains.apply(&event);
            if resets {
                assert!(chains.is_empty(), "{} must reset", event.kind());
            } else {
                assert_eq!(chains.len(), 2, "{} must not reset", event.kind());
                assert_eq!(chains.get("mock", NORMAL), Some(&chain(1, "a")), "{}", event.kind());
                assert_eq!(chains.get("other", NORMAL), Some(&chain(2, "b")), "{}", event.kind());
            }
        }
    }

    #[test]
    fn each_retry_updates_its_own_chain_only() {
        // (event, expected (provider, key, retry, id) entries afterwards)
        /// (provider, policy key, retry, retry id)
        type Row<'a> = (&'a str, &'a str, u64, &'a str);
        let table: Vec<(Event, Vec<Row>)> = vec![
            (retry("mock", NORMAL, 1, "a"), vec![("mock", NORMAL, 1, "a")]),
            (retry("mock", NORMAL, 2, "a"), vec![("mock", NORMAL, 2, "a")]),
            (retry("mock", AUTO, 1, "b"), vec![("mock", NORMAL, 2, "a"), ("mock", AUTO, 1, "b")]),
            (
                retry("deepseek", NORMAL, 1, "c"),
                vec![
                    ("mock", NORMAL, 2, "a"),
                    ("mock", AUTO, 1, "b"),
                    ("deepseek", NORMAL, 1, "c"),
                ],
            ),
            (
                retry("mock", AUTO, 2, "b"),
                vec![
                    ("mock", NORMAL, 2, "a"),
                    ("mock", AUTO, 2, "b"),
                    ("deepseek", NORMAL, 1, "c"),
                ],
            ),
        ];
        let mut chains = RetryChains::default();
        for (event, expected) in table {
            chains.apply(&event);
            let got: Vec<Row> =
                chains.iter().map(|(p, k, c)| (p, k, c.retry, c.retry_id.as_str())).collect();
            assert_eq!(got, expected);
        }
        assert_eq!(chains.get("mock", "[]"), None, "an unknown policy key has no chain");
        assert_eq!(chains.get("nope", NORMAL), None, "an unknown provider has no chain");
    }

    #[test]
    fn the_latest_retry_wins_even_when_it_goes_back() {
        // The projection records, it does not judge: a validator rejects a bad number before it
        // is committed, so whatever reaches the fold is the chain's truth.
        let mut chains = RetryChains::default();
        chains.apply(&retry("mock", NORMAL, 3, "a"));
        chains.apply(&retry("mock", NORMAL, 1, "z"));
        assert_eq!(chains.get("mock", NORMAL), Some(&chain(1, "z")));
    }

    #[test]
    fn a_chain_records_its_turn_and_step() {
        let mut chains = RetryChains::default();
        let mut event = retry("mock", NORMAL, 1, "a");
        if let Event::LlmRetry(r) = &mut event {
            r.turn = 4;
            r.step = 7;
        }
        chains.apply(&event);
        assert_eq!(
            chains.get("mock", NORMAL),
            Some(&Chain { turn: 4, step: 7, retry: 1, retry_id: "a".into() })
        );
    }

    #[test]
    fn the_projection_folds_envelopes_under_its_key() {
        let p = RetryChainProjection;
        assert_eq!(p.key(), "retry-chains");
        let mut state = RetryChains::default();
        p.fold(&mut state, &Envelope { seq: 3, time: 0, event: retry("mock", NORMAL, 1, "a") });
        assert_eq!(state.get("mock", NORMAL), Some(&chain(1, "a")));
        p.fold(&mut state, &Envelope { seq: 4, time: 0, event: Event::AgentIdle(AgentIdle {}) });
        assert!(state.is_empty());
    }
}
