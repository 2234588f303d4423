//! One agent of `rein stress --nodes`: its session's turns, one after another, each prompted
//! through the API of a node (most often one that does not serve the session: forwarded),
//! cancelled through that node at the moment its plan says, and followed to its `turn/end`
//! whatever happens to the node on the way.
//!
//! # Following a turn through faults
//!
//! A turn's stream (`POST /api/sessions/{id}/turns`) carries its events as they are committed,
//! each one acknowledged to the run. When the stream ends without the turn's end:
//!
//! - an error before any event (`started: false`, or a refusal before the stream) means the
//!   prompt did not start a turn: it is sent again;
//! - a stream cut after the turn started (its node was killed, or lost the session to another
//!   node) is followed on from the last event received, through any node up
//!   (`GET /api/sessions/{id}/turns/{turn}?from=SEQ`): the node that took the session over
//!   resumes the turn, and its events are read from the log;
//! - a stream cut before any event leaves the prompt's fate unknown (its node may have
//!   forwarded it, and the serving node run it): the run looks for the prompt's text in the log
//!   until it appears (then follows its turn) or until [`locate_for`] went by (then it sends the
//!   prompt again, with a new text; the first may still run later, an extra turn).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::Method;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::choice::{self, Pick};
use super::faults::Draws;
use super::http::{Failed, Http, Lines};
use super::members::Members;
use crate::runtime::event::{Envelope, Event, TurnEndReason};
use crate::stress::acks::AckSender;
use crate::stress::agent::{Watch, session_id};
use crate::stress::chaos::Request;
use crate::stress::plan::{self, Rates, StressRng};
use crate::stress::progress::Progress;
use crate::stress::summary::{Errors, LISTED};

/// The longest wait between two tries of a request.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// How long a prompt whose node went away before answering is looked for in the log before it
/// is sent again: three leases (its partition taken over) and 5 s.
pub(crate) fn locate_for(lease: Duration) -> Duration {
    lease * 3 + Duration::from_secs(5)
}

/// What every agent shares.
pub(crate) struct Shared {
    pub(crate) http: Http,
    pub(crate) members: Arc<Members>,
    pub(crate) seed: u64,
    pub(crate) turns: u32,
    pub(crate) rates: Rates,
    pub(crate) cancel_window: Duration,
    pub(crate) lease: Duration,
    pub(crate) progress: Progress,
    pub(crate) watch: Watch,
    pub(crate) faults: Draws,
    pub(crate) acks: Option<AckSender>,
}

/// Cancellations of one kind.
#[derive(Debug, Default)]
pub(crate) struct Cancels {
    pub(crate) requested: u64,
    pub(crate) landed: u64,
    pub(crate) latencies: Vec<Duration>,
}

/// What one agent saw and measured.
#[derive(Debug, Default)]
pub(crate) struct AgentReport {
    /// Its session.
    pub(crate) session: String,
    /// Every event a node acknowledged to it, by `seq`.
    pub(crate) acked: BTreeMap<u64, Envelope>,
    /// Two different events acknowledged at one `seq`, in words.
    pub(crate) conflicts: Vec<String>,
    pub(crate) forwarded: u64,
    pub(crate) local: u64,
    pub(crate) refused_again: u64,
    pub(crate) found: u64,
    pub(crate) lost_again: u64,
    pub(crate) followed: u64,
    pub(crate) local_cancels: Cancels,
    pub(crate) cross_cancels: Cancels,
    /// Errors from the runtime (not counting those after the run was stopped).
    pub(crate) errors: Errors,
}

impl AgentReport {
    /// The report of an agent whose task failed.
    pub(crate) fn failed(message: String) -> Self {
        let mut report = Self::default();
        report.error(message);
        report
    }

    fn error(&mut self, message: String) {
        self.errors.add(message);
    }
}

/// Runs agent `index`'s turns.
pub(crate) async fn run(
    shared: Arc<Shared>,
    index: usize,
    chaos: mpsc::UnboundedSender<Request>,
) -> AgentReport {
    let id = session_id(index);
    let mut report = AgentReport { session: id.clone(), ..AgentReport::default() };
    let mut plans = plan::agent_rng(shared.seed, index);
    let mut nodes = choice::node_rng(shared.seed, index);
    for turn in 1..=shared.turns {
        let plan = plan::turn(&mut plans, &shared.rates, shared.cancel_window);
        if shared.watch.stopping() {
            break;
        }
        if plan.dispose {
            let _ = chaos.send(Request::Dispose);
        }
        if plan.configure {
            let _ = chaos.send(Request::Configure);
        }
        shared.watch.begin(index, turn);
        let mut one = OneTurn {
            shared: &shared,
            id: &id,
            text: format!("stress turn {turn} of {id}"),
            nodes: &mut nodes,
            report: &mut report,
            cancel: plan.cancel_after.map(|after| Cancel::Planned(Instant::now() + after)),
            turn: None,
            next_seq: None,
            cut: false,
        };
        let ended = one.run().await;
        one.settle_cancel(ended.as_ref()).await;
        shared.watch.end(index);
        shared.progress.turn_ended();
        shared.faults.turn_ended();
    }
    report
}

/// A cancel of the turn: when it is due, or how it was sent.
enum Cancel {
    Planned(Instant),
    Sent {
        at: Instant,
        serves: bool,
        answer: JoinHandle<Result<Value, Failed>>,
        /// Whether the stream that will carry the turn's end was open when it was sent (its
        /// latency is then measured).
        clean: bool,
    },
}

/// How a stream ended.
enum Read {
    /// At the turn's `turn/end` (when it was received).
    Ended(Box<Envelope>, Instant),
    /// With an error line: whether the turn had started, and what it said.
    Error { started: bool, kind: String, message: String },
    /// Cut, or ended without a word.
    Cut,
}

/// What to do next for the turn.
enum Next {
    Prompt,
    Locate(Instant),
    Follow(u32),
}

struct OneTurn<'a> {
    shared: &'a Shared,
    id: &'a str,
    /// The prompt's text (a new one each time a lost prompt is sent again).
    text: String,
    nodes: &'a mut StressRng,
    report: &'a mut AgentReport,
    cancel: Option<Cancel>,
    /// The turn's number, once known.
    turn: Option<u32>,
    /// The `seq` after the last event of the turn received.
    next_seq: Option<u64>,
    /// Whether a stream of the turn was cut (the latency of a cancel is then not measured).
    cut: bool,
}

impl OneTurn<'_> {
    /// Runs the turn to its end (`None`: the run stopped first).
    async fn run(&mut self) -> Option<(Envelope, Instant)> {
        let mut next = Next::Prompt;
        let mut tries = 0u32;
        let mut resent = 0u32;
        loop {
            if self.shared.watch.stopping() {
                return None;
            }
            if tries > 0 {
                let wait = backoff(tries);
                self.wait_or_cancel(wait).await;
            }
            tries += 1;
            next = match next {
                Next::Prompt => match self.prompt().await {
                    Ok(read) => match self.after(read) {
                        Ok(ended) => return Some(ended),
                        Err(next) => next,
                    },
                    Err(Failed::Refused { status: 400, kind, message }) => {
                        self.report
                            .error(format!("{}: a prompt refused: {kind}: {message}", self.id));
                        return None;
                    }
                    Err(refused @ Failed::Refused { .. }) => {
                        tracing::debug!(session = %self.id, %refused, "a prompt was refused");
                        self.report.refused_again += 1;
                        Next::Prompt
                    }
                    Err(Failed::Unreachable(_)) => Next::Locate(Instant::now()),
                },
                Next::Locate(since) => match self.locate().await {
                    Some(turn) => {
                        self.report.found += 1;
                        tries = 0;
                        Next::Follow(turn)
                    }
                    None if since.elapsed() >= locate_for(self.shared.lease) => {
                        resent += 1;
                        self.report.lost_again += 1;
                        self.text = format!("{} (sent again: {resent})", self.base_text());
                        Next::Prompt
                    }
                    None => Next::Locate(since),
                },
                Next::Follow(turn) => match self.follow(turn).await {
                    Ok(read) => match self.after(read) {
                        Ok(ended) => return Some(ended),
                        Err(next) => next,
                    },
                    Err(_) => Next::Follow(turn),
                },
            };
        }
    }

    fn base_text(&self) -> String {
        self.text.split(" (sent again").next().unwrap_or_default().to_owned()
    }

    /// What follows a stream's end.
    fn after(&mut self, read: Read) -> Result<(Envelope, Instant), Next> {
        match read {
            Read::Ended(end, at) => Ok((*end, at)),
            Read::Error { started: false, kind, message } if kind == "session" => {
                // The prompt did not start a turn (refused, or dropped before it started).
                tracing::debug!(session = %self.id, %message, "a prompt did not start");
                self.report.refused_again += 1;
                Err(Next::Prompt)
            }
            read => {
                self.cut = true;
                if matches!(&read, Read::Error { kind, .. } if kind == "notFound") {
                    // Followed from past the turn's end: from its start, then.
                    self.next_seq = None;
                }
                if let Read::Error { kind, message, .. } = &read {
                    tracing::debug!(session = %self.id, %kind, %message, "a turn's stream ended");
                }
                match self.turn {
                    Some(turn) => {
                        self.report.followed += 1;
                        Err(Next::Follow(turn))
                    }
                    None => Err(Next::Locate(Instant::now())),
                }
            }
        }
    }

    /// A node to send to (waiting while none is up), and whether it serves the session.
    async fn pick(&mut self) -> Option<(Pick, String)> {
        loop {
            let members = &self.shared.members;
            let owner = members.owner(self.id);
            if let Some(pick) = choice::pick(self.nodes, &members.up(), owner)
                && let Some(addr) = members.addr(pick.node)
            {
                return Some((pick, addr));
            }
            if self.shared.watch.stopping() {
                return None;
            }
            self.wait_or_cancel(Duration::from_millis(50)).await;
        }
    }

    async fn prompt(&mut self) -> Result<Read, Failed> {
        let Some((pick, addr)) = self.pick().await else {
            return Err(Failed::Unreachable("the run stopped".into()));
        };
        if pick.serves {
            self.report.local += 1;
        } else {
            self.report.forwarded += 1;
        }
        let url = format!("{addr}/api/sessions/{}/turns", self.id);
        let body = json!({"text": self.text});
        let mut lines = self.shared.http.lines(Method::POST, &url, Some(&body)).await?;
        Ok(self.read(&mut lines, pick.node).await)
    }

    async fn follow(&mut self, turn: u32) -> Result<Read, Failed> {
        let Some((pick, addr)) = self.pick().await else {
            return Err(Failed::Unreachable("the run stopped".into()));
        };
        let from = self.next_seq.map(|seq| format!("?from={seq}")).unwrap_or_default();
        let url = format!("{addr}/api/sessions/{}/turns/{turn}{from}", self.id);
        let mut lines = self.shared.http.lines(Method::GET, &url, None).await?;
        Ok(self.read(&mut lines, pick.node).await)
    }

    /// The turn of the prompt's text in the log, once it started there.
    async fn locate(&mut self) -> Option<u32> {
        let (_, addr) = self.pick().await?;
        let url = format!("{addr}/api/sessions/{}", self.id);
        let log = self.shared.http.json(Method::GET, &url, None).await.ok()?;
        let events: Vec<Envelope> = log["events"]
            .as_array()?
            .iter()
            .filter_map(|e| serde_json::from_value(e.clone()).ok())
            .collect();
        let asked = events
            .iter()
            .rposition(|e| matches!(&e.event, Event::UserMessage(m) if m.text == self.text))?;
        let turn = events[asked..].iter().find_map(|e| match &e.event {
            Event::TurnStart(start) => Some(start.turn),
            _ => None,
        })?;
        self.turn = Some(turn);
        let from = events[asked].seq;
        self.next_seq = Some(self.next_seq.map_or(from, |next| next.max(from)));
        Some(turn)
    }

    /// Reads a stream to its end, sending the cancel when it is due.
    async fn read(&mut self, lines: &mut Lines, node: usize) -> Read {
        loop {
            let due = match &self.cancel {
                Some(Cancel::Planned(at)) => Some(*at),
                _ => None,
            };
            let line = tokio::select! {
                line = lines.next() => line,
                () = sleep_until(due) => {
                    self.send_cancel(Some(node));
                    continue;
                }
            };
            let value = match line {
                None | Some(Err(_)) => return Read::Cut,
                Some(Ok(value)) => value,
            };
            if let Some(event) = value.get("event") {
                let Ok(event) = serde_json::from_value::<Envelope>(event.clone()) else {
                    self.report.error(format!("{}: an event line that is not an event", self.id));
                    continue;
                };
                self.acknowledged(&event);
                match &event.event {
                    Event::TurnStart(start) => self.turn = Some(start.turn),
                    Event::TurnEnd(end) if Some(end.turn) == self.turn => {
                        return Read::Ended(Box::new(event), Instant::now());
                    }
                    _ => {}
                }
            } else if let Some(error) = value.get("error") {
                let text = |key: &str| error[key].as_str().unwrap_or_default().to_owned();
                return Read::Error {
                    started: error["started"].as_bool().unwrap_or(true),
                    kind: text("kind"),
                    message: text("message"),
                };
            } else if value.get("outcome").is_some() {
                // The turn/end line comes first; an outcome alone is a turn this run did not
                // see start (its number unknown): read on from the log.
                return Read::Cut;
            }
        }
    }

    /// A node acknowledged `event`.
    fn acknowledged(&mut self, event: &Envelope) {
        self.next_seq = Some(self.next_seq.map_or(event.seq + 1, |next| next.max(event.seq + 1)));
        if let Some(acks) = &self.shared.acks {
            acks.ack(self.id, event.seq);
        }
        match self.report.acked.get(&event.seq) {
            Some(known) if known != event => {
                let conflict = format!(
                    "{}: seq {} acknowledged as {} and then as {}",
                    self.id,
                    event.seq,
                    known.kind(),
                    event.kind()
                );
                if self.report.conflicts.len() < LISTED {
                    self.report.conflicts.push(conflict);
                }
            }
            Some(_) => {}
            None => {
                self.report.acked.insert(event.seq, event.clone());
            }
        }
    }

    /// Sends the cancel, through `node` when it is up, else through any node up.
    fn send_cancel(&mut self, node: Option<usize>) {
        let members = &self.shared.members;
        let node = node.filter(|n| members.addr(*n).is_some()).or_else(|| {
            let up = members.up();
            choice::victim(self.nodes, &up)
        });
        let Some((node, addr)) = node.and_then(|n| Some((n, members.addr(n)?))) else {
            return; // no node up: tried again at the next wait
        };
        let serves = members.owner(self.id) == Some(node);
        let url = format!("{addr}/api/sessions/{}/cancel", self.id);
        let http = self.shared.http.clone();
        let answer =
            tokio::spawn(async move { http.json(Method::POST, &url, Some(&json!({}))).await });
        let kind =
            if serves { &mut self.report.local_cancels } else { &mut self.report.cross_cancels };
        kind.requested += 1;
        self.cancel = Some(Cancel::Sent { at: Instant::now(), serves, answer, clean: !self.cut });
    }

    /// Waits `wait`, sending the cancel if it falls due meanwhile (through any node up).
    async fn wait_or_cancel(&mut self, wait: Duration) {
        let until = Instant::now() + wait;
        if let Some(Cancel::Planned(at)) = &self.cancel
            && *at <= until
        {
            sleep_until(Some(*at)).await;
            self.send_cancel(None);
        }
        sleep_until(Some(until)).await;
    }

    /// Counts the cancel's answer, and its latency when it ended the turn.
    async fn settle_cancel(&mut self, ended: Option<&(Envelope, Instant)>) {
        let Some(Cancel::Sent { at, serves, answer, clean }) = self.cancel.take() else { return };
        let landed = match tokio::time::timeout(Duration::from_secs(60), answer).await {
            Ok(Ok(Ok(answer))) => answer["cancelled"] == true,
            _ => false,
        };
        let kind =
            if serves { &mut self.report.local_cancels } else { &mut self.report.cross_cancels };
        if landed {
            kind.landed += 1;
            if let Some((end, received)) = ended
                && clean
                && !self.cut
                && matches!(&end.event, Event::TurnEnd(e) if matches!(e.reason, TurnEndReason::Aborted { .. }))
            {
                kind.latencies.push(received.saturating_duration_since(at));
            }
        }
    }
}

/// The wait before try `tries` + 1: 25 ms doubling, at most [`MAX_BACKOFF`].
fn backoff(tries: u32) -> Duration {
    (Duration::from_millis(25) * 2u32.saturating_pow(tries.saturating_sub(1).min(6)))
        .min(MAX_BACKOFF)
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tries_back_off_to_a_second() {
        for tries in 1..20 {
            let wait = backoff(tries);
            assert!(wait <= MAX_BACKOFF, "{tries}: {wait:?}");
            assert!(wait >= Duration::from_millis(25), "{tries}: {wait:?}");
        }
        assert_eq!(backoff(1), Duration::from_millis(25));
        assert_eq!(backoff(3), Duration::from_millis(100));
        assert_eq!(backoff(10), MAX_BACKOFF);
        assert_eq!(locate_for(Duration::from_secs(1)), Duration::from_secs(8));
    }
}
