//! What a session is doing, read from its log: the state the session view and the sessions list
//! show, and the text a running attempt has streamed so far.
//!
//! - [`state`]: idle, a turn running, or a turn waiting for a scheduled retry (its last
//!   `llm/retry` not yet followed by its `llm/retry-started`, an attempt or the turn's end).
//! - [`streaming`]: the chunks of the running turn's latest attempt, until it answers or fails.
//! - [`Summary`]: one row of the sessions list (first prompt, turns, state, how the last turn
//!   ended, how many turns retried or failed, last activity), made by `tail.rs` as a log grows.
//! - [`utc`]: a log time (milliseconds since the Unix epoch) as `2025-01-02 13:45:10 UTC`.
//!
//! A log that ends inside a turn is read as running: in the console's own runtime it is; in a
//! store served read-only it may also be a process that stopped mid-turn (its next reopen closes
//! the turn `interrupted`).

use rein_runtime::event::{Envelope, Event};
use serde::Serialize;

/// What a session is doing.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub(crate) enum State {
    /// No turn runs.
    Idle,
    /// Turn `turn` runs (an attempt streams, a tool runs, the waterfall decides).
    Running {
        /// The turn.
        turn: u32,
    },
    /// Turn `turn` waits for a retry a plugin scheduled.
    #[serde(rename_all = "camelCase")]
    Waiting {
        /// The turn.
        turn: u32,
        /// The plugin that scheduled it.
        plugin: String,
        /// The retry's number in its chain.
        retry: u64,
        /// The chain's budget (none in always mode).
        max_retries: Option<u64>,
        /// The wait (written as the log writes it: `20000`, not `20000.0`).
        #[serde(serialize_with = "rein_runtime::json_number::serialize")]
        delay_ms: f64,
        /// When the wait began (the `llm/retry`'s time).
        since: u64,
        /// The code being retried.
        code: String,
    },
}

impl State {
    /// Whether a turn runs (waiting included): what a cancel button is for.
    pub(crate) fn is_running(&self) -> bool {
        !matches!(self, State::Idle)
    }

    /// The state in words: `idle`, `turn 2 running`, `turn 2 waiting 10 s for auto-retry's retry
    /// 1/3 (RATE_LIMIT)`.
    pub(crate) fn describe(&self) -> String {
        match self {
            State::Idle => "idle".to_owned(),
            State::Running { turn } => format!("turn {turn} running"),
            State::Waiting { turn, plugin, retry, max_retries, delay_ms, code, .. } => {
                let budget = max_retries.map_or_else(|| "∞".to_owned(), |m| m.to_string());
                format!(
                    "turn {turn} waiting {} for {plugin}'s retry {retry}/{budget} ({code})",
                    duration(*delay_ms)
                )
            }
        }
    }
}

/// A wait as a person reads it: `500 ms`, `1.5 s`, `10 min`, `1 h 5 min`.
pub(crate) fn duration(ms: f64) -> String {
    let ms = ms.max(0.0);
    if ms < 1000.0 {
        return format!("{} ms", rein_runtime::json_number::format(ms.round()));
    }
    let seconds = ms / 1000.0;
    if seconds < 60.0 {
        let tenths = (seconds * 10.0).round() / 10.0;
        return format!("{} s", rein_runtime::json_number::format(tenths));
    }
    // Whole seconds from here on.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let total = seconds.round() as u64;
    let (h, m, s) = (total / 3600, total % 3600 / 60, total % 60);
    match (h, m, s) {
        (0, m, 0) => format!("{m} min"),
        (0, m, s) => format!("{m} min {s} s"),
        (h, 0, _) => format!("{h} h"),
        (h, m, _) => format!("{h} h {m} min"),
    }
}

/// What the session in `log` is doing at its end.
pub(crate) fn state(log: &[Envelope]) -> State {
    let mut state = State::Idle;
    for envelope in log {
        match &envelope.event {
            Event::TurnStart(start) => state = State::Running { turn: start.turn },
            Event::TurnEnd(_) => state = State::Idle,
            Event::LlmRetry(retry) => {
                if let State::Running { turn } | State::Waiting { turn, .. } = state {
                    state = State::Waiting {
                        turn,
                        plugin: retry.plugin.clone(),
                        retry: retry.retry,
                        max_retries: if retry.mode == "always" { None } else { retry.max_retries },
                        delay_ms: retry.delay_ms,
                        since: envelope.time,
                        code: retry.failure.code().to_owned(),
                    };
                }
            }
            Event::LlmRetryStarted(_)
            | Event::RequestStart(_)
            | Event::StepStart(_)
            | Event::StepEnd(_)
            | Event::ToolCall(_) => {
                if let State::Waiting { turn, .. } = state {
                    state = State::Running { turn };
                }
            }
            _ => {}
        }
    }
    state
}

/// The text the running turn's latest attempt has streamed so far: `(turn, text)`, when a turn
/// runs and its latest attempt has neither answered nor failed.
pub(crate) fn streaming(log: &[Envelope]) -> Option<(u32, String)> {
    let mut current: Option<(u32, u32, u32, String)> = None;
    let mut open: Option<u32> = None;
    for envelope in log {
        match &envelope.event {
            Event::TurnStart(start) => open = Some(start.turn),
            Event::TurnEnd(_) => {
                open = None;
                current = None;
            }
            Event::RequestStart(r) => current = Some((r.turn, r.step, r.attempt, String::new())),
            Event::AssistantChunk(c) => {
                if let Some((turn, step, attempt, text)) = current.as_mut()
                    && (*turn, *step, *attempt) == (c.turn, c.step, c.attempt)
                {
                    text.push_str(&c.text);
                }
            }
            Event::AssistantMessage(_) | Event::RequestError(_) => current = None,
            _ => {}
        }
    }
    let (turn, _, _, text) = current?;
    (open == Some(turn)).then_some((turn, text))
}

/// One row of the sessions list.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Summary {
    /// The session id.
    pub(crate) id: String,
    /// The first user message (at most [`TITLE_CHARS`] characters, whitespace folded).
    pub(crate) title: Option<String>,
    /// How many turns the log holds.
    pub(crate) turns: usize,
    /// What the session is doing.
    pub(crate) state: State,
    /// How the last ended turn ended (`completed`, `failed: RATE_LIMIT`, `cancelled`…).
    pub(crate) last_ending: Option<String>,
    /// How many turns retried or failed (have a turn-tail panel).
    pub(crate) retried_or_failed: usize,
    /// The time of the last event (milliseconds since the Unix epoch).
    pub(crate) last_time: Option<u64>,
    /// Why the log could not be read, when it could not.
    pub(crate) error: Option<String>,
    /// The node serving the session now, on a cluster's database (`None`: not a cluster, or no
    /// node holds its partition).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) node: Option<String>,
}

/// The longest title of a sessions list row.
pub(crate) const TITLE_CHARS: usize = 80;

/// The row of a session whose log cannot be read.
pub(crate) fn unreadable(id: &str, error: String) -> Summary {
    Summary {
        id: id.to_owned(),
        title: None,
        turns: 0,
        state: State::Idle,
        last_ending: None,
        retried_or_failed: 0,
        last_time: None,
        error: Some(error),
        node: None,
    }
}

/// `text` on one line, at most [`TITLE_CHARS`] characters (`…` when cut).
pub(crate) fn title(text: &str) -> String {
    let folded = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if folded.chars().count() <= TITLE_CHARS {
        return folded;
    }
    let mut cut: String = folded.chars().take(TITLE_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// Milliseconds since the Unix epoch as `YYYY-MM-DD HH:MM:SS UTC` (the proleptic Gregorian
/// calendar).
pub(crate) fn utc(ms: u64) -> String {
    let seconds = ms / 1000;
    let (days, rest) = (seconds / 86_400, seconds % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm), in unsigned steps
    // shifted to the era starting 0000-03-01.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    use rein_runtime::event::{
        AssistantChunk, AssistantMessage, CancelCause, LlmRetry, LlmRetryStarted, RequestError,
        RequestStart, SessionStart, StepRef, TurnEnd, TurnEndReason, TurnStart,
    };
    use rein_runtime::failure::Failure;

    use super::*;

    fn log(events: Vec<Event>) -> Vec<Envelope> {
        events
            .into_iter()
            .enumerate()
            .map(|(seq, event)| Envelope { seq: seq as u64, time: 1000 * seq as u64, event })
            .collect()
    }

    fn start(turn: u32) -> Event {
        Event::TurnStart(TurnStart { turn })
    }

    fn request(turn: u32, attempt: u32) -> Event {
        Event::RequestStart(RequestStart {
            turn,
            step: 1,
            attempt,
            provider: "p".into(),
            model: "m".into(),
        })
    }

    fn chunk(turn: u32, attempt: u32, text: &str) -> Event {
        Event::AssistantChunk(AssistantChunk { turn, step: 1, attempt, text: text.into() })
    }

    fn error(turn: u32, attempt: u32) -> Event {
        Event::RequestError(RequestError {
            turn,
            step: 1,
            attempt,
            provider: "p".into(),
            failure: Failure::new("RATE_LIMIT", "slow").unwrap(),
        })
    }

    fn retry(turn: u32, plugin: &str, mode: &str) -> Event {
        Event::LlmRetry(LlmRetry {
            retry_id: "r".into(),
            turn,
            step: 1,
            provider: "p".into(),
            plugin: plugin.into(),
            mode: mode.into(),
            policy_key: "k".into(),
            retry: 1,
            max_retries: Some(3),
            delay_ms: 600_000.0,
            failure: Failure::new("RATE_LIMIT", "slow").unwrap(),
        })
    }

    fn end(turn: u32, reason: TurnEndReason) -> Event {
        Event::TurnEnd(TurnEnd { turn, reason })
    }

    fn answer(turn: u32, text: &str) -> Event {
        Event::AssistantMessage(AssistantMessage {
            turn,
            step: 1,
            text: text.into(),
            tool_calls: None,
            usage: None,
        })
    }

    fn session() -> Event {
        Event::SessionStart(SessionStart { session: "s".into(), format: 1 })
    }

    #[test]
    fn the_state_follows_the_last_turn() {
        let waiting = |since: u64, plugin: &str, max: Option<u64>| State::Waiting {
            turn: 1,
            plugin: plugin.into(),
            retry: 1,
            max_retries: max,
            delay_ms: 600_000.0,
            since,
            code: "RATE_LIMIT".into(),
        };
        let started = Event::LlmRetryStarted(LlmRetryStarted {
            retry_id: "r".into(),
            turn: 1,
            step: 1,
            retry: 1,
        });
        let step = Event::StepStart(StepRef { turn: 1, step: 1 });
        let cases: Vec<(Vec<Event>, State)> = vec![
            (vec![], State::Idle),
            (vec![session()], State::Idle),
            (vec![session(), start(1), step.clone()], State::Running { turn: 1 }),
            (vec![start(1), request(1, 1), error(1, 1)], State::Running { turn: 1 }),
            (
                vec![start(1), request(1, 1), error(1, 1), retry(1, "auto-retry", "normal")],
                waiting(3000, "auto-retry", Some(3)),
            ),
            (
                vec![start(1), request(1, 1), error(1, 1), retry(1, "llm-retry", "always")],
                waiting(3000, "llm-retry", None),
            ),
            (
                vec![start(1), error(1, 1), retry(1, "auto-retry", "normal"), started],
                State::Running { turn: 1 },
            ),
            (
                vec![start(1), error(1, 1), retry(1, "auto-retry", "normal"), request(1, 2)],
                State::Running { turn: 1 },
            ),
            (
                vec![
                    start(1),
                    error(1, 1),
                    retry(1, "auto-retry", "normal"),
                    end(1, TurnEndReason::Aborted { cause: CancelCause::User }),
                ],
                State::Idle,
            ),
            (
                vec![start(1), end(1, TurnEndReason::Completed), start(2)],
                State::Running { turn: 2 },
            ),
        ];
        for (events, want) in cases {
            let kinds: Vec<&str> = events.iter().map(Event::kind).collect();
            assert_eq!(state(&log(events)), want, "{kinds:?}");
        }
    }

    #[test]
    fn states_read_as_words() {
        let waiting = State::Waiting {
            turn: 2,
            plugin: "auto-retry".into(),
            retry: 1,
            max_retries: Some(3),
            delay_ms: 600_000.0,
            since: 0,
            code: "RATE_LIMIT".into(),
        };
        assert_eq!(
            waiting.describe(),
            "turn 2 waiting 10 min for auto-retry's retry 1/3 (RATE_LIMIT)"
        );
        assert_eq!(State::Running { turn: 4 }.describe(), "turn 4 running");
        assert_eq!(State::Idle.describe(), "idle");
        assert!(waiting.is_running() && !State::Idle.is_running());
        // The wait as the log writes it: a whole number without a fraction.
        let json = serde_json::to_value(&waiting).unwrap();
        assert_eq!(json["delayMs"].to_string(), "600000");
        let mut fraction = waiting.clone();
        if let State::Waiting { delay_ms, .. } = &mut fraction {
            *delay_ms = 490.25;
        }
        assert_eq!(serde_json::to_value(&fraction).unwrap()["delayMs"].to_string(), "490.25");
        let cases = [
            (0.0, "0 ms"),
            (499.6, "500 ms"),
            (1500.0, "1.5 s"),
            (59_940.0, "59.9 s"),
            (60_000.0, "1 min"),
            (90_000.0, "1 min 30 s"),
            (600_000.0, "10 min"),
            (3_600_000.0, "1 h"),
            (3_900_000.0, "1 h 5 min"),
        ];
        for (ms, want) in cases {
            assert_eq!(duration(ms), want, "{ms}");
        }
    }

    #[test]
    fn a_running_attempt_shows_what_it_streamed_until_it_ends() {
        type Case = (Vec<Event>, Option<(u32, &'static str)>);
        let cases: Vec<Case> = vec![
            (vec![start(1), request(1, 1)], Some((1, ""))),
            (
                vec![start(1), request(1, 1), chunk(1, 1, "Hel"), chunk(1, 1, "lo")],
                Some((1, "Hello")),
            ),
            // A failed attempt's text is not the answer; the retry starts over.
            (
                vec![
                    start(1),
                    request(1, 1),
                    chunk(1, 1, "cut"),
                    error(1, 1),
                    request(1, 2),
                    chunk(1, 2, "new"),
                ],
                Some((1, "new")),
            ),
            (vec![start(1), request(1, 1), chunk(1, 1, "cut"), error(1, 1)], None),
            (vec![start(1), request(1, 1), chunk(1, 1, "done"), answer(1, "done")], None),
            (
                vec![start(1), request(1, 1), chunk(1, 1, "x"), end(1, TurnEndReason::Interrupted)],
                None,
            ),
            (vec![], None),
        ];
        for (events, want) in cases {
            let kinds: Vec<&str> = events.iter().map(Event::kind).collect();
            let got = streaming(&log(events));
            assert_eq!(got.as_ref().map(|(t, s)| (*t, s.as_str())), want, "{kinds:?}");
        }
    }

    #[test]
    fn log_times_read_as_utc() {
        let cases = [
            (0, "1970-01-01 00:00:00 UTC"),
            (951_782_400_000, "2000-02-29 00:00:00 UTC"),
            (1_735_824_310_999, "2025-01-02 13:25:10 UTC"),
            (4_107_542_399_000, "2100-02-28 23:59:59 UTC"),
        ];
        for (ms, want) in cases {
            assert_eq!(utc(ms), want, "{ms}");
        }
    }
}
