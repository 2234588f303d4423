//! The answer of a turn as it streams, without the text of attempts that failed:
//! [`TurnHandle::answer`](super::TurnHandle::answer) and the pure fold behind it, [`Answer`].
//!
//! A turn's events hold every attempt's chunks as they arrived, and an attempt may fail after
//! streaming text that is then not part of the answer (the `assistant/message` holds only the
//! successful attempt's chunks). A program that prints `assistant/chunk`s as they come shows that
//! text before the real answer. The answer stream says what to do with it instead:
//!
//! - [`AnswerDelta::Text`]: more text of the running attempt — show it as it comes;
//! - [`AnswerDelta::Reset`]: that attempt ended without answering (it failed, or the turn ended
//!   first): the text it streamed (`discarded`) is not part of the answer — erase it; the next
//!   attempt's text follows;
//! - [`AnswerDelta::Settled`]: the attempt answered; its whole text is part of the answer for
//!   good. One per step that answered (a step that called tools, then the final answer).
//!
//! A UI that streams shows `Text` and erases on `Reset`; a program that wants only what
//! succeeded reads `Settled` (or [`AnswerStream::finish`]), and never sees a failed attempt's
//! text. A `Reset` comes only after an attempt streamed text: one that failed before its first
//! chunk has nothing to erase.

use std::future::IntoFuture;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;

use super::SessionError;
use super::turn_handle::{TurnHandle, TurnOutcome};
use crate::event::Event;
use crate::failure::Failure;

/// A piece of a turn's answer as it streams.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum AnswerDelta {
    /// More text of the running attempt, to show after what it streamed before.
    Text(String),
    /// The running attempt ended without answering after streaming `discarded`: that text is not
    /// part of the answer; erase it. The next attempt (if any) streams its own text.
    Reset {
        /// The attempt's number within its step.
        attempt: u32,
        /// What it streamed (every `Text` since the last `Settled` or `Reset`).
        discarded: String,
        /// Its failure; `None` when the turn ended (cancelled, interrupted) before it answered.
        failure: Option<Failure>,
    },
    /// The running attempt answered: its whole text (what its `Text`s added up to) is part of
    /// the answer. One per step that answered.
    Settled(String),
}

/// The fold from a turn's events to its [`AnswerDelta`]s, for a caller that reads every event
/// anyway (a chat that also shows retries and tool calls): feed it each event in order.
///
/// ```
/// use rein_runtime::event::{AssistantChunk, AssistantMessage, Event, RequestError, RequestStart};
/// use rein_runtime::failure::Failure;
/// use rein_runtime::session::{Answer, AnswerDelta};
///
/// let start = |attempt| Event::RequestStart(RequestStart {
///     turn: 1, step: 1, attempt, provider: "p".into(), model: "m".into(),
/// });
/// let chunk = |attempt, text: &str| Event::AssistantChunk(AssistantChunk {
///     turn: 1, step: 1, attempt, text: text.into(),
/// });
/// let server = Failure::new("SERVER", "busy").unwrap();
/// let events = [
///     start(1),
///     chunk(1, "Hel"),
///     Event::RequestError(RequestError {
///         turn: 1, step: 1, attempt: 1, provider: "p".into(), failure: server.clone(),
///     }),
///     start(2),
///     chunk(2, "Hello"),
///     Event::AssistantMessage(AssistantMessage {
///         turn: 1, step: 1, text: "Hello".into(), tool_calls: None, usage: None,
///     }),
/// ];
/// let mut answer = Answer::new();
/// let deltas: Vec<AnswerDelta> = events.iter().filter_map(|e| answer.on(e)).collect();
/// assert_eq!(deltas, [
///     AnswerDelta::Text("Hel".into()),
///     AnswerDelta::Reset { attempt: 1, discarded: "Hel".into(), failure: Some(server) },
///     AnswerDelta::Text("Hello".into()),
///     AnswerDelta::Settled("Hello".into()),
/// ]);
/// assert_eq!(answer.text(), "Hello");
/// ```
#[derive(Debug, Clone, Default)]
pub struct Answer {
    /// The running attempt: (step, attempt).
    running: Option<(u32, u32)>,
    /// What the running attempt streamed so far.
    streamed: String,
    /// The latest answered step's text.
    settled: String,
}

impl Answer {
    /// A fold that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// What `event` adds to the answer, if anything.
    pub fn on(&mut self, event: &Event) -> Option<AnswerDelta> {
        match event {
            Event::RequestStart(request) => {
                let reset = self.reset(None);
                self.running = Some((request.step, request.attempt));
                reset
            }
            Event::AssistantChunk(chunk)
                if self.running == Some((chunk.step, chunk.attempt)) && !chunk.text.is_empty() =>
            {
                self.streamed.push_str(&chunk.text);
                Some(AnswerDelta::Text(chunk.text.clone()))
            }
            Event::RequestError(error) if self.running == Some((error.step, error.attempt)) => {
                self.reset(Some(&error.failure))
            }
            Event::AssistantMessage(message) => {
                self.running = None;
                self.streamed.clear();
                self.settled.clone_from(&message.text);
                Some(AnswerDelta::Settled(message.text.clone()))
            }
            Event::TurnEnd(_) => self.reset(None),
            _ => None,
        }
    }

    /// The answer so far: the text of the turn's latest answered step — its final answer once
    /// the turn completed. Empty until a step answered.
    pub fn text(&self) -> &str {
        &self.settled
    }

    /// The running attempt ended without an answer: a `Reset` when it streamed text.
    fn reset(&mut self, failure: Option<&Failure>) -> Option<AnswerDelta> {
        let (_, attempt) = self.running.take()?;
        if self.streamed.is_empty() {
            return None;
        }
        let discarded = std::mem::take(&mut self.streamed);
        Some(AnswerDelta::Reset { attempt, discarded, failure: failure.cloned() })
    }
}

/// A turn's answer as it streams ([`TurnHandle::answer`]): a [`futures::Stream`] of
/// [`AnswerDelta`]s that ends with the turn, then its outcome.
pub struct AnswerStream {
    handle: TurnHandle,
    answer: Answer,
}

impl std::fmt::Debug for AnswerStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnswerStream").field("handle", &self.handle).finish_non_exhaustive()
    }
}

/// A turn's outcome and its answer ([`AnswerStream::finish`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Answered {
    /// How the turn ended.
    pub outcome: TurnOutcome,
    /// The text of its latest answered step ([`Answer::text`]): only successful attempts' text.
    pub text: String,
}

// Here, not in `turn_handle`: the answer builds on the handle, the handle knows nothing of it.
impl TurnHandle {
    /// The turn's answer as it streams, instead of its events: text deltas, a reset when an
    /// attempt that streamed text fails (its text is not part of the answer), and the text of
    /// each step that answered (see [`AnswerStream`]).
    pub fn answer(self) -> AnswerStream {
        AnswerStream { handle: self, answer: Answer::new() }
    }
}

impl AnswerStream {
    /// The next delta; `None` once the turn ended. The same as [`futures::StreamExt::next`].
    pub async fn next_delta(&mut self) -> Option<AnswerDelta> {
        futures::StreamExt::next(self).await
    }

    /// The answer so far ([`Answer::text`]).
    pub fn text(&self) -> &str {
        self.answer.text()
    }

    /// How the turn ended (the events not read yet are left unread).
    pub async fn outcome(self) -> Result<TurnOutcome, SessionError> {
        self.handle.outcome().await
    }

    /// Reads the rest of the turn; its outcome and the text of its latest answered step — what
    /// a program that wants no partial text prints.
    pub async fn finish(mut self) -> Result<Answered, SessionError> {
        while self.next_delta().await.is_some() {}
        let text = self.answer.text().to_owned();
        Ok(Answered { outcome: self.handle.outcome().await?, text })
    }
}

impl Stream for AnswerStream {
    type Item = AnswerDelta;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AnswerDelta>> {
        let this = self.get_mut();
        loop {
            let Some(envelope) = std::task::ready!(Pin::new(&mut this.handle).poll_next(cx)) else {
                return Poll::Ready(None);
            };
            if let Some(delta) = this.answer.on(&envelope.event) {
                return Poll::Ready(Some(delta));
            }
        }
    }
}

impl IntoFuture for AnswerStream {
    type Output = Result<TurnOutcome, SessionError>;
    type IntoFuture = crate::future::BoxFuture<'static, Self::Output>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.outcome())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{
        AssistantChunk, AssistantMessage, CancelCause, RequestError, RequestStart, StepRef,
        TurnEnd, TurnEndReason,
    };

    fn start(step: u32, attempt: u32) -> Event {
        let provider = "p".to_owned();
        Event::RequestStart(RequestStart { turn: 1, step, attempt, provider, model: "m".into() })
    }

    fn chunk(step: u32, attempt: u32, text: &str) -> Event {
        Event::AssistantChunk(AssistantChunk { turn: 1, step, attempt, text: text.into() })
    }

    fn error(step: u32, attempt: u32) -> Event {
        let failure = Failure::new("TRANSPORT", "cut").unwrap();
        Event::RequestError(RequestError { turn: 1, step, attempt, provider: "p".into(), failure })
    }

    fn message(step: u32, text: &str) -> Event {
        Event::AssistantMessage(AssistantMessage {
            turn: 1,
            step,
            text: text.into(),
            tool_calls: None,
            usage: None,
        })
    }

    fn end() -> Event {
        let reason = TurnEndReason::Aborted { cause: CancelCause::User };
        Event::TurnEnd(TurnEnd { turn: 1, reason })
    }

    fn text(t: &str) -> AnswerDelta {
        AnswerDelta::Text(t.into())
    }

    fn reset(attempt: u32, discarded: &str, failed: bool) -> AnswerDelta {
        let failure = failed.then(|| Failure::new("TRANSPORT", "cut").unwrap());
        AnswerDelta::Reset { attempt, discarded: discarded.into(), failure }
    }

    #[test]
    fn deltas_follow_the_running_attempt_and_settle_each_answered_step() {
        let settled = |t: &str| AnswerDelta::Settled(t.into());
        let cases: Vec<(&str, Vec<Event>, Vec<AnswerDelta>, &str)> = vec![
            (
                "a failure before any text has nothing to reset",
                vec![start(1, 1), error(1, 1), start(1, 2), chunk(1, 2, "ok"), message(1, "ok")],
                vec![text("ok"), settled("ok")],
                "ok",
            ),
            (
                "empty chunks add nothing",
                vec![start(1, 1), chunk(1, 1, ""), error(1, 1)],
                vec![],
                "",
            ),
            (
                "a chunk of another attempt is not the running one's",
                vec![start(1, 2), chunk(1, 1, "old"), chunk(1, 2, "new"), error(1, 2)],
                vec![text("new"), reset(2, "new", true)],
                "",
            ),
            (
                "each answered step settles; the text is the latest step's",
                vec![
                    start(1, 1),
                    chunk(1, 1, "let me look"),
                    message(1, "let me look"),
                    Event::StepEnd(StepRef { turn: 1, step: 1 }),
                    start(2, 1),
                    chunk(2, 1, "found"),
                    error(2, 1),
                    start(2, 2),
                    chunk(2, 2, "found it"),
                    message(2, "found it"),
                ],
                vec![
                    text("let me look"),
                    settled("let me look"),
                    text("found"),
                    reset(1, "found", true),
                    text("found it"),
                    settled("found it"),
                ],
                "found it",
            ),
            (
                "a turn that ends mid-stream resets, with no failure",
                vec![start(1, 1), chunk(1, 1, "hal"), chunk(1, 1, "f"), end()],
                vec![text("hal"), text("f"), reset(1, "half", false)],
                "",
            ),
            (
                "an attempt started over one that streamed resets it",
                vec![start(1, 1), chunk(1, 1, "lost"), start(1, 2)],
                vec![text("lost"), reset(1, "lost", false)],
                "",
            ),
        ];
        for (why, events, want, answer_text) in cases {
            let mut answer = Answer::new();
            let got: Vec<AnswerDelta> = events.iter().filter_map(|e| answer.on(e)).collect();
            assert_eq!(got, want, "{why}");
            assert_eq!(answer.text(), answer_text, "{why}");
        }
    }
}
