//! The summary of a stress run: pure folds and statistics, and the two ways it is printed.
//!
//! - [`Tally`]: folded from every session log at the end of the run — turns by how they ended,
//!   retries by plugin (`llm/retry`), plugin crashes (`plugin/crashed`), settings changes
//!   (`config/changed`), and every invariant violation (the finished-log checker).
//! - [`Latencies`]: cancellation latencies (an HDR histogram, microseconds) and their
//!   p50/p99/max.
//! - [`Summary`]: everything a run reports, serialized as the `--json` object;
//!   [`Summary::failures`] says what makes the run fail (the exit status), [`Summary::text`] is
//!   what a person reads.
//! - [`peak_rss_kib`]: the peak resident set size from `/proc/self/status` (`VmHWM`).
//! - [`cpu_ms`]: the process's CPU time from `/proc/self/stat`.
//! - [`cluster`]: what a run on several nodes adds (`rein stress --nodes`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use crate::runtime::event::{CancelCause, Envelope, Event, TurnEndReason};
use crate::runtime::plural::count;
use hdrhistogram::Histogram;
use serde::Serialize;

pub mod cluster;

use super::route::RouteSummary;

/// How many violations, errors and hung turns a summary lists by name (all are counted).
pub const LISTED: usize = 10;

/// Errors counted, the first [`LISTED`] of them kept as they were told.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Errors {
    /// How many.
    pub(crate) count: u64,
    /// The first few.
    pub(crate) examples: Vec<String>,
}

impl Errors {
    /// Counts `message`, keeping it if fewer than [`LISTED`] are kept.
    pub(crate) fn add(&mut self, message: String) {
        self.count += 1;
        if self.examples.len() < LISTED {
            self.examples.push(message);
        }
    }

    /// Counts `other`'s errors too, keeping its examples while there is room.
    pub(crate) fn merge(&mut self, other: &Errors) {
        self.count += other.count;
        let room = LISTED.saturating_sub(self.examples.len());
        self.examples.extend(other.examples.iter().take(room).cloned());
    }
}

/// What the logs say, folded over every session.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tally {
    /// Logs read.
    pub logs: u64,
    /// Events in them.
    pub events: u64,
    /// Turns by `turn/end` kind (`completed`, `error`, `aborted`, `max-steps`, `interrupted`).
    pub turns: BTreeMap<String, u64>,
    /// Turns that ended `error`, by failure code.
    pub errors_by_code: BTreeMap<String, u64>,
    /// Turns that ended `aborted`, by cause.
    pub aborted_by_cause: BTreeMap<String, u64>,
    /// `llm/retry` events by plugin.
    pub retries_by_plugin: BTreeMap<String, u64>,
    /// `plugin/crashed` events by plugin: each a restart, except a crash that removed its
    /// plugin from the chain.
    pub crashes_by_plugin: BTreeMap<String, u64>,
    /// `config/changed` events.
    pub config_changed: u64,
    /// `tool/call` events (`--tool-rate`).
    pub tool_calls: u64,
    /// `tool/result` events with `isError` (a cancelled call, or one a crash cut: outcome
    /// unknown).
    pub tool_errors: u64,
    /// Invariant violations over every log.
    pub violations: u64,
    /// The first few, as `SESSION: violation`.
    pub violation_examples: Vec<String>,
}

impl Tally {
    /// Folds one finished log in, checking it against every rule.
    pub fn add_log(&mut self, session: &str, events: &[Envelope]) {
        self.logs += 1;
        self.events += events.len() as u64;
        for event in events {
            match &event.event {
                Event::TurnEnd(end) => {
                    *self.turns.entry(outcome_kind(&end.reason).to_owned()).or_default() += 1;
                    match &end.reason {
                        TurnEndReason::Error { failure } => {
                            *self.errors_by_code.entry(failure.code().to_owned()).or_default() += 1;
                        }
                        TurnEndReason::Aborted { cause } => {
                            *self
                                .aborted_by_cause
                                .entry(cause_kind(cause).to_owned())
                                .or_default() += 1;
                        }
                        _ => {}
                    }
                }
                Event::LlmRetry(retry) => {
                    *self.retries_by_plugin.entry(retry.plugin.clone()).or_default() += 1;
                }
                Event::PluginCrashed(crash) => {
                    *self.crashes_by_plugin.entry(crash.plugin.clone()).or_default() += 1;
                }
                Event::ConfigChanged(_) => self.config_changed += 1,
                Event::ToolCall(_) => self.tool_calls += 1,
                Event::ToolResult(result) if result.is_error => self.tool_errors += 1,
                _ => {}
            }
        }
        for violation in crate::invariant::check_finished_log(events) {
            self.violations += 1;
            if self.violation_examples.len() < LISTED {
                self.violation_examples.push(format!("{session}: {violation}"));
            }
        }
    }

    /// Turns that ended, whatever their outcome.
    pub fn turns_ended(&self) -> u64 {
        self.turns.values().sum()
    }
}

/// A `turn/end` reason's kind, as the log writes it.
pub fn outcome_kind(reason: &TurnEndReason) -> &'static str {
    match reason {
        TurnEndReason::Completed => "completed",
        TurnEndReason::Error { .. } => "error",
        TurnEndReason::Aborted { .. } => "aborted",
        TurnEndReason::MaxSteps => "max-steps",
        TurnEndReason::Interrupted => "interrupted",
    }
}

/// A cancel cause's kind, as the log writes it.
fn cause_kind(cause: &CancelCause) -> &'static str {
    match cause {
        CancelCause::User => "user",
        CancelCause::Parent => "parent",
        CancelCause::Disposed => "disposed",
        CancelCause::Hook { .. } => "hook",
    }
}

/// Latencies in microseconds, from 1 µs to an hour, at 3 significant digits.
#[derive(Debug, Clone)]
pub struct Latencies(Histogram<u64>);

/// Percentiles of a [`Latencies`], in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LatencySummary {
    /// How many were measured.
    pub samples: u64,
    /// The median.
    pub p50_ms: f64,
    /// The 99th percentile.
    pub p99_ms: f64,
    /// The largest.
    pub max_ms: f64,
}

impl Default for Latencies {
    fn default() -> Self {
        // 1 µs ..= 1 h at 3 significant digits: valid bounds, so this cannot fail.
        Self(Histogram::new_with_bounds(1, 3_600_000_000, 3).unwrap_or_else(|_| unreachable!()))
    }
}

impl Latencies {
    /// Records one latency (clamped into the histogram's range).
    pub fn record(&mut self, latency: Duration) {
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.0.saturating_record(micros.max(1));
    }

    /// p50, p99 and max, in milliseconds (all 0 without samples).
    pub fn summary(&self) -> LatencySummary {
        let ms = |micros: u64| micros as f64 / 1000.0;
        if self.0.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            samples: self.0.len(),
            p50_ms: ms(self.0.value_at_quantile(0.50)),
            p99_ms: ms(self.0.value_at_quantile(0.99)),
            max_ms: ms(self.0.max()),
        }
    }
}

/// What the driver saw of its cancellations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Cancellations {
    /// `session.cancel` calls made.
    pub requested: u64,
    /// Those that found their turn running (the others came after it ended).
    pub landed: u64,
    /// Latency from the call to the turn's `turn/end` being durable, for those that landed and
    /// ended the turn `aborted`.
    pub latency: LatencySummary,
}

/// What the plugin chaos did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginChaos {
    /// Disposals the agents asked for (one finds nothing to dispose when every plugin is
    /// already out).
    pub dispose_requests: u64,
    /// Settings changes the agents asked for (one finds no target when no plugin in the chain
    /// has run-time settings: those are counted `none` in `config`).
    pub config_requests: u64,
    /// Plugins disposed (`runtime.dispose_plugin`).
    pub disposed: u64,
    /// Plugins registered again (`runtime.register_plugin`), after a disposal or a removal.
    pub registered: u64,
    /// Plugins found out of the chain without a disposal: removed by their supervisor after
    /// crashing beyond their restart intensity.
    pub removed: u64,
    /// Recoveries the `flaky` plugin crashed on purpose (`--crash-rate`).
    pub crashes_injected: u64,
    /// Settings requests, by result: `accepted`, `stale` (sent on an old revision on purpose,
    /// refused), `invalid`, `unsupported` (the plugin has no run-time settings), `gone` (the
    /// plugin left the chain meanwhile), `none` (no plugin in the chain has run-time settings).
    pub config: BTreeMap<String, u64>,
}

/// Actors and tasks still alive after shutdown.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Leaks {
    /// Actors counted by the runtime's census.
    pub actors: u64,
    /// Tasks counted by the census.
    pub tasks: u64,
    /// The actors by kind.
    pub tree: BTreeMap<String, u64>,
    /// Whether shutdown returned within the deadline at all.
    pub shutdown_finished: bool,
}

/// A turn that did not end within the deadline after the run was over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HungTurn {
    /// Its session.
    pub session: String,
    /// The agent's turn number in this run, from 1.
    pub turn: u32,
}

/// Everything a run reports: the `--json` object.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Whether every guarantee held (the exit status is 0).
    pub ok: bool,
    /// What the run was asked to do.
    pub agents: u64,
    /// Turns per agent.
    pub turns_per_agent: u64,
    /// The seed.
    pub seed: u64,
    /// `memory`, `jsonl` or `sqlite`.
    pub store: String,
    /// Where the logs are (durable stores).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logs: Option<String>,
    /// From the first agent's start to the last turn's end (or to the hang deadline).
    pub elapsed_ms: u64,
    /// The process's CPU time (user + system, every thread) over the same stretch, in ms
    /// (absent where `/proc` has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_ms: Option<u64>,
    /// The hang deadline the run used, in ms.
    pub hang_deadline_ms: u64,
    /// The logs' view (of the sessions this run opened).
    pub tally: Tally,
    /// Logs in the store that this run did not open (an earlier run's with more agents, or
    /// anything else): left alone, neither read nor judged.
    pub other_logs: u64,
    /// Sessions a crash left with an open turn in the store (an earlier run's, killed), resumed
    /// when the run started (`Runtime::resume_pending`).
    pub resumed: u64,
    /// Prompts and retries the runtime refused (a session that would not open, a prompt that
    /// could not start).
    pub agent_errors: u64,
    /// The first few agent errors.
    pub agent_error_examples: Vec<String>,
    /// Turns still running at the deadline.
    pub hung: u64,
    /// The first few of them.
    pub hung_turns: Vec<HungTurn>,
    /// Cancellations.
    pub cancellations: Cancellations,
    /// Plugin chaos.
    pub plugins: PluginChaos,
    /// What the route went through: requests, short-circuits, retry amplification, the outage
    /// and the breaker.
    pub route: RouteSummary,
    /// What shutdown left.
    pub leaks: Leaks,
    /// Peak resident set size, KiB (`VmHWM`; absent where `/proc` has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_rss_kib: Option<u64>,
    /// Why the `--acks` file could not be written, after its path (the run then fails: the
    /// lines it promised are missing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acks_error: Option<String>,
    /// What a run on several nodes adds (`rein stress --nodes`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<cluster::ClusterReport>,
}

impl Summary {
    /// What makes the run fail, in words; empty when every guarantee held.
    pub fn failures(&self) -> Vec<String> {
        let mut failures = Vec::new();
        if self.tally.violations > 0 {
            let n = self.tally.violations;
            failures.push(count(n, "invariant violation", "invariant violations"));
        }
        if self.hung > 0 {
            failures.push(count(self.hung, "hung turn", "hung turns"));
        }
        if !self.leaks.shutdown_finished {
            failures.push("shutdown did not finish".to_owned());
        }
        if self.leaks.actors > 0 || self.leaks.tasks > 0 {
            failures.push(format!(
                "{} and {} alive after shutdown",
                count(self.leaks.actors, "actor", "actors"),
                count(self.leaks.tasks, "task", "tasks")
            ));
        }
        if self.agent_errors > 0 {
            failures.push(count(self.agent_errors, "agent error", "agent errors"));
        }
        if let Some(error) = &self.acks_error {
            failures.push(format!("--acks {error}"));
        }
        if let Some(cluster) = &self.cluster {
            failures.extend(cluster.failures());
        }
        failures
    }

    /// Sets `ok` from [`Summary::failures`].
    pub fn settle(mut self) -> Self {
        self.ok = self.failures().is_empty();
        self
    }

    /// The summary a person reads.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let t = &self.tally;
        let _ = writeln!(
            out,
            "rein stress: {} × {}, seed {}, {} store, {}",
            count(self.agents, "agent", "agents"),
            count(self.turns_per_agent, "turn", "turns"),
            self.seed,
            self.store,
            seconds(self.elapsed_ms)
        );
        let mut turns = format!("turns       {} ended:", t.turns_ended());
        let mut parts = Vec::new();
        for (kind, n) in &t.turns {
            let detail = match kind.as_str() {
                "error" => counts(&t.errors_by_code),
                "aborted" => counts(&t.aborted_by_cause),
                _ => String::new(),
            };
            parts.push(if detail.is_empty() {
                format!("{kind} {n}")
            } else {
                format!("{kind} {n} ({detail})")
            });
        }
        let _ =
            write!(turns, " {}", if parts.is_empty() { "none".into() } else { parts.join(", ") });
        let _ = writeln!(out, "{turns}");
        let _ = writeln!(out, "retries     {}", or_none(counts(&t.retries_by_plugin)));
        if t.tool_calls > 0 {
            let calls = t.tool_calls;
            let _ = writeln!(out, "tools       {calls} calls, {} answered isError", t.tool_errors);
        }
        let c = &self.cancellations;
        let _ = writeln!(
            out,
            "cancels     {} requested, {} landed; latency to a durable turn/end: p50 {} ms, p99 {} ms, max {} ms ({} measured)",
            c.requested,
            c.landed,
            c.latency.p50_ms,
            c.latency.p99_ms,
            c.latency.max_ms,
            c.latency.samples
        );
        route_lines(&mut out, &self.route);
        let p = &self.plugins;
        let _ = writeln!(
            out,
            "plugins     {} asked, {} disposed, {} registered again, {} removed by supervision, {} ({}), {} injected",
            count(p.dispose_requests, "disposal", "disposals"),
            p.disposed,
            p.registered,
            p.removed,
            count(t.crashes_by_plugin.values().sum::<u64>(), "restart", "restarts"),
            or_none(counts(&t.crashes_by_plugin)),
            count(p.crashes_injected, "crash", "crashes")
        );
        let _ = writeln!(
            out,
            "settings    {} asked: {}; {} in the logs",
            count(p.config_requests, "change", "changes"),
            or_none(counts(&p.config)),
            count(t.config_changed, "config/changed event", "config/changed events")
        );
        let _ = writeln!(
            out,
            "invariants  {}, {}: {}{}",
            count(t.logs, "log", "logs"),
            count(t.events, "event", "events"),
            count(t.violations, "violation", "violations"),
            match self.other_logs {
                0 => String::new(),
                n => format!(
                    " ({} in the store not judged: this run did not open them)",
                    count(n, "other log", "other logs")
                ),
            }
        );
        if self.resumed > 0 {
            let sessions = count(self.resumed, "session", "sessions");
            let _ = writeln!(out, "resumed     {sessions} a crash had left with an open turn");
        }
        for example in &t.violation_examples {
            let _ = writeln!(out, "  {example}");
        }
        if self.agent_errors > 0 {
            let errors = count(self.agent_errors, "agent error", "agent errors");
            let _ = writeln!(out, "errors      {errors}");
            for example in &self.agent_error_examples {
                let _ = writeln!(out, "  {example}");
            }
        }
        let _ = writeln!(
            out,
            "hung        {} (deadline {})",
            count(self.hung, "turn", "turns"),
            seconds(self.hang_deadline_ms)
        );
        for hung in &self.hung_turns {
            let _ = writeln!(out, "  {} turn {}", hung.session, hung.turn);
        }
        let l = &self.leaks;
        let tree: Vec<String> = l.tree.iter().map(|(k, n)| format!("{k} {n}")).collect();
        match &self.cluster {
            // The runtimes are the nodes': their stop is theirs (`cluster` lines).
            Some(cluster) => out.push_str(&cluster.text()),
            None => {
                let _ = writeln!(
                    out,
                    "shutdown    {}{}, {} alive{}",
                    if l.shutdown_finished { "" } else { "did not finish; " },
                    count(l.actors, "actor", "actors"),
                    count(l.tasks, "task", "tasks"),
                    if tree.is_empty() { String::new() } else { format!(" ({})", tree.join(", ")) }
                );
            }
        }
        if let Some(kib) = self.peak_rss_kib {
            let _ = writeln!(out, "memory      peak RSS {:.1} MiB", kib as f64 / 1024.0);
        }
        if let Some(logs) = &self.logs {
            let _ = writeln!(out, "logs        {logs}");
        }
        let failures = self.failures();
        if failures.is_empty() {
            let _ = writeln!(out, "ok");
        } else {
            let _ = writeln!(out, "FAILED: {}", failures.join("; "));
        }
        out
    }
}

/// The route's lines: always what it was sent and what failed turns cost; the breaker's with
/// route health; the outage's with one.
fn route_lines(out: &mut String, r: &RouteSummary) {
    let health = if r.health_on() { "route health on" } else { "route health off" };
    let amplification = match r.retry_amplification {
        Some(per) => format!(": {per:.2} per failed turn (retry amplification)"),
        None => String::new(),
    };
    let _ = writeln!(
        out,
        "route       {}, {health}: {}, {} sent, {} short-circuited, {} throttled; {} failed, {} for them{amplification}",
        r.name,
        count(r.attempts, "attempt", "attempts"),
        count(r.requests, "request", "requests"),
        r.short_circuited,
        count(r.throttled, "retry", "retries"),
        count(r.failed_turns, "turn", "turns"),
        count(r.requests_of_failed_turns, "request", "requests"),
    );
    if let Some(b) = &r.breaker {
        let mut when = Vec::new();
        if let Some(ms) = b.first_opened_ms {
            when.push(format!("first opened at {}", seconds(ms)));
        }
        if let Some(ms) = b.last_closed_ms {
            when.push(format!("last closed at {}", seconds(ms)));
        }
        let when = if when.is_empty() { String::new() } else { format!(" ({})", when.join(", ")) };
        let _ = writeln!(
            out,
            "breaker     opened {}, closed {}{when}; {} sent while open",
            count(b.opened, "time", "times"),
            count(b.closed, "time", "times"),
            count(r.requests_while_open.unwrap_or(0), "request", "requests"),
        );
    }
    if let Some(o) = &r.outage {
        let back = match r.recovery_ms {
            Some(ms) => format!("every attempt served again {} after it", seconds(ms)),
            None => "the route did not serve every attempt again before the run ended".to_owned(),
        };
        let _ = writeln!(
            out,
            "outage      {} from {} after the start: every request failed 503; {back}",
            seconds(o.ms),
            seconds(o.at_ms)
        );
    }
}

fn seconds(ms: u64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

fn counts(map: &BTreeMap<String, u64>) -> String {
    map.iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", ")
}

fn or_none(text: String) -> String {
    if text.is_empty() { "none".to_owned() } else { text }
}

/// The peak resident set size in KiB, from the text of `/proc/self/status` (`VmHWM: N kB`).
pub fn peak_rss_kib(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let mut words = line["VmHWM:".len()..].split_whitespace();
    let value: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") | None => Some(value),
        _ => None,
    }
}

/// The CPU time (user + system) in ms, from the text of `/proc/self/stat` (fields 14 and 15,
/// in clock ticks of 10 ms).
pub fn cpu_ms(stat: &str) -> Option<u64> {
    // The command name, in parentheses, may hold spaces: count the fields after it.
    let (_, after) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<u64>().ok();
    Some((ticks(11)? + ticks(12)?) * 10)
}

#[cfg(test)]
mod tests {
    use crate::runtime::event::{
        AgentIdle, ConfigChanged, LlmRetry, PluginCrashed, SessionStart, StepRef, TurnEnd,
        TurnStart, UserMessage,
    };
    use crate::runtime::failure::Failure;

    use super::*;

    #[test]
    fn errors_are_all_counted_and_the_first_listed_kept() {
        let told = |n: usize, from: usize| {
            let mut errors = Errors::default();
            (from..from + n).for_each(|i| errors.add(format!("e{i}")));
            errors
        };
        // (one agent's errors, another's, the count, the examples kept, the first kept)
        let listed = LISTED as u64;
        let cases: [(usize, usize, u64, usize, Option<&str>); 5] = [
            (0, 0, 0, 0, None),
            (3, 4, 7, 7, Some("e0")),
            (0, 2, 2, 2, Some("e100")),
            (LISTED + 2, 0, listed + 2, LISTED, Some("e0")),
            (6, 6, 12, LISTED, Some("e0")),
        ];
        for (a, b, count, kept, first) in cases {
            let mut all = told(a, 0);
            all.merge(&told(b, 100));
            assert_eq!((all.count, all.examples.len()), (count, kept), "{a} + {b}");
            assert_eq!(all.examples.first().map(String::as_str), first, "{a} + {b}");
        }
    }

    fn log(events: Vec<Event>) -> Vec<Envelope> {
        events
            .into_iter()
            .enumerate()
            .map(|(seq, event)| Envelope { seq: seq as u64, time: 0, event })
            .collect()
    }

    fn start() -> Event {
        Event::SessionStart(SessionStart { session: "s".into(), format: 1 })
    }

    /// A whole turn `turn` ending with `reason` (one step, no attempt: the checker allows it).
    fn turn(turn: u32, reason: TurnEndReason) -> Vec<Event> {
        vec![
            Event::UserMessage(UserMessage { text: "hi".into() }),
            Event::TurnStart(TurnStart { turn }),
            Event::StepStart(StepRef { turn, step: 1 }),
            Event::StepEnd(StepRef { turn, step: 1 }),
            Event::TurnEnd(TurnEnd { turn, reason }),
            Event::AgentIdle(AgentIdle {}),
        ]
    }

    fn failure(code: &str) -> Failure {
        Failure::new(code, "boom").unwrap()
    }

    fn map(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
        pairs.iter().map(|(k, n)| ((*k).to_owned(), *n)).collect()
    }

    #[test]
    fn the_tally_counts_outcomes_retries_crashes_and_changes() {
        let mut events = vec![start()];
        events.extend(turn(1, TurnEndReason::Completed));
        events.extend(turn(2, TurnEndReason::Error { failure: failure("SERVER") }));
        events.extend(turn(3, TurnEndReason::Aborted { cause: CancelCause::User }));
        events.extend(turn(4, TurnEndReason::Aborted { cause: CancelCause::Disposed }));
        events.extend(turn(5, TurnEndReason::Error { failure: failure("SERVER") }));
        events.extend(turn(6, TurnEndReason::Interrupted));
        events.push(Event::PluginCrashed(PluginCrashed {
            plugin: "flaky".into(),
            error: "x".into(),
            restarts: 1,
        }));
        events.push(Event::ConfigChanged(ConfigChanged {
            plugin: "auto-retry".into(),
            revision: 1,
            changed: vec![],
        }));
        let events = log(events);
        let mut tally = Tally::default();
        tally.add_log("s", &events);
        assert_eq!(tally.logs, 1);
        assert_eq!(tally.events, events.len() as u64);
        assert_eq!(
            tally.turns,
            map(&[("completed", 1), ("error", 2), ("aborted", 2), ("interrupted", 1)])
        );
        assert_eq!(tally.turns_ended(), 6);
        assert_eq!(tally.errors_by_code, map(&[("SERVER", 2)]));
        assert_eq!(tally.aborted_by_cause, map(&[("disposed", 1), ("user", 1)]));
        assert_eq!(tally.crashes_by_plugin, map(&[("flaky", 1)]));
        assert_eq!(tally.config_changed, 1);
        assert_eq!(tally.violations, 0, "{:?}", tally.violation_examples);
    }

    #[test]
    fn retries_are_counted_by_plugin_and_violations_are_named() {
        let retry = |plugin: &str| {
            Event::LlmRetry(LlmRetry {
                retry_id: "id".into(),
                turn: 1,
                step: 1,
                provider: "p".into(),
                plugin: plugin.into(),
                mode: "normal".into(),
                policy_key: "k".into(),
                retry: 1,
                max_retries: Some(2),
                delay_ms: 1.0,
                failure: failure("SERVER"),
            })
        };
        // Retries outside any turn break rules: each is a violation, and the open end too.
        let events = log(vec![
            start(),
            retry("llm-retry"),
            retry("auto-retry"),
            Event::TurnStart(TurnStart { turn: 1 }),
        ]);
        let mut tally = Tally::default();
        tally.add_log("agent-1", &events);
        tally.add_log("agent-2", &log(vec![start()]));
        assert_eq!(tally.retries_by_plugin, map(&[("auto-retry", 1), ("llm-retry", 1)]));
        assert_eq!(tally.logs, 2);
        assert!(tally.violations >= 3, "{:?}", tally.violation_examples);
        assert!(tally.violation_examples.iter().all(|v| v.starts_with("agent-1: ")));
        assert!(
            tally.violation_examples.iter().any(|v| v.contains("[turn-left-open]")),
            "a finished log may not leave a turn open: {:?}",
            tally.violation_examples
        );
    }

    #[test]
    fn latencies_give_percentiles_in_milliseconds() {
        // (samples in µs, p50, p99, max) — HDR buckets at 3 significant digits.
        let cases: [(Vec<u64>, f64, f64, f64); 4] = [
            (vec![], 0.0, 0.0, 0.0),
            (vec![1500], 1.5, 1.5, 1.5),
            ((1..=100).map(|ms| ms * 1000).collect(), 50.0, 99.0, 100.0),
            (vec![0, 0, 0, 250_000], 0.001, 250.0, 250.0),
        ];
        for (samples, p50, p99, max) in cases {
            let mut latencies = Latencies::default();
            for s in &samples {
                latencies.record(Duration::from_micros(*s));
            }
            let got = latencies.summary();
            assert_eq!(got.samples, samples.len() as u64);
            let near = |a: f64, b: f64| (a - b).abs() <= b * 0.001 + 1e-9;
            assert!(near(got.p50_ms, p50), "{samples:?}: p50 {got:?}");
            assert!(near(got.p99_ms, p99), "{samples:?}: p99 {got:?}");
            assert!(near(got.max_ms, max), "{samples:?}: max {got:?}");
        }
        // Beyond the histogram's hour: clamped, still counted.
        let mut long = Latencies::default();
        long.record(Duration::from_secs(7200));
        assert_eq!(long.summary().samples, 1);
        assert!(long.summary().max_ms >= 3_590_000.0, "{:?}", long.summary());
    }

    #[test]
    fn a_run_fails_on_violations_hangs_leaks_and_errors() {
        let clean = Summary {
            leaks: Leaks { shutdown_finished: true, ..Leaks::default() },
            ..Summary::default()
        };
        let cases: Vec<(Summary, Vec<&str>)> = vec![
            (clean.clone(), vec![]),
            (
                Summary { tally: Tally { violations: 2, ..Tally::default() }, ..clean.clone() },
                vec!["2 invariant violations"],
            ),
            (Summary { hung: 1, ..clean.clone() }, vec!["1 hung turn"]),
            (
                Summary {
                    leaks: Leaks { actors: 1, tasks: 3, ..clean.leaks.clone() },
                    ..clean.clone()
                },
                vec!["1 actor and 3 tasks alive after shutdown"],
            ),
            (
                Summary { leaks: Leaks { tasks: 1, ..clean.leaks.clone() }, ..clean.clone() },
                vec!["0 actors and 1 task alive after shutdown"],
            ),
            (Summary { leaks: Leaks::default(), ..clean.clone() }, vec!["shutdown did not finish"]),
            (Summary { agent_errors: 4, ..clean.clone() }, vec!["4 agent errors"]),
            (
                Summary { hung: 2, agent_errors: 1, ..clean.clone() },
                vec!["2 hung turns", "1 agent error"],
            ),
            (
                Summary { acks_error: Some("/dev/full: no space".into()), ..clean.clone() },
                vec!["--acks /dev/full: no space"],
            ),
            // Logs the run did not open are not its failures.
            (Summary { other_logs: 3, ..clean.clone() }, vec![]),
        ];
        for (summary, want) in cases {
            assert_eq!(summary.failures(), want);
            let settled = summary.settle();
            assert_eq!(settled.ok, want.is_empty());
            let text = settled.text();
            let last = text.lines().last().unwrap();
            if want.is_empty() {
                assert_eq!(last, "ok");
            } else {
                assert_eq!(last, format!("FAILED: {}", want.join("; ")));
            }
        }
    }

    #[test]
    fn the_text_names_every_figure() {
        let tally = Tally {
            turns: map(&[("completed", 7), ("error", 2), ("aborted", 1)]),
            errors_by_code: map(&[("SERVER", 2)]),
            aborted_by_cause: map(&[("user", 1)]),
            retries_by_plugin: map(&[("llm-retry", 5)]),
            ..Tally::default()
        };
        let summary = Summary {
            agents: 2,
            turns_per_agent: 5,
            seed: 9,
            store: "memory".into(),
            elapsed_ms: 1234,
            hang_deadline_ms: 30_000,
            tally,
            other_logs: 2,
            resumed: 3,
            cancellations: Cancellations {
                requested: 3,
                landed: 1,
                latency: LatencySummary { samples: 1, p50_ms: 1.5, p99_ms: 1.5, max_ms: 1.5 },
            },
            leaks: Leaks { shutdown_finished: true, ..Leaks::default() },
            peak_rss_kib: Some(2048),
            ..Summary::default()
        }
        .settle();
        let text = summary.text();
        for want in [
            "rein stress: 2 agents × 5 turns, seed 9, memory store, 1.2 s",
            "turns       10 ended: aborted 1 (user 1), completed 7, error 2 (SERVER 2)",
            "retries     llm-retry 5",
            "cancels     3 requested, 1 landed; latency to a durable turn/end: p50 1.5 ms, p99 1.5 ms, max 1.5 ms (1 measured)",
            "invariants  0 logs, 0 events: 0 violations (2 other logs in the store not judged: this run did not open them)",
            "hung        0 turns (deadline 30.0 s)",
            "shutdown    0 actors, 0 tasks alive",
            "memory      peak RSS 2.0 MiB",
            "resumed     3 sessions a crash had left with an open turn",
        ] {
            assert!(text.lines().any(|l| l == want), "missing {want:?} in\n{text}");
        }
        let json = serde_json::to_value(&summary).unwrap();
        assert_eq!(json["ok"], true);
        assert_eq!(json["tally"]["retriesByPlugin"]["llm-retry"], 5);
        assert_eq!(json["cancellations"]["latency"]["p99Ms"], 1.5);
        assert_eq!(json["peakRssKib"], 2048);
        assert_eq!(
            (json["otherLogs"].as_u64(), json["hangDeadlineMs"].as_u64()),
            (Some(2), Some(30_000))
        );
        assert_eq!(json["resumed"], 3);
        assert!(json.get("acksError").is_none());
        assert!(json.get("logs").is_none());
        let none = Summary { resumed: 0, ..summary }.text();
        assert!(!none.contains("resumed"), "no line when nothing was pending:\n{none}");
    }

    #[test]
    fn cpu_time_is_read_from_stat() {
        let cases = [
            ("4242 (rein) R 1 4242 1 0 -1 4194560 900 0 0 0 250 30 0 0 20 0 3 0", Some(2800)),
            ("7 (a (b) c) S 1 7 1 0 -1 0 0 0 0 0 1 2 0 0", Some(30)),
            ("7 (rein) S 1 7 1 0 -1 0 0 0 0 0 x 2", None),
            ("7 (rein) S 1", None),
            ("no parenthesis", None),
        ];
        for (stat, want) in cases {
            assert_eq!(cpu_ms(stat), want, "{stat:?}");
        }
    }

    #[test]
    fn peak_rss_is_read_from_vm_hwm() {
        let cases = [
            (
                "Name:\trein\nVmPeak:\t  9000 kB\nVmHWM:\t    5120 kB\nVmRSS:\t 4000 kB\n",
                Some(5120),
            ),
            ("VmHWM: 12 kB", Some(12)),
            ("VmHWM:\t7", Some(7)),
            ("VmRSS:\t4000 kB\n", None),
            ("VmHWM:\tlots kB\n", None),
            ("VmHWM:\t3 GB\n", None),
            ("", None),
        ];
        for (status, want) in cases {
            assert_eq!(peak_rss_kib(status), want, "{status:?}");
        }
    }
}
