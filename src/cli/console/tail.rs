//! What of a session's log can still change what the console shows, taken in as the log grows.
//!
//! A page following a session shows one article per turn; an article is final once its turn
//! ended, since nothing after a `turn/end` changes that turn's entries or panel. So [`Tail`]
//! keeps only what can still change — the user messages no turn has taken up yet, the open turn,
//! what followed it — and [`Tail::settle`] moves every turn that ended out of it, keeping count.
//! A stream then renders, per update, the articles of the tail only (`pages::tail`), and tells
//! the page how many articles before them it keeps ([`Tail::settled`]): the work per update
//! depends on the open turn, never on the log's length, and the page ends up with exactly the
//! markup of the whole log.
//!
//! The same counts make a sessions-list row ([`Tail::summary`]), so the list follows every log
//! at the same cost.
//!
//! Why this holds: the folds behind the markup reset at a turn's start — the transcript (`user
//! messages` wait in its queue for the next `turn/start`), the panels and what a session does
//! (`status`). So the tail, read on its own, gives what the whole log gives: the settled part
//! is cut right after a `turn/end` that closes the open turn (its number), keeping the user
//! messages written during that turn (queued for the next one); before a turn starts, only user
//! messages matter (`agent/idle`, `config/changed` between turns show nowhere). The table test
//! below feeds real logs in every batch size and compares with the whole log's markup.

use rein_runtime::event::{Envelope, Event};
use rein_runtime::panel::panels;

use super::status::{self, State, Summary};

/// A log taken in as it grows: the counts of what was settled, and the rest.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tail {
    /// Events taken in.
    seen: u64,
    /// Turns settled: ended, their articles final.
    settled: usize,
    /// Of those, how many have a panel (retried or failed).
    settled_panels: usize,
    /// What can still change what is shown, in log order.
    events: Vec<Envelope>,
    /// The first user message.
    title: Option<String>,
    /// Turns started.
    turns: usize,
    /// How the last ended turn ended, in words.
    last_ending: Option<String>,
    /// The time of the last event.
    last_time: Option<u64>,
}

impl Tail {
    /// The tail of a whole log (nothing settled yet).
    pub(crate) fn of(log: Vec<Envelope>) -> Self {
        let mut tail = Self::default();
        tail.extend(log);
        tail
    }

    /// Takes in `events`, the next ones of the log.
    pub(crate) fn extend(&mut self, events: impl IntoIterator<Item = Envelope>) {
        for envelope in events {
            match &envelope.event {
                Event::UserMessage(m) if self.title.is_none() => {
                    self.title = Some(status::title(&m.text));
                }
                Event::TurnStart(_) => self.turns += 1,
                Event::TurnEnd(end) => {
                    self.last_ending =
                        Some(rein_cli::html::conversation::ending(Some(&end.reason)).1);
                }
                _ => {}
            }
            self.seen += 1;
            self.last_time = Some(envelope.time);
            self.events.push(envelope);
        }
    }

    /// Moves every turn that ended out of the tail, as the module says.
    pub(crate) fn settle(&mut self) {
        if let Some((start, end)) = last_ended_turn(&self.events) {
            let mut done = std::mem::take(&mut self.events);
            let rest = done.split_off(end + 1);
            self.settled += done.iter().filter(|e| matches!(e.event, Event::TurnStart(_))).count();
            self.settled_panels += panels(&done).len();
            // Written while that turn ran, they wait for the next one.
            self.events = done.drain(start + 1..).filter(is_user_message).collect();
            self.events.extend(rest);
        }
        // Before a turn starts, only user messages show.
        let first_turn = self
            .events
            .iter()
            .position(|e| matches!(e.event, Event::TurnStart(_)))
            .unwrap_or(self.events.len());
        if !self.events[..first_turn].iter().all(is_user_message) {
            let turn = self.events.split_off(first_turn);
            self.events.retain(is_user_message);
            self.events.extend(turn);
        }
    }

    /// What can still change, in log order.
    pub(crate) fn events(&self) -> &[Envelope] {
        &self.events
    }

    /// How many turn articles before the tail's are final.
    pub(crate) fn settled(&self) -> usize {
        self.settled
    }

    /// How many events were taken in.
    pub(crate) fn seen(&self) -> u64 {
        self.seen
    }

    /// What the session is doing at the log's end.
    pub(crate) fn state(&self) -> State {
        status::state(&self.events)
    }

    /// The sessions-list row of session `id`.
    pub(crate) fn summary(&self, id: &str) -> Summary {
        Summary {
            id: id.to_owned(),
            title: self.title.clone(),
            turns: self.turns,
            state: self.state(),
            last_ending: self.last_ending.clone(),
            retried_or_failed: self.settled_panels + panels(&self.events).len(),
            last_time: self.last_time,
            error: None,
            node: None,
        }
    }
}

/// The last turn of `events` that ended: the indexes of its `turn/start` and of the `turn/end`
/// that closes it (same turn number, no other start between).
fn last_ended_turn(events: &[Envelope]) -> Option<(usize, usize)> {
    let mut open: Option<(usize, u32)> = None;
    let mut ended = None;
    for (i, envelope) in events.iter().enumerate() {
        match &envelope.event {
            Event::TurnStart(start) => open = Some((i, start.turn)),
            Event::TurnEnd(end) => {
                if let Some((start, _)) = open.filter(|(_, turn)| *turn == end.turn) {
                    ended = Some((start, i));
                    open = None;
                }
            }
            _ => {}
        }
    }
    ended
}

fn is_user_message(envelope: &Envelope) -> bool {
    matches!(envelope.event, Event::UserMessage(_))
}

#[cfg(test)]
mod tests {
    use rein_cli::scenario::Scenario;
    use serde_json::{Value, json};

    use super::*;
    use crate::cli::console::pages;

    /// A log from `(type, data)` pairs, `seq` from 0, a second apart.
    fn log(events: Vec<(&str, Value)>) -> Vec<Envelope> {
        events
            .into_iter()
            .enumerate()
            .map(|(seq, (kind, data))| {
                let line = json!({"seq": seq, "time": 1000 * seq, "type": kind, "data": data});
                serde_json::from_value(line).unwrap()
            })
            .collect()
    }

    /// Turn `n`: its prompt, an attempt streaming `answer`, its end (`reason`).
    fn turn(n: u32, answer: &str, reason: Value) -> Vec<(&'static str, Value)> {
        vec![
            ("user/message", json!({"text": format!("question {n}")})),
            ("turn/start", json!({"turn": n})),
            ("step/start", json!({"turn": n, "step": 1})),
            (
                "request/start",
                json!({"turn": n, "step": 1, "attempt": 1, "provider": "p", "model": "m"}),
            ),
            ("assistant/chunk", json!({"turn": n, "step": 1, "attempt": 1, "text": answer})),
            ("assistant/message", json!({"turn": n, "step": 1, "text": answer})),
            ("step/end", json!({"turn": n, "step": 1})),
            ("turn/end", json!({"turn": n, "reason": reason})),
            ("agent/idle", json!({})),
        ]
    }

    fn completed() -> Value {
        json!({"kind": "completed"})
    }

    /// The logs the fold is checked on: every scenario rein ships (run), and crafted ones —
    /// prompts queued while a turn runs, settings changed between turns, a turn that never
    /// ends, numbers that disagree.
    fn logs() -> Vec<(String, Vec<Envelope>)> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
        let mut logs = Vec::new();
        for dir in ["scenarios", "panels"] {
            let mut paths: Vec<_> = std::fs::read_dir(root.join(dir))
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect();
            paths.sort();
            for path in paths {
                let scenario = Scenario::from_json(&std::fs::read_to_string(&path).unwrap());
                let Ok(scenario) = scenario else { continue };
                if let Ok(run) = rein_cli::scenario::runner().run(&scenario) {
                    logs.push((path.display().to_string(), run.events));
                }
            }
        }
        assert!(logs.len() > 30, "the scenarios ran: {}", logs.len());
        let queued = {
            let mut events = vec![("session/start", json!({"session": "s", "format": 1}))];
            events.extend(turn(1, "one", completed()).into_iter().take(4));
            // Two prompts sent while turn 1 runs wait for turns 2 and 3.
            events.push(("user/message", json!({"text": "queued a"})));
            events.push(("user/message", json!({"text": "queued b"})));
            events.extend(turn(1, "one", completed()).into_iter().skip(4));
            events.push((
                "config/changed",
                json!({"plugin": "auto-retry", "revision": 1, "changed": ["enabled"]}),
            ));
            events.push(("turn/start", json!({"turn": 2})));
            events.push((
                "turn/end",
                json!({"turn": 2, "reason": {"kind": "aborted", "cause": {"kind": "user"}}}),
            ));
            events.extend(turn(3, "three", completed()).into_iter().skip(1));
            events.extend(turn(4, "four", completed()).into_iter().take(5));
            events
        };
        let broken = {
            let mut events = turn(1, "one", completed());
            events.truncate(4);
            // Turn 2 starts inside turn 1; an end with another number closes nothing.
            events.extend(turn(2, "two", completed()).into_iter().skip(1).take(4));
            events.push(("turn/end", json!({"turn": 7, "reason": {"kind": "completed"}})));
            // For the panels turn 2 still runs: this failure goes to its panel.
            let failure = json!({"code": "SERVER", "message": "late failure"});
            let at =
                json!({"turn": 2, "step": 1, "attempt": 1, "provider": "p", "failure": failure});
            events.push(("request/error", at));
            events.push(("user/message", json!({"text": "late"})));
            events.extend(turn(3, "three", completed()));
            events
        };
        logs.push(("queued".into(), log(queued)));
        logs.push(("broken".into(), log(broken)));
        logs
    }

    /// The page after an update: the first `kept` turn articles of `page`, then `tail`.
    fn apply(page: &str, kept: usize, tail: &str) -> String {
        let starts: Vec<usize> =
            page.match_indices("<article class=\"turn").map(|(at, _)| at).collect();
        let end = if kept == 0 { 0 } else { starts.get(kept).copied().unwrap_or(page.len()) };
        format!("{}{tail}", &page[..end])
    }

    #[test]
    fn a_log_taken_in_batch_by_batch_shows_what_the_whole_log_shows() {
        for (name, events) in logs() {
            for batch in [1, 2, 3, 5, 8, 64] {
                let mut tail = Tail::default();
                let mut page = String::new();
                for (i, chunk) in events.chunks(batch).enumerate() {
                    tail.extend(chunk.to_vec());
                    let upto = (i * batch + chunk.len()).min(events.len());
                    let whole = Tail::of(events[..upto].to_vec());
                    page = apply(&page, tail.settled(), &pages::tail(&tail).into_string());
                    assert_eq!(
                        page,
                        pages::tail(&whole).into_string(),
                        "{name}, {batch} at {upto}"
                    );
                    assert_eq!(tail.state(), whole.state(), "{name}, {batch} at {upto}");
                    tail.settle();
                    assert_eq!(tail.summary("s"), whole.summary("s"), "{name}, {batch} at {upto}");
                    assert_eq!(tail.seen(), upto as u64);
                }
            }
        }
    }

    #[test]
    fn the_work_per_update_does_not_grow_with_the_log() {
        // The same new turn after 10 turns and after 2,000.
        let update_after = |turns: u32| {
            let mut events = vec![("session/start", json!({"session": "s", "format": 1}))];
            for n in 1..=turns {
                events.extend(turn(n, &"an answer of some length. ".repeat(20), completed()));
            }
            let mut new = turn(turns + 1, "the new answer", completed());
            let end = new.split_off(5);
            let all = log(events.into_iter().chain(new).chain(end).collect());
            let (history, next) = all.split_at(all.len() - 9);
            let mut tail = Tail::of(history.to_vec());
            let first = pages::tail(&tail).into_string().len();
            tail.settle();
            let mut sizes = Vec::new();
            for event in next {
                tail.extend([event.clone()]);
                sizes.push((tail.events().len(), pages::tail(&tail).into_string().len()));
                tail.settle();
            }
            (first, sizes)
        };
        let (short_history, short) = update_after(10);
        let (long_history, long) = update_after(2000);
        assert!(long_history > 150 * short_history / 2, "{long_history} vs {short_history}");
        for ((short_events, short_bytes), (long_events, long_bytes)) in short.iter().zip(&long) {
            assert_eq!(short_events, long_events, "the tail holds the same events");
            // The turn's number has more digits (11 against 2001) in its id and heading.
            assert!(long_bytes - short_bytes <= 4 * 3, "{short:?} vs {long:?}");
        }
        assert!(long.iter().all(|(events, _)| *events <= 9), "{long:?}");
    }

    #[test]
    fn a_row_sums_a_session_up() {
        let long = format!("first\n  line {}", "x".repeat(100));
        let failed = json!({"kind": "error", "failure": {"code": "RATE_LIMIT", "message": "slow"}});
        let mut events = vec![("session/start", json!({"session": "s", "format": 1}))];
        let mut first = turn(1, "", failed);
        first[0] = ("user/message", json!({"text": long}));
        first.retain(|(kind, _)| !kind.starts_with("assistant/"));
        first.insert(4, ("request/error", json!({"turn": 1, "step": 1, "attempt": 1, "provider": "p", "failure": {"code": "RATE_LIMIT", "message": "slow"}})));
        events.extend(first);
        events.extend(turn(2, "two", completed()).into_iter().take(2));
        let events = log(events);
        let mut tail = Tail::of(events.clone());
        tail.settle();
        let row = tail.summary("s1");
        assert_eq!(row, Tail::of(events).summary("s1"), "settled or not");
        let title = row.title.clone().unwrap();
        assert_eq!(title.chars().count(), status::TITLE_CHARS);
        assert!(title.starts_with("first line xxx") && title.ends_with('…'), "{title}");
        assert_eq!(
            (row.turns, row.state.clone(), row.last_ending.as_deref(), row.retried_or_failed),
            (2, State::Running { turn: 2 }, Some("failed: RATE_LIMIT"), 1)
        );
        assert_eq!(row.last_time, Some(10_000));
        let empty = Tail::default().summary("s2");
        assert_eq!((empty.title, empty.turns, empty.last_time), (None, 0, None));
        assert_eq!(
            serde_json::to_value(&row).unwrap()["state"],
            json!({"state": "running", "turn": 2})
        );
    }
}
