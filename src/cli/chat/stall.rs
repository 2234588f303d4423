//! What `rein chat` shows while an attempt produces nothing: a waiting line, on a terminal.
//!
//! A model that thinks before its first word, an overloaded server, a stream that stalls: the
//! chat would look frozen. Once the running attempt has produced nothing (no chunk since its
//! `request/start` or its last chunk) for [`QUIET`], a line on stderr says so and counts the
//! seconds, with the limit after which the route's dead-air watchdog fails the attempt
//! `TIMEOUT`: `waiting: nothing for 12 s (the watchdog gives up at 5 min)`. The next event, or
//! any output, replaces it. Only on a terminal (the line is rewritten in place); piped, stderr
//! gets none.
//!
//! [`Stall`] decides what line, and when it next changes, from the turn's events and the clock;
//! the console draws it.

use std::time::Duration;

use rein_runtime::event::Event;
use tokio::time::Instant;

/// How long an attempt may produce nothing before the waiting line appears.
pub(crate) const QUIET: Duration = Duration::from_secs(3);

/// The waiting line of the running attempt.
#[derive(Debug, Clone)]
pub(crate) struct Stall {
    /// Each route's dead-air watchdog, by route name.
    watchdogs: Vec<(String, Duration)>,
    /// The running attempt: when it last produced something, and its route's watchdog.
    quiet: Option<(Instant, Option<Duration>)>,
}

impl Stall {
    /// No attempt running yet; `watchdogs` by route name.
    pub(crate) fn new(watchdogs: Vec<(String, Duration)>) -> Self {
        Self { watchdogs, quiet: None }
    }

    /// Takes `event`, committed at `now`: an attempt starts the clock, its chunks restart it,
    /// its end stops it.
    pub(crate) fn on(&mut self, event: &Event, now: Instant) {
        match event {
            Event::RequestStart(request) => {
                let watchdog = self
                    .watchdogs
                    .iter()
                    .find(|(route, _)| *route == request.provider)
                    .map(|(_, limit)| *limit);
                self.quiet = Some((now, watchdog));
            }
            Event::AssistantChunk(_) => {
                if let Some((since, _)) = &mut self.quiet {
                    *since = now;
                }
            }
            Event::RequestError(_) | Event::AssistantMessage(_) | Event::TurnEnd(_) => {
                self.quiet = None;
            }
            _ => {}
        }
    }

    /// The line to show at `now`: `None` while no attempt runs or it was quiet for less than
    /// [`QUIET`].
    pub(crate) fn line(&self, now: Instant) -> Option<String> {
        let (since, watchdog) = self.quiet?;
        let quiet = now.saturating_duration_since(since);
        if quiet < QUIET {
            return None;
        }
        let mut line = format!("waiting: nothing for {}", span(quiet));
        if let Some(limit) = watchdog {
            line.push_str(&format!(" (the watchdog gives up at {})", span(limit)));
        }
        Some(line)
    }

    /// When [`Stall::line`] next changes after `now` (it appears, or its seconds tick); `None`
    /// while no attempt runs.
    pub(crate) fn next_change(&self, now: Instant) -> Option<Instant> {
        let (since, _) = self.quiet?;
        let quiet = now.saturating_duration_since(since);
        Some(match quiet < QUIET {
            true => since + QUIET,
            false => since + Duration::from_secs(quiet.as_secs() + 1),
        })
    }
}

/// A duration as the line shows it: whole seconds under a minute (`12 s`), else minutes and
/// seconds (`5 min`, `1 min 05 s`).
fn span(duration: Duration) -> String {
    let secs = duration.as_secs();
    match (secs / 60, secs % 60) {
        (0, s) => format!("{s} s"),
        (m, 0) => format!("{m} min"),
        (m, s) => format!("{m} min {s:02} s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rein_runtime::event::{AssistantChunk, RequestError, RequestStart};
    use rein_runtime::failure::Failure;

    fn start(provider: &str, attempt: u32) -> Event {
        Event::RequestStart(RequestStart {
            turn: 1,
            step: 1,
            attempt,
            provider: provider.into(),
            model: "m".into(),
        })
    }

    fn chunk() -> Event {
        Event::AssistantChunk(AssistantChunk { turn: 1, step: 1, attempt: 1, text: "x".into() })
    }

    fn failed() -> Event {
        let failure = Failure::new("TIMEOUT", "silence").unwrap();
        Event::RequestError(RequestError {
            turn: 1,
            step: 1,
            attempt: 1,
            provider: "deepseek".into(),
            failure,
        })
    }

    fn stall() -> Stall {
        Stall::new(vec![
            ("deepseek".into(), Duration::from_secs(300)),
            ("openai:small".into(), Duration::from_secs(90)),
        ])
    }

    /// Advances the paused clock to `at_ms` from `zero`.
    async fn at(zero: Instant, at_ms: u64) -> Instant {
        tokio::time::advance((zero + Duration::from_millis(at_ms)) - Instant::now()).await;
        Instant::now()
    }

    #[tokio::test(start_paused = true)]
    async fn the_line_appears_after_three_quiet_seconds_counts_and_ends_with_the_attempt() {
        let zero = Instant::now();
        let mut stall = stall();
        assert_eq!((stall.line(zero), stall.next_change(zero)), (None, None), "no attempt yet");

        stall.on(&start("deepseek", 1), at(zero, 0).await);
        let secs = |s: u64| zero + Duration::from_secs(s);
        let waiting =
            |s: &str| Some(format!("waiting: nothing for {s} (the watchdog gives up at 5 min)"));
        // (time, line, next change)
        let cases: [(u64, Option<String>, Option<Instant>); 5] = [
            (0, None, Some(secs(3))),
            (2_999, None, Some(secs(3))),
            (3_000, waiting("3 s"), Some(secs(4))),
            (3_500, waiting("3 s"), Some(secs(4))),
            (65_000, waiting("1 min 05 s"), Some(secs(66))),
        ];
        for (ms, line, next) in cases {
            let now = at(zero, ms).await;
            assert_eq!((stall.line(now), stall.next_change(now)), (line, next), "at {ms} ms");
        }

        // A chunk restarts the count; the attempt's failure ends it.
        stall.on(&chunk(), at(zero, 70_000).await);
        assert_eq!(stall.line(at(zero, 72_999).await), None);
        assert_eq!(stall.line(at(zero, 73_000).await), waiting("3 s"));
        stall.on(&failed(), at(zero, 80_000).await);
        assert_eq!((stall.line(Instant::now()), stall.next_change(Instant::now())), (None, None));
    }

    #[tokio::test(start_paused = true)]
    async fn each_route_names_its_own_watchdog_or_none() {
        let zero = Instant::now();
        let mut stall = stall();
        stall.on(&start("openai:small", 2), zero);
        let now = at(zero, 10_000).await;
        assert_eq!(
            stall.line(now).as_deref(),
            Some("waiting: nothing for 10 s (the watchdog gives up at 1 min 30 s)")
        );
        stall.on(&start("unknown", 3), now);
        assert_eq!(
            stall.line(at(zero, 14_000).await).as_deref(),
            Some("waiting: nothing for 4 s"),
            "a route without a known watchdog"
        );
    }

    #[test]
    fn durations_read_as_a_person_writes_them() {
        for (secs, want) in
            [(0, "0 s"), (59, "59 s"), (60, "1 min"), (65, "1 min 05 s"), (300, "5 min")]
        {
            assert_eq!(span(Duration::from_secs(secs)), want);
        }
    }
}
