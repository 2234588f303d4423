//! [`Scrubber`]: the one place where a provider's strings lose the secrets a server could echo.
//!
//! A server may send back the credential it was given — in an error body, a header such as
//! `x-request-id`, the streamed answer, an in-stream error, a tool call's arguments — and
//! whatever it sends travels on into the session log, the terminal, `rein show`/`rein report`,
//! the console and the traces. So an adapter hands everything it got from a server to its
//! scrubber *before* it leaves the adapter: a failure ([`Scrubber::failure`]: message and request
//! id), an answer ([`Scrubber::assembled`]: text, reasoning, tool calls, model, finish reason) and
//! the streamed chunks ([`StreamScrubber`]). Nothing downstream has to remember to.
//!
//! Every occurrence of each secret reads [`REDACTED`], whatever its length (a placeholder key such
//! as `ollama` is redacted from answers too: a server that needs no key is configured keyless).
//!
//! # Chunks
//!
//! A secret may arrive split across chunks (`"… sk-ab"`, `"cd …"`). The stream scrubber holds back
//! the shortest tail of what it was given that could still become a secret, and sends the rest;
//! [`StreamScrubber::finish`] lets the tail go at the end of the stream. So the chunks it sends,
//! joined, are exactly [`Scrubber::text`] of the chunks it was given, joined, however they were
//! cut (a property test checks it). The tail held back is shorter than the longest secret.

use std::borrow::Cow;
use std::sync::Arc;

use rein_runtime::event::ToolCall;
use rein_runtime::failure::Failure;
use rein_runtime::provider::ChunkSink;
use serde_json::Value;

use crate::answer::Assembled;
use crate::classify::typed;
use crate::secret::REDACTED;

/// Takes secrets out of text. Cheap to clone (shared).
#[derive(Clone, Default)]
pub struct Scrubber(Option<Arc<[String]>>);

impl std::fmt::Debug for Scrubber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let count = self.0.as_ref().map_or(0, |s| s.len());
        write!(f, "Scrubber({count} secret(s))")
    }
}

impl Scrubber {
    /// A scrubber of `secrets` (empty ones are ignored; none at all scrubs nothing).
    pub fn new(secrets: impl IntoIterator<Item = String>) -> Self {
        let mut list: Vec<String> = secrets.into_iter().filter(|s| !s.is_empty()).collect();
        list.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        list.dedup();
        Self((!list.is_empty()).then(|| list.into()))
    }

    /// `text` with every occurrence of a secret replaced by [`REDACTED`]: the leftmost match
    /// first, the longest secret where several start there.
    pub fn text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let Some((start, end)) = self.next_match(text, 0) else { return text.into() };
        let mut clean = String::with_capacity(text.len());
        clean.push_str(&text[..start]);
        clean.push_str(REDACTED);
        let mut from = end;
        while let Some((start, end)) = self.next_match(text, from) {
            clean.push_str(&text[from..start]);
            clean.push_str(REDACTED);
            from = end;
        }
        clean.push_str(&text[from..]);
        Cow::Owned(clean)
    }

    /// The first match at or after byte `from` (a char boundary): (start, end). A secret is
    /// valid UTF-8, so a match starts and ends on char boundaries.
    fn next_match(&self, text: &str, from: usize) -> Option<(usize, usize)> {
        let secrets = self.0.as_deref()?;
        let rest = &text[from..];
        // Longest first: at equal starts the first found (the longest) is kept.
        secrets
            .iter()
            .filter_map(|s| rest.find(s.as_str()).map(|at| (from + at, from + at + s.len())))
            .min_by_key(|&(start, _)| start)
    }

    fn owned(&self, text: String) -> String {
        match self.text(&text) {
            Cow::Borrowed(_) => text,
            Cow::Owned(clean) => clean,
        }
    }

    /// `failure` with its message and request id scrubbed, every other field kept.
    pub fn failure(&self, failure: Failure) -> Failure {
        let message = self.text(failure.message());
        let id = failure.request_id().map(|id| self.text(id));
        let dirty = matches!(message, Cow::Owned(_)) || matches!(id, Some(Cow::Owned(_)));
        if !dirty {
            return failure;
        }
        let mut clean = typed(failure.code(), message.into_owned());
        if let Some(status) = failure.status() {
            clean = clean.clone().with_status(status).unwrap_or(clean);
        }
        if let Some(ms) = failure.provider_retry_after_ms() {
            clean = clean.clone().with_retry_after_ms(ms).unwrap_or(clean);
        }
        if let Some(id) = id {
            clean = clean.clone().with_request_id(id.into_owned()).unwrap_or(clean);
        }
        clean
    }

    /// A JSON value with every string in it (object keys included) scrubbed.
    pub fn value(&self, value: Value) -> Value {
        if self.0.is_none() {
            return value;
        }
        match value {
            Value::String(s) => Value::String(self.owned(s)),
            Value::Array(items) => Value::Array(items.into_iter().map(|v| self.value(v)).collect()),
            Value::Object(map) => Value::Object(
                map.into_iter().map(|(k, v)| (self.owned(k), self.value(v))).collect(),
            ),
            other => other,
        }
    }

    /// An assembled answer with every string in it scrubbed.
    pub fn assembled(&self, mut answer: Assembled) -> Assembled {
        if self.0.is_none() {
            return answer;
        }
        answer.text = self.owned(answer.text);
        answer.reasoning = self.owned(answer.reasoning);
        answer.finish_reason = answer.finish_reason.map(|r| self.owned(r));
        answer.response_model = answer.response_model.map(|m| self.owned(m));
        answer.completion.tool_calls = std::mem::take(&mut answer.completion.tool_calls)
            .into_iter()
            .map(|call| ToolCall {
                id: self.owned(call.id),
                name: self.owned(call.name),
                arguments: self.value(call.arguments),
            })
            .collect();
        answer
    }

    /// A scrubber for one stream of chunks.
    pub fn stream(&self) -> StreamScrubber {
        StreamScrubber { scrubber: self.clone(), held: String::new() }
    }

    /// Where the tail of `text` that could still become a secret begins (`text.len()` when no
    /// tail could): the earliest start of a proper prefix of a secret that runs to the end, or
    /// the start of the match that covers it. Before that point the matches are those of any
    /// continuation of the text, so what comes before it can be scrubbed and sent now.
    fn held_from(&self, text: &str) -> usize {
        let Some(secrets) = self.0.as_deref() else { return text.len() };
        let bytes = text.as_bytes();
        let longest = secrets.first().map_or(0, String::len);
        let open = |from: usize| {
            let tail = &bytes[from..];
            secrets.iter().any(|s| s.len() > tail.len() && s.as_bytes().starts_with(tail))
        };
        let keep = (bytes.len().saturating_sub(longest)..bytes.len())
            .find(|&from| text.is_char_boundary(from) && open(from))
            .unwrap_or(bytes.len());
        let mut from = 0;
        while let Some((start, end)) = self.next_match(text, from) {
            if start >= keep {
                break;
            }
            if end > keep {
                return start;
            }
            from = end;
        }
        keep
    }
}

/// The scrubber of one stream: see "Chunks" in the module docs.
#[derive(Debug)]
pub struct StreamScrubber {
    scrubber: Scrubber,
    held: String,
}

impl StreamScrubber {
    /// What may be sent of `chunk` now (maybe nothing), scrubbed.
    pub fn push(&mut self, chunk: &str) -> String {
        self.held.push_str(chunk);
        let keep = self.scrubber.held_from(&self.held);
        let ready: String = self.held.drain(..keep).collect();
        self.scrubber.owned(ready)
    }

    /// The tail held back, scrubbed: the stream is over.
    pub fn finish(&mut self) -> String {
        let rest = std::mem::take(&mut self.held);
        self.scrubber.owned(rest)
    }
}

/// A chunk sink behind a [`StreamScrubber`]: the only way the adapter streams text.
#[derive(Debug)]
pub(crate) struct ScrubbedSink {
    sink: ChunkSink,
    stream: StreamScrubber,
}

impl ScrubbedSink {
    pub(crate) fn new(sink: ChunkSink, scrubber: &Scrubber) -> Self {
        Self { sink, stream: scrubber.stream() }
    }

    /// Streams what may go of `chunk` now. A closed sink means nobody listens any more (the
    /// runtime cancels the attempt).
    pub(crate) fn send(&mut self, chunk: &str) {
        let ready = self.stream.push(chunk);
        if !ready.is_empty() {
            let _ = self.sink.send(ready);
        }
    }

    /// Streams the tail held back.
    pub(crate) fn finish(mut self) {
        let rest = self.stream.finish();
        if !rest.is_empty() {
            let _ = self.sink.send(rest);
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use rein_runtime::provider::Completion;
    use serde_json::json;

    use super::*;

    fn scrubber(secrets: &[&str]) -> Scrubber {
        Scrubber::new(secrets.iter().map(|s| (*s).to_owned()))
    }

    #[test]
    fn text_loses_every_occurrence_of_every_secret() {
        let s = scrubber(&["sk-9", "pw", ""]);
        let cases = [
            ("Incorrect API key provided: sk-9.", "Incorrect API key provided: [redacted]."),
            ("sk-9 and sk-9", "[redacted] and [redacted]"),
            ("Bearer sk-9", "Bearer [redacted]"),
            ("user:pw@host", "user:[redacted]@host"),
            ("sk-", "sk-"),
            ("nothing here", "nothing here"),
        ];
        for (text, expected) in cases {
            assert_eq!(s.text(text), expected, "{text}");
        }
        assert!(matches!(s.text("clean"), Cow::Borrowed(_)), "no copy when clean");
        // A secret that begins another: the longer one wins where both match.
        let nested = scrubber(&["ab", "abc"]);
        assert_eq!(nested.text("abc ab"), "[redacted] [redacted]");
        assert_eq!(Scrubber::default().text("sk-9"), "sk-9", "no secret, nothing scrubbed");
        // However long a key is, it is a secret like any other (no pattern to outgrow).
        let huge = "k".repeat(1 << 20);
        let s = Scrubber::new([huge.clone()]);
        assert_eq!(s.text(&format!("<{huge}>")), "<[redacted]>");
        assert_eq!(s.text(&huge[1..]), &huge[1..]);
    }

    #[test]
    fn a_failure_keeps_every_field_but_the_secret() {
        let s = scrubber(&["sk-live-1"]);
        let failure = Failure::new("AUTH", "Incorrect API key provided: sk-live-1")
            .and_then(|f| f.with_status(401))
            .and_then(|f| f.with_retry_after_ms(5.0))
            .and_then(|f| f.with_request_id("Bearer sk-live-1"))
            .unwrap();
        let clean = s.failure(failure);
        assert_eq!(clean.message(), "Incorrect API key provided: [redacted]");
        assert_eq!(
            (clean.code(), clean.status(), clean.provider_retry_after_ms(), clean.request_id()),
            ("AUTH", Some(401), Some(5.0), Some("Bearer [redacted]"))
        );
        let untouched = Failure::new("AUTH", "no key here").unwrap();
        assert_eq!(s.failure(untouched.clone()), untouched);
        let echoed_id = Failure::new("SERVER", "busy").and_then(|f| f.with_request_id("sk-live-1"));
        assert_eq!(s.failure(echoed_id.unwrap()).request_id(), Some("[redacted]"));
    }

    #[test]
    fn an_answer_loses_the_secret_everywhere() {
        let s = scrubber(&["sk-1"]);
        let answer = Assembled {
            text: "the key is sk-1".into(),
            reasoning: "sk-1".into(),
            completion: Completion {
                tool_calls: vec![ToolCall {
                    id: "call-sk-1".into(),
                    name: "sk-1".into(),
                    arguments: json!({"sk-1": ["sk-1", 1, {"k": "x sk-1"}], "n": null}),
                }],
                usage: None,
            },
            finish_reason: Some("sk-1".into()),
            response_model: Some("model-sk-1".into()),
        };
        let clean = s.assembled(answer);
        assert_eq!(clean.text, "the key is [redacted]");
        assert_eq!(clean.reasoning, "[redacted]");
        assert_eq!(clean.finish_reason.as_deref(), Some("[redacted]"));
        assert_eq!(clean.response_model.as_deref(), Some("model-[redacted]"));
        let call = &clean.completion.tool_calls[0];
        assert_eq!((call.id.as_str(), call.name.as_str()), ("call-[redacted]", "[redacted]"));
        assert_eq!(
            call.arguments,
            json!({"[redacted]": ["[redacted]", 1, {"k": "x [redacted]"}], "n": null})
        );
    }

    /// The chunks a stream scrubber sends for `chunks`, and the tail at the end.
    fn streamed(s: &Scrubber, chunks: &[&str]) -> Vec<String> {
        let mut stream = s.stream();
        let mut out: Vec<String> = chunks.iter().map(|c| stream.push(c)).collect();
        out.push(stream.finish());
        out
    }

    #[test]
    fn a_secret_split_across_chunks_is_held_back_and_scrubbed() {
        let s = scrubber(&["sk-abcd"]);
        let cases: [(&[&str], &[&str]); 6] = [
            (&["key sk-ab", "cd end"], &["key ", "[redacted] end", ""]),
            (&["s", "k", "-", "a", "b", "c", "d"], &["", "", "", "", "", "", "[redacted]", ""]),
            (&["sk-ab", "XY"], &["", "sk-abXY", ""]),
            (&["ends sk-a"], &["ends ", "sk-a"]),
            (&["plain text", " more"], &["plain text", " more", ""]),
            (&["é sk", "-abcdé"], &["é ", "[redacted]é", ""]),
        ];
        for (chunks, expected) in cases {
            assert_eq!(streamed(&s, chunks), expected, "{chunks:?}");
        }
        // A match the tail would cut ("aXa" ends with "a", a prefix) is held back whole.
        assert_eq!(streamed(&scrubber(&["aXa"]), &["aXa", "b"]), ["", "[redacted]b", ""]);
        // A match that could still grow into a longer secret waits for it.
        assert_eq!(streamed(&scrubber(&["ab", "abc"]), &["ab", "c"]), ["", "[redacted]", ""]);
    }

    proptest! {
        #[test]
        fn chunks_joined_are_the_scrubbed_text_however_they_are_cut(
            secrets in proptest::collection::vec("[abX]{1,4}", 1..3),
            text in "[abXé ]{0,40}",
            cuts in proptest::collection::vec(0usize..48, 0..8),
        ) {
            let s = Scrubber::new(secrets.clone());
            let mut bounds: Vec<usize> = cuts
                .into_iter()
                .map(|c| c.min(text.len()))
                .filter(|&c| text.is_char_boundary(c))
                .collect();
            bounds.push(0);
            bounds.push(text.len());
            bounds.sort_unstable();
            let chunks: Vec<&str> = bounds.windows(2).map(|w| &text[w[0]..w[1]]).collect();
            let mut stream = s.stream();
            let mut joined = String::new();
            for chunk in &chunks {
                joined.push_str(&stream.push(chunk));
                let longest = secrets.iter().map(String::len).max().unwrap_or(0);
                prop_assert!(stream.held.len() < 2 * longest, "{:?}", stream.held);
            }
            joined.push_str(&stream.finish());
            prop_assert_eq!(joined, s.text(&text).into_owned());
        }
    }
}
