//! Turn-tail panels: for each turn that retried or failed, the failure detail its session log
//! holds and a transcript drops — every attempt, who started it, how long it waited and what the
//! provider said, verbatim.
//!
//! [`panels`] folds a log into one [`TurnPanel`] per such turn: a one-line
//! [`TurnPanel::summary`] (`Retried 3 times this turn · finally failed with RATE_LIMIT`) and
//! its [`Line`]s in log order. Renderers (the terminal text of `rein show`, the HTML of
//! `rein report`) only format what a panel holds; the rules live here.
//!
//! - A turn gets a panel when one of its attempts failed (`request/error`), when it retried in
//!   any way (an attempt after the first of its step), when a recovery left a trace
//!   (`llm/retry`, `route/switched`, `context/compacted`, `plugin/crashed`), when a restart
//!   resumed it (`turn/resumed`), or when it ended with an error. Other turns get none.
//! - Every attempt of the turn is a line, with its [`Origin`]: `harness` for the first attempt
//!   of a step (nothing retried it); the plugin of the `llm/retry` whose `llm/retry-started`
//!   came before it; `fallback` after a `route/switched`; `compaction` after a
//!   `context/compacted`; `unrecorded` when a plugin retried without writing anything. The
//!   first attempt after a `turn/resumed` is marked [`Attempt::resumed`] ("resumed after a
//!   restart"), and a turn that was resumed always gets a panel.
//! - "Retried N times" counts the retries the turn's plugins made or scheduled: the attempts
//!   that are not the first of their step, and the retries scheduled after the turn's last
//!   attempt that never started (a wait cut short, or still waiting) — a turn cancelled during a
//!   retry's wait did retry, it was cut short: `Retried 1 time this turn · cancelled during the
//!   wait`.
//! - A retry scheduled but never started (its wait was cut short) is a line of its own — a
//!   waiting one when the log ends during its wait (the turn still runs) — as are
//!   route switches, compactions, plugin crashes and settings changes during the turn, and the
//!   turn's final failure when it is not the failure of its last failed attempt.
//! - Route health shows: a retry a plugin declined because the route's retry budget was spent
//!   (`retry/throttled`) is a line of its own ([`Line::Throttled`]) and the summary says the
//!   turn's retries were throttled; an attempt the route's open breaker refused
//!   (`CIRCUIT_OPEN`: no request was sent) is marked short-circuited
//!   ([`Attempt::short_circuited`]).
//!
//! # Why the fold never fails
//!
//! Panels are for looking at logs, broken ones included. An event that does not fit (an error
//! for an attempt that never started, a turn that never ends, numbers that disagree) is shown as
//! far as it can be placed or skipped; `rein check` is what says what is wrong with a log.

use crate::event::{
    CancelCause, ConfigChanged, ContextCompacted, Envelope, Event, LlmRetry, PluginCrashed,
    RequestError, RequestStart, RetryThrottled, RouteSwitched, TurnEndReason,
};
use crate::failure::{CIRCUIT_OPEN, Failure};
use crate::{json_number, plural};

/// The panels of every turn of `log` that retried or failed, in turn order.
pub fn panels(log: &[Envelope]) -> Vec<TurnPanel> {
    let mut fold = Fold::default();
    for envelope in log {
        fold.apply(envelope);
    }
    fold.finish()
}

/// The panel at the tail of one turn.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnPanel {
    /// The turn.
    pub turn: u32,
    /// Attempts that were not the first of their step.
    pub retries: u32,
    /// How the turn ended.
    pub ending: Ending,
    /// What happened, in log order.
    pub lines: Vec<Line>,
}

impl TurnPanel {
    /// The one-line summary: `Retried 3 times this turn · finally failed with RATE_LIMIT`,
    /// `Retried 1 time this turn · recovered`, `Retried 1 time this turn · cancelled during the
    /// wait`, `Not retried · failed with AUTH`…
    pub fn summary(&self) -> String {
        format!("{} · {}", self.head(), self.tail())
    }

    /// The retries the turn's plugins made or scheduled: [`TurnPanel::retries`] (the attempts
    /// that are not the first of their step) and the retries scheduled after the turn's last
    /// attempt that never started ([`Line::NotStarted`], [`Line::Waiting`]: a wait cut short, a
    /// start refused, a wait still running). A retry that did not start but was followed by
    /// another attempt (another plugin took over) is not counted again.
    pub fn retried(&self) -> u32 {
        let unstarted = self
            .lines
            .iter()
            .rev()
            .take_while(|line| !matches!(line, Line::Attempt(_)))
            .filter(|line| matches!(line, Line::NotStarted(_) | Line::Waiting(_)))
            .count();
        self.retries.saturating_add(u32::try_from(unstarted).unwrap_or(u32::MAX))
    }

    /// The summary's first half: `Retried 3 times this turn`, `Retried 1 time this turn`, or
    /// `Not retried` ([`TurnPanel::retried`]); `, then throttled` (`: throttled` when not
    /// retried) when a plugin declined a retry because the route's budget was spent.
    pub fn head(&self) -> String {
        let throttled = self.lines.iter().any(|line| matches!(line, Line::Throttled(_)));
        match (self.retried(), throttled) {
            (0, false) => "Not retried".to_owned(),
            (0, true) => "Not retried: throttled".to_owned(),
            (n, false) => format!("Retried {} this turn", plural::count(n, "time", "times")),
            (n, true) => {
                format!("Retried {} this turn, then throttled", plural::count(n, "time", "times"))
            }
        }
    }

    /// The summary's second half: how the turn ended (`finally failed with RATE_LIMIT`; for a
    /// turn cancelled while a retry waited — its last line a retry that never started —
    /// `cancelled during the wait`).
    pub fn tail(&self) -> String {
        let in_wait = matches!(
            (&self.ending, self.lines.last()),
            (Ending::Cancelled(_), Some(Line::NotStarted(_)))
        );
        self.ending.phrase(self.retried() > 0, in_wait)
    }

    /// The attempts, in order.
    pub fn attempts(&self) -> impl Iterator<Item = &Attempt> {
        self.lines.iter().filter_map(|line| match line {
            Line::Attempt(attempt) => Some(attempt),
            _ => None,
        })
    }
}

/// How a turn with a panel ended.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Ending {
    /// It completed: whatever failed was recovered.
    Recovered,
    /// It ended with this failure.
    Failed(Failure),
    /// It was cancelled.
    Cancelled(CancelCause),
    /// It reached the per-turn step limit.
    MaxSteps,
    /// A crash left it open; the reopened log closed it.
    Interrupted,
    /// The log ends before the turn does.
    Running,
}

impl Ending {
    /// The ending as the summary's tail says it (`finally failed with X` after retries).
    pub fn describe(&self, retried: bool) -> String {
        self.phrase(retried, false)
    }

    /// [`Ending::describe`]; a cancellation `in_wait` cut a retry's wait short (`cancelled
    /// during the wait`, `cancelled during the wait: disposed`).
    fn phrase(&self, retried: bool, in_wait: bool) -> String {
        let wait = if in_wait { " during the wait" } else { "" };
        match self {
            Ending::Recovered => "recovered".to_owned(),
            Ending::Failed(failure) if retried => format!("finally failed with {}", failure.code()),
            Ending::Failed(failure) => format!("failed with {}", failure.code()),
            Ending::Cancelled(CancelCause::User) => format!("cancelled{wait}"),
            Ending::Cancelled(CancelCause::Parent) => format!("cancelled with its session{wait}"),
            Ending::Cancelled(CancelCause::Disposed) => format!("cancelled{wait}: disposed"),
            Ending::Cancelled(CancelCause::Hook { reason }) => {
                format!("cancelled by a hook{wait}: {reason}")
            }
            Ending::MaxSteps => "stopped at the step limit".to_owned(),
            Ending::Interrupted => "interrupted: the process stopped during the turn".to_owned(),
            Ending::Running => "still running".to_owned(),
        }
    }

    /// A stable one-word name (`recovered`, `failed`, `cancelled`, `max-steps`, `interrupted`,
    /// `running`), for styling.
    pub fn kind(&self) -> &'static str {
        match self {
            Ending::Recovered => "recovered",
            Ending::Failed(_) => "failed",
            Ending::Cancelled(_) => "cancelled",
            Ending::MaxSteps => "max-steps",
            Ending::Interrupted => "interrupted",
            Ending::Running => "running",
        }
    }

    fn of(reason: &TurnEndReason) -> Self {
        match reason {
            TurnEndReason::Completed => Ending::Recovered,
            TurnEndReason::Error { failure } => Ending::Failed(failure.clone()),
            TurnEndReason::Aborted { cause } => Ending::Cancelled(cause.clone()),
            TurnEndReason::MaxSteps => Ending::MaxSteps,
            TurnEndReason::Interrupted => Ending::Interrupted,
        }
    }
}

/// One line of a panel.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Line {
    /// A provider attempt.
    Attempt(Attempt),
    /// A retry that was scheduled (`llm/retry`) but never started: its wait was cut short (the
    /// turn was cancelled, the plugin disposed or switched off) or its start was refused.
    NotStarted(ScheduledRetry),
    /// A retry scheduled (`llm/retry`) in the last turn of a log that ends while it runs: the
    /// turn is waiting for it (a live log), or the process stopped during the wait.
    Waiting(ScheduledRetry),
    /// A recovery moved the step to another route.
    RouteSwitched(RouteSwitched),
    /// Compaction shrank the model-visible history.
    Compacted(ContextCompacted),
    /// A plugin crashed while answering.
    PluginCrashed(PluginCrashed),
    /// A plugin's settings changed while the turn ran.
    ConfigChanged(ConfigChanged),
    /// A plugin declined a retry because the route's retry budget was spent
    /// (`retry/throttled`).
    Throttled(RetryThrottled),
    /// The turn's final failure, when it is not the failure of its last failed attempt (a tool
    /// error, a request that could not be built).
    TurnFailed(Failure),
}

/// One provider attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    /// The turn.
    pub turn: u32,
    /// The step.
    pub step: u32,
    /// The attempt number within the step, from 1.
    pub attempt: u32,
    /// The provider route that served it.
    pub provider: String,
    /// The model asked (empty when the log has no `request/start` for it).
    pub model: String,
    /// When it started (the log's clock).
    pub time: u64,
    /// What led to it.
    pub origin: Origin,
    /// How it ended.
    pub outcome: AttemptEnd,
    /// The raw text it streamed (`assistant/chunk`), in full.
    pub streamed: String,
    /// It is the first attempt after a `turn/resumed`: the process stopped and a reopened
    /// session continued the turn ("resumed after a restart").
    pub resumed: bool,
}

impl Attempt {
    /// The note of an attempt that followed a restart.
    pub const RESUMED: &'static str = "resumed after a restart";

    /// The note of an attempt the route's open breaker refused.
    pub const SHORT_CIRCUITED: &'static str =
        "short-circuited: the route's breaker is open, no request was sent";

    /// Whether the route's open breaker refused it (`CIRCUIT_OPEN`): it failed at once and sent
    /// no request.
    pub fn short_circuited(&self) -> bool {
        self.failure().is_some_and(|failure| failure.code() == CIRCUIT_OPEN)
    }

    /// The failure, when it failed.
    pub fn failure(&self) -> Option<&Failure> {
        match &self.outcome {
            AttemptEnd::Failed(failure) => Some(failure),
            _ => None,
        }
    }
}

/// What led to an attempt.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Origin {
    /// The first attempt of its step: nothing retried it.
    Harness,
    /// A retry scheduled by a plugin (`llm/retry`) and started (`llm/retry-started`).
    Retry(ScheduledRetry),
    /// A route switch (`route/switched`) moved the step to this attempt's route.
    RouteSwitch {
        /// The route of the attempt before.
        from: String,
        /// The route of this attempt.
        to: String,
    },
    /// Compaction shrank the history (`context/compacted`) and retried.
    Compaction,
    /// A plugin retried without writing any event (a downstream retry that always mode accepted,
    /// the `scripted` test plugin).
    Unrecorded,
}

impl Origin {
    /// Who started the attempt: `harness`, the retrying plugin's name, `fallback`, `compaction`
    /// or `unrecorded`.
    pub fn label(&self) -> &str {
        match self {
            Origin::Harness => "harness",
            Origin::Retry(retry) => &retry.plugin,
            Origin::RouteSwitch { .. } => "fallback",
            Origin::Compaction => "compaction",
            Origin::Unrecorded => "unrecorded",
        }
    }

    /// The scheduled retry behind the attempt, if one was recorded.
    pub fn retry(&self) -> Option<&ScheduledRetry> {
        match self {
            Origin::Retry(retry) => Some(retry),
            _ => None,
        }
    }
}

/// A retry as its `llm/retry` recorded it.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduledRetry {
    /// The plugin that scheduled it.
    pub plugin: String,
    /// `normal` or `always`.
    pub mode: String,
    /// The chain's id.
    pub retry_id: String,
    /// The retry number in its chain, from 1.
    pub retry: u64,
    /// The chain's budget; `None` is unbounded (always mode).
    pub max_retries: Option<u64>,
    /// The wait before the attempt.
    pub delay_ms: f64,
    /// The turn.
    pub turn: u32,
    /// The step.
    pub step: u32,
    /// The provider route it retries.
    pub provider: String,
    /// The code of the failure it retries.
    pub code: String,
    /// When it was scheduled (the log's clock).
    pub time: u64,
}

impl ScheduledRetry {
    /// `attempt N/M`: the retry's number in its chain over the chain's budget, `∞` when
    /// unbounded.
    pub fn budget(&self) -> String {
        match self.max_retries {
            Some(max) => format!("attempt {}/{max}", self.retry),
            None => format!("attempt {}/∞", self.retry),
        }
    }

    /// The wait, as `500 ms` (fractions kept: `1.5 ms`).
    pub fn wait(&self) -> String {
        format_ms(self.delay_ms)
    }

    fn of(retry: &LlmRetry, time: u64) -> Self {
        Self {
            plugin: retry.plugin.clone(),
            mode: retry.mode.clone(),
            retry_id: retry.retry_id.clone(),
            retry: retry.retry,
            max_retries: if retry.mode == "always" { None } else { retry.max_retries },
            delay_ms: retry.delay_ms,
            turn: retry.turn,
            step: retry.step,
            provider: retry.provider.clone(),
            code: retry.failure.code().to_owned(),
            time,
        }
    }
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum AttemptEnd {
    /// The provider answered (`assistant/message`).
    Answered,
    /// It failed (`request/error`), with the provider's failure verbatim.
    Failed(Failure),
    /// The turn was cancelled while it ran.
    Cancelled,
    /// A crash stopped it.
    Interrupted,
    /// The turn ended for another reason before it answered.
    Unanswered,
    /// The log ends while it runs.
    Running,
}

impl AttemptEnd {
    /// A stable one-word name (`answered`, `failed`, `cancelled`, `interrupted`, `unanswered`,
    /// `running`), for styling.
    pub fn kind(&self) -> &'static str {
        match self {
            AttemptEnd::Answered => "answered",
            AttemptEnd::Failed(_) => "failed",
            AttemptEnd::Cancelled => "cancelled",
            AttemptEnd::Interrupted => "interrupted",
            AttemptEnd::Unanswered => "unanswered",
            AttemptEnd::Running => "running",
        }
    }
}

/// Milliseconds as a person reads them: whole from 10 ms up (`215 ms`, `1000 ms`), one decimal
/// below (`1.5 ms`, `0.3 ms`). The log keeps the exact value.
pub fn format_ms(ms: f64) -> String {
    let shown = if ms.abs() >= 10.0 { ms.round() } else { (ms * 10.0).round() / 10.0 };
    format!("{} ms", json_number::format(shown))
}

/// The fold behind [`panels`].
#[derive(Debug, Default)]
struct Fold {
    done: Vec<TurnPanel>,
    open: Option<TurnSoFar>,
}

/// The turn being folded.
#[derive(Debug)]
struct TurnSoFar {
    turn: u32,
    lines: Vec<Line>,
    retries: u32,
    failed: bool,
    /// Attempts started in the open step.
    attempts_in_step: u32,
    /// An `llm/retry` not (yet) started.
    scheduled: Option<ScheduledRetry>,
    /// What will have led to the step's next attempt.
    lead: Option<Origin>,
    /// The index in `lines` of the step's latest attempt.
    current: Option<usize>,
    /// A `turn/resumed` came after the latest attempt: the next one follows a restart.
    resumed: bool,
    /// A `turn/resumed` came in this turn.
    restarted: bool,
}

impl Fold {
    fn apply(&mut self, envelope: &Envelope) {
        if let Event::TurnStart(start) = &envelope.event {
            if let Some(mut open) = self.open.take() {
                // A later turn started: nothing waits for this one's retry any more.
                open.abandon_scheduled();
                self.close(open, Ending::Running);
            }
            self.open = Some(TurnSoFar::new(start.turn));
            return;
        }
        let Some(open) = self.open.as_mut() else { return };
        let time = envelope.time;
        match &envelope.event {
            Event::TurnEnd(end) if end.turn == open.turn => {
                if let Some(open) = self.open.take() {
                    self.close(open, Ending::of(&end.reason));
                }
            }
            Event::StepStart(s) if s.turn == open.turn => {
                open.end_step();
                open.attempts_in_step = 0;
                open.current = None;
            }
            Event::StepEnd(s) if s.turn == open.turn => open.end_step(),
            Event::RequestStart(r) if r.turn == open.turn => open.start_attempt(r, time),
            Event::AssistantChunk(c) if c.turn == open.turn => {
                if let Some(attempt) = open.attempt_mut(c.step, c.attempt) {
                    attempt.streamed.push_str(&c.text);
                }
            }
            Event::RequestError(e) if e.turn == open.turn => open.fail_attempt(e, time),
            Event::LlmRetry(r) if r.turn == open.turn => {
                open.abandon_scheduled();
                open.scheduled = Some(ScheduledRetry::of(r, time));
            }
            Event::LlmRetryStarted(s) if s.turn == open.turn => {
                let matches = open
                    .scheduled
                    .as_ref()
                    .is_some_and(|r| r.retry_id == s.retry_id && r.retry == s.retry);
                if matches {
                    open.lead = open.scheduled.take().map(Origin::Retry);
                }
            }
            Event::AssistantMessage(m) if m.turn == open.turn => {
                if let Some(index) = open.current
                    && let Line::Attempt(attempt) = &mut open.lines[index]
                    && attempt.step == m.step
                    && attempt.outcome == AttemptEnd::Running
                {
                    attempt.outcome = AttemptEnd::Answered;
                }
            }
            Event::RouteSwitched(r) if r.turn == open.turn => {
                open.lines.push(Line::RouteSwitched(r.clone()));
                let switch = Origin::RouteSwitch { from: r.from.clone(), to: r.to.clone() };
                open.lead.get_or_insert(switch);
            }
            Event::ContextCompacted(c) if c.turn == open.turn => {
                open.lines.push(Line::Compacted(c.clone()));
                open.lead.get_or_insert(Origin::Compaction);
            }
            Event::PluginCrashed(p) => open.lines.push(Line::PluginCrashed(p.clone())),
            Event::ConfigChanged(c) => open.lines.push(Line::ConfigChanged(c.clone())),
            Event::RetryThrottled(t) if t.turn == open.turn => {
                open.lines.push(Line::Throttled(t.clone()));
            }
            Event::TurnResumed(r) if r.turn == open.turn => {
                open.resumed = true;
                open.restarted = true;
            }
            _ => {}
        }
    }

    fn finish(mut self) -> Vec<TurnPanel> {
        if let Some(open) = self.open.take() {
            self.close(open, Ending::Running);
        }
        self.done
    }

    fn close(&mut self, mut open: TurnSoFar, ending: Ending) {
        if ending == Ending::Running
            && let Some(retry) = open.scheduled.take()
        {
            open.lines.push(Line::Waiting(retry));
        }
        open.abandon_scheduled();
        let unfinished = match ending {
            Ending::Cancelled(_) => AttemptEnd::Cancelled,
            Ending::Interrupted => AttemptEnd::Interrupted,
            Ending::Running => AttemptEnd::Running,
            _ => AttemptEnd::Unanswered,
        };
        for line in &mut open.lines {
            if let Line::Attempt(attempt) = line
                && attempt.outcome == AttemptEnd::Running
            {
                attempt.outcome = unfinished.clone();
            }
        }
        if let Ending::Failed(failure) = &ending {
            let last = open.lines.iter().rev().find_map(|line| match line {
                Line::Attempt(attempt) => attempt.failure(),
                _ => None,
            });
            if last != Some(failure) {
                open.lines.push(Line::TurnFailed(failure.clone()));
            }
        }
        let traced = open.lines.iter().any(|line| {
            matches!(
                line,
                Line::NotStarted(_)
                    | Line::Waiting(_)
                    | Line::RouteSwitched(_)
                    | Line::Compacted(_)
                    | Line::PluginCrashed(_)
                    | Line::Throttled(_)
            )
        });
        let failed = matches!(ending, Ending::Failed(_));
        if open.failed || open.retries > 0 || traced || failed || open.restarted {
            self.done.push(TurnPanel {
                turn: open.turn,
                retries: open.retries,
                ending,
                lines: open.lines,
            });
        }
    }
}

impl TurnSoFar {
    fn new(turn: u32) -> Self {
        Self {
            turn,
            lines: Vec::new(),
            retries: 0,
            failed: false,
            attempts_in_step: 0,
            scheduled: None,
            lead: None,
            current: None,
            resumed: false,
            restarted: false,
        }
    }

    /// A step ended (or a new one began): what was scheduled in it will not start.
    fn end_step(&mut self) {
        self.abandon_scheduled();
        self.lead = None;
    }

    fn abandon_scheduled(&mut self) {
        if let Some(retry) = self.scheduled.take() {
            self.lines.push(Line::NotStarted(retry));
        }
    }

    fn start_attempt(&mut self, request: &RequestStart, time: u64) {
        self.abandon_scheduled();
        let lead = self.lead.take();
        let origin = match lead {
            _ if self.attempts_in_step == 0 => Origin::Harness,
            Some(origin) => origin,
            None => Origin::Unrecorded,
        };
        if origin != Origin::Harness {
            self.retries += 1;
        }
        self.attempts_in_step += 1;
        self.lines.push(Line::Attempt(Attempt {
            turn: request.turn,
            step: request.step,
            attempt: request.attempt,
            provider: request.provider.clone(),
            model: request.model.clone(),
            time,
            origin,
            outcome: AttemptEnd::Running,
            streamed: String::new(),
            resumed: std::mem::take(&mut self.resumed),
        }));
        self.current = Some(self.lines.len() - 1);
    }

    fn fail_attempt(&mut self, error: &RequestError, time: u64) {
        self.failed = true;
        let failure = AttemptEnd::Failed(error.failure.clone());
        if let Some(attempt) = self.attempt_mut(error.step, error.attempt) {
            attempt.outcome = failure;
            return;
        }
        // An error for an attempt the log never started: shown with what the error says.
        self.lines.push(Line::Attempt(Attempt {
            turn: error.turn,
            step: error.step,
            attempt: error.attempt,
            provider: error.provider.clone(),
            model: String::new(),
            time,
            origin: Origin::Unrecorded,
            outcome: failure,
            streamed: String::new(),
            resumed: false,
        }));
    }

    /// The latest attempt numbered (`step`, `attempt`) that has not ended yet.
    fn attempt_mut(&mut self, step: u32, number: u32) -> Option<&mut Attempt> {
        self.lines.iter_mut().rev().find_map(|line| match line {
            Line::Attempt(a)
                if a.step == step && a.attempt == number && a.outcome == AttemptEnd::Running =>
            {
                Some(a)
            }
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scheduled(retry: u64) -> ScheduledRetry {
        ScheduledRetry {
            plugin: "llm-retry".into(),
            mode: "normal".into(),
            retry_id: "r".into(),
            retry,
            max_retries: Some(2),
            delay_ms: 500.0,
            turn: 1,
            step: 1,
            provider: "mock".into(),
            code: "SERVER".into(),
            time: 0,
        }
    }

    fn attempt(attempt: u32, outcome: AttemptEnd) -> Line {
        Line::Attempt(Attempt {
            turn: 1,
            step: 1,
            attempt,
            provider: "mock".into(),
            model: "m".into(),
            time: 0,
            origin: if attempt == 1 { Origin::Harness } else { Origin::Retry(scheduled(1)) },
            outcome,
            streamed: String::new(),
            resumed: false,
        })
    }

    #[test]
    fn a_summary_counts_in_words_and_says_when_a_cancel_cut_a_wait_short() {
        let server = Failure::new("SERVER", "down").unwrap();
        let failed = || attempt(1, AttemptEnd::Failed(server.clone()));
        let cancel = |cause: CancelCause| Ending::Cancelled(cause);
        let hook = CancelCause::Hook { reason: "budget".into() };
        let cases: Vec<(u32, Vec<Line>, Ending, &str)> = vec![
            (0, vec![failed()], Ending::Failed(server.clone()), "Not retried · failed with SERVER"),
            (
                1,
                vec![failed(), attempt(2, AttemptEnd::Answered)],
                Ending::Recovered,
                "Retried 1 time this turn · recovered",
            ),
            (
                2,
                vec![failed()],
                Ending::Failed(server.clone()),
                "Retried 2 times this turn · finally failed with SERVER",
            ),
            // Cancelled while the retry waited: retried once, cut short.
            (
                0,
                vec![failed(), Line::NotStarted(scheduled(1))],
                cancel(CancelCause::User),
                "Retried 1 time this turn · cancelled during the wait",
            ),
            (
                0,
                vec![failed(), Line::NotStarted(scheduled(1))],
                cancel(CancelCause::Parent),
                "Retried 1 time this turn · cancelled with its session during the wait",
            ),
            (
                0,
                vec![failed(), Line::NotStarted(scheduled(1))],
                cancel(CancelCause::Disposed),
                "Retried 1 time this turn · cancelled during the wait: disposed",
            ),
            (
                1,
                vec![failed(), Line::NotStarted(scheduled(2))],
                cancel(hook.clone()),
                "Retried 2 times this turn · cancelled by a hook during the wait: budget",
            ),
            // Cancelled while an attempt ran: no wait was cut.
            (
                1,
                vec![failed(), attempt(2, AttemptEnd::Cancelled)],
                cancel(CancelCause::User),
                "Retried 1 time this turn · cancelled",
            ),
            (
                0,
                vec![attempt(1, AttemptEnd::Cancelled)],
                cancel(hook),
                "Not retried · cancelled by a hook: budget",
            ),
            // A retry whose start was refused, then the turn failed: it was scheduled.
            (
                0,
                vec![failed(), Line::NotStarted(scheduled(1))],
                Ending::Failed(server.clone()),
                "Retried 1 time this turn · finally failed with SERVER",
            ),
            // A retry cut short, then another plugin's attempt: counted once, as the attempt.
            (
                1,
                vec![failed(), Line::NotStarted(scheduled(1)), attempt(2, AttemptEnd::Answered)],
                Ending::Recovered,
                "Retried 1 time this turn · recovered",
            ),
            // The log ends while a retry waits.
            (
                0,
                vec![failed(), Line::Waiting(scheduled(1))],
                Ending::Running,
                "Retried 1 time this turn · still running",
            ),
        ];
        for (retries, lines, ending, want) in cases {
            let panel = TurnPanel { turn: 1, retries, ending, lines };
            assert_eq!(panel.summary(), want);
        }
    }

    #[test]
    fn a_throttled_turn_says_so_and_a_short_circuited_attempt_is_named() {
        let server = Failure::new("SERVER", "down").unwrap();
        let throttle = Line::Throttled(RetryThrottled {
            turn: 1,
            step: 1,
            provider: "mock".into(),
            plugin: "llm-retry".into(),
            code: "SERVER".into(),
        });
        let failed = || attempt(1, AttemptEnd::Failed(server.clone()));
        let cases: Vec<(u32, Vec<Line>, &str)> = vec![
            (0, vec![failed(), throttle.clone()], "Not retried: throttled · failed with SERVER"),
            (
                2,
                vec![failed(), throttle.clone()],
                "Retried 2 times this turn, then throttled · finally failed with SERVER",
            ),
        ];
        for (retries, lines, want) in cases {
            let panel =
                TurnPanel { turn: 1, retries, ending: Ending::Failed(server.clone()), lines };
            assert_eq!(panel.summary(), want);
        }
        let open = Failure::internal(CIRCUIT_OPEN, "route \"mock\" is open");
        let Line::Attempt(refused) = attempt(1, AttemptEnd::Failed(open)) else { unreachable!() };
        assert!(refused.short_circuited());
        let Line::Attempt(sent) = failed() else { unreachable!() };
        assert!(!sent.short_circuited());
        let Line::Attempt(answered) = attempt(2, AttemptEnd::Answered) else { unreachable!() };
        assert!(!answered.short_circuited());
    }

    #[test]
    fn milliseconds_are_shown_whole_from_ten_up_and_with_one_decimal_below() {
        let cases = [
            (215.049_138_919_670_07, "215 ms"),
            (500.0, "500 ms"),
            (9.96, "10 ms"),
            (10.4, "10 ms"),
            (1.5, "1.5 ms"),
            (0.25, "0.3 ms"),
            (0.04, "0 ms"),
            (0.0, "0 ms"),
            (3_600_000.0, "3600000 ms"),
        ];
        for (ms, shown) in cases {
            assert_eq!(format_ms(ms), shown, "{ms}");
        }
    }
}
