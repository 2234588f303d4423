//! The terminal text of turn-tail panels (`rein show`, `rein chat`, the examples): a log's panels,
//! collapsed to their summary line or expanded to every line, with ANSI styles that the caller's
//! stream keeps or strips (print through `anstream` to strip them where colour is off).
//!
//! Format (one log):
//!
//! ```text
//! run.jsonl: session s1 · 3 turns, 1 retried or failed
//! ▾ turn 2 · Retried 1 time this turn · recovered
//!     harness · turn 2·step 1 · mock · failed RATE_LIMIT · HTTP 429 · request r-1
//!       slow down
//!     llm-retry · attempt 1/2 · waited 500 ms · turn 2·step 1 · mock · answered
//! ```
//!
//! A provider's text (a failure's message, what an attempt streamed, a crash's error) is printed
//! verbatim, one indented line per line of it, except for control characters, which are written
//! as escapes (`\u{1b}`): text from a provider must not be able to drive the terminal.

use std::fmt::Write as _;

use anstyle::{AnsiColor, Style};
use rein_runtime::event::Envelope;
use rein_runtime::failure::Failure;
use rein_runtime::panel::{
    Attempt, AttemptEnd, Ending, Line, Origin, TurnPanel, format_ms, panels,
};
use rein_runtime::plural::count;

const BOLD: Style = Style::new().bold();
const DIM: Style = Style::new().dimmed();
const RED: Style = AnsiColor::Red.on_default();
const GREEN: Style = AnsiColor::Green.on_default();
const YELLOW: Style = AnsiColor::Yellow.on_default();
const CYAN: Style = AnsiColor::Cyan.on_default();

/// The text for the log `name`: a header line, then one panel per turn that retried or failed.
pub fn render(name: &str, log: &[Envelope], expand: bool) -> String {
    let panels = panels(log);
    let turns = log.iter().filter(|e| e.kind() == "turn/start").count();
    let session = log.iter().find_map(|e| match &e.event {
        rein_runtime::event::Event::SessionStart(s) => Some(s.session.as_str()),
        _ => None,
    });
    let mut out = String::new();
    let _ = write!(out, "{BOLD}{name}{BOLD:#}: ");
    if let Some(session) = session {
        let _ = write!(out, "session {session} · ");
    }
    let _ = match panels.len() {
        0 => writeln!(out, "{}, none retried or failed", count(turns, "turn", "turns")),
        n => writeln!(out, "{}, {n} retried or failed", count(turns, "turn", "turns")),
    };
    for panel in &panels {
        out.push_str(&self::panel(panel, expand));
    }
    out
}

/// One panel: its summary line, then (when `expand`) every line of it. `rein chat` prints the
/// panel of a turn that retried or failed this way.
pub fn panel(panel: &TurnPanel, expand: bool) -> String {
    let mut out = String::new();
    summary(&mut out, panel, expand);
    if expand {
        for line in &panel.lines {
            self::line(&mut out, line);
        }
    }
    out
}

fn summary(out: &mut String, panel: &TurnPanel, expand: bool) {
    let marker = if expand { '▾' } else { '▸' };
    let style = ending_style(&panel.ending);
    let (turn, head, tail) = (panel.turn, panel.head(), panel.tail());
    let _ = writeln!(out, "{marker} {BOLD}turn {turn}{BOLD:#} · {head} · {style}{tail}{style:#}");
}

fn ending_style(ending: &Ending) -> Style {
    match ending {
        Ending::Recovered => GREEN,
        Ending::Failed(_) => RED,
        _ => YELLOW,
    }
}

fn line(out: &mut String, line: &Line) {
    match line {
        Line::Attempt(attempt) => self::attempt(out, attempt),
        Line::NotStarted(retry) => {
            let _ = writeln!(
                out,
                "    {CYAN}{}{CYAN:#} · {} · wait {} · {DIM}turn {}·step {}{DIM:#} · {} · \
                 {YELLOW}never started{YELLOW:#} (retrying {})",
                retry.plugin,
                retry.budget(),
                retry.wait(),
                retry.turn,
                retry.step,
                retry.provider,
                retry.code,
            );
        }
        Line::Waiting(retry) => {
            let _ = writeln!(
                out,
                "    {CYAN}{}{CYAN:#} · {} · wait {} · {DIM}turn {}·step {}{DIM:#} · {} · \
                 {YELLOW}waiting{YELLOW:#} (retrying {})",
                retry.plugin,
                retry.budget(),
                retry.wait(),
                retry.turn,
                retry.step,
                retry.provider,
                retry.code,
            );
        }
        Line::RouteSwitched(r) => {
            let _ = writeln!(
                out,
                "    {CYAN}route switched{CYAN:#} · {DIM}turn {}·step {}{DIM:#} · {} → {} · {} · {}",
                r.turn, r.step, r.from, r.to, r.code, r.reason
            );
        }
        Line::Compacted(c) => {
            let _ = writeln!(
                out,
                "    {CYAN}context compacted{CYAN:#} · {DIM}turn {}·step {}{DIM:#} · removed {}, \
                 kept {}",
                c.turn,
                c.step,
                count(c.removed.len(), "event", "events"),
                c.kept
            );
        }
        Line::PluginCrashed(p) => {
            let _ = writeln!(
                out,
                "    {RED}plugin crashed{RED:#} · {} · restart {}",
                p.plugin, p.restarts
            );
            verbatim(out, 6, &p.error);
        }
        Line::ConfigChanged(c) => {
            let _ = writeln!(
                out,
                "    {CYAN}settings changed{CYAN:#} · {} · revision {} · {}",
                c.plugin,
                c.revision,
                c.changed.join(", ")
            );
        }
        Line::Throttled(t) => {
            let _ = writeln!(
                out,
                "    {YELLOW}retry throttled{YELLOW:#} · {} · {DIM}turn {}·step {}{DIM:#} · {} · {}: \
                 the route's retry budget is spent",
                t.plugin, t.turn, t.step, t.provider, t.code
            );
        }
        Line::TurnFailed(failure) => {
            let _ = write!(out, "    {RED}turn failed{RED:#}");
            failure_fields(out, failure);
            out.push('\n');
            verbatim(out, 6, failure.message());
        }
        other => {
            let _ = writeln!(out, "    {other:?}");
        }
    }
}

fn attempt(out: &mut String, attempt: &Attempt) {
    let origin = attempt.origin.label();
    let _ = match &attempt.origin {
        Origin::Harness => write!(out, "    {DIM}{origin}{DIM:#}"),
        _ => write!(out, "    {CYAN}{origin}{CYAN:#}"),
    };
    if let Some(retry) = attempt.origin.retry() {
        let _ = write!(out, " · {} · waited {}", retry.budget(), format_ms(retry.delay_ms));
    }
    let _ = write!(
        out,
        " · {DIM}turn {}·step {}{DIM:#} · {}",
        attempt.turn, attempt.step, attempt.provider
    );
    if attempt.resumed {
        let _ = write!(out, " · {YELLOW}{}{YELLOW:#}", Attempt::RESUMED);
    }
    match &attempt.outcome {
        AttemptEnd::Failed(failure) => {
            failure_fields(out, failure);
            if attempt.short_circuited() {
                let _ = write!(out, " · {YELLOW}{}{YELLOW:#}", Attempt::SHORT_CIRCUITED);
            }
        }
        AttemptEnd::Answered => {
            let _ = write!(out, " · {GREEN}answered{GREEN:#}");
        }
        other => {
            let _ = write!(out, " · {YELLOW}{}{YELLOW:#}", other.kind());
        }
    }
    out.push('\n');
    if let Some(failure) = attempt.failure() {
        verbatim(out, 6, failure.message());
    }
    if attempt.outcome != AttemptEnd::Answered && !attempt.streamed.is_empty() {
        let _ = writeln!(out, "      {DIM}streamed before it ended:{DIM:#}");
        verbatim(out, 8, &attempt.streamed);
    }
}

/// ` · failed CODE · HTTP 503 · retry-after 2000 ms · request r-1`
fn failure_fields(out: &mut String, failure: &Failure) {
    let _ = write!(out, " · failed {RED}{BOLD}{}{BOLD:#}{RED:#}", failure.code());
    if let Some(status) = failure.status() {
        let _ = write!(out, " · HTTP {status}");
    }
    if let Some(ms) = failure.provider_retry_after_ms() {
        let _ = write!(out, " · retry-after {}", format_ms(ms));
    }
    if let Some(id) = failure.request_id() {
        let _ = write!(out, " · {DIM}request {}{DIM:#}", escape(id));
    }
}

/// A provider's text, one line per line indented by `indent` spaces, control characters escaped.
fn verbatim(out: &mut String, indent: usize, text: &str) {
    for line in text.split('\n') {
        let _ = writeln!(out, "{:indent$}{}", "", escape(line));
    }
}

/// `text` with every control character but tab written as a Rust-style escape (`\u{1b}`).
pub fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() && c != '\t' {
            let _ = write!(escaped, "\\u{{{:x}}}", u32::from(c));
        } else {
            escaped.push(c);
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        let cases = [
            ("plain <b>&</b>  ", "plain <b>&</b>  "),
            ("\u{1b}[2J wipe", "\\u{1b}[2J wipe"),
            ("bell\u{7}\tand tab", "bell\\u{7}\tand tab"),
            ("cr\r", "cr\\u{d}"),
            ("c1 \u{9b}", "c1 \\u{9b}"),
            ("ünïcödé ✓", "ünïcödé ✓"),
        ];
        for (text, want) in cases {
            assert_eq!(escape(text), want, "{text:?}");
        }
    }

    #[test]
    fn the_attempt_after_a_restart_says_it_resumed() {
        let attempt = |resumed| Attempt {
            turn: 1,
            step: 1,
            attempt: 2,
            provider: "mock".into(),
            model: "m".into(),
            time: 0,
            origin: Origin::Harness,
            outcome: AttemptEnd::Answered,
            streamed: String::new(),
            resumed,
        };
        let mut out = String::new();
        self::attempt(&mut out, &attempt(true));
        assert!(out.contains("resumed after a restart"), "{out}");
        let mut out = String::new();
        self::attempt(&mut out, &attempt(false));
        assert!(!out.contains("resumed"), "{out}");
    }

    /// `text` without its styles (`ESC [ … m`).
    fn plain(text: &str) -> String {
        let mut out = String::new();
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                chars.by_ref().find(|c| *c == 'm');
            } else {
                out.push(c);
            }
        }
        out
    }

    #[test]
    fn a_short_circuited_attempt_and_a_throttled_retry_are_named() {
        let refused = Failure::internal(
            rein_runtime::failure::CIRCUIT_OPEN,
            "route \"main\" is open (circuit breaker) until 5000 ms: no request was sent",
        );
        let attempt = Attempt {
            turn: 1,
            step: 1,
            attempt: 1,
            provider: "main".into(),
            model: "m".into(),
            time: 0,
            origin: Origin::Harness,
            outcome: AttemptEnd::Failed(refused),
            streamed: String::new(),
            resumed: false,
        };
        let mut out = String::new();
        self::attempt(&mut out, &attempt);
        let out = plain(&out);
        assert!(
            out.starts_with(
                "    harness · turn 1·step 1 · main · failed CIRCUIT_OPEN · short-circuited: the \
                 route's breaker is open, no request was sent\n"
            ),
            "{out}"
        );
        let mut out = String::new();
        let throttled = rein_runtime::event::RetryThrottled {
            turn: 1,
            step: 2,
            provider: "main".into(),
            plugin: "auto-retry".into(),
            code: "SERVER".into(),
        };
        line(&mut out, &Line::Throttled(throttled));
        assert_eq!(
            plain(&out),
            "    retry throttled · auto-retry · turn 1·step 2 · main · SERVER: the route's retry \
             budget is spent\n"
        );
    }

    #[test]
    fn a_message_keeps_its_lines_each_indented() {
        let mut out = String::new();
        verbatim(&mut out, 6, "one\n  two\n");
        assert_eq!(out, "      one\n        two\n      \n");
    }
}
