//! The stream layer: a response's bytes → the `data` payloads of its server-sent events, under a
//! dead-air watchdog.
//!
//! Parsing is `sse-stream`'s byte-level decoder (the SSE rules: `data:` lines joined by `\n`,
//! events ended by a blank line, `\r\n` or `\r` line ends, comments and unknown fields skipped,
//! a leading byte-order mark dropped, an unterminated last event discarded, strict UTF-8).
//! This module adds:
//! - the watchdog: each read of the byte stream must bring bytes within the idle timeout, so any
//!   bytes — a keep-alive comment included — count as life, and silence ends the stream with
//!   [`SseError::Idle`] (no total timeout: a long answer that keeps talking never times out);
//! - `[DONE]` as its own frame; an event without `data` (only `event:` or `id:`) is skipped;
//! - errors as data: a failed read is [`SseError::Transport`], data that is not UTF-8 is
//!   [`SseError::Malformed`]. After an error the stream ends.
//!
//! A clean end of the bytes ends the stream of frames; whether `[DONE]` came first is the
//! caller's question.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use sse_stream::{Error as DecodeError, SseByteStream};

use crate::classify::error_chain;

/// One event of the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// An event's `data` (not `[DONE]`).
    Data(String),
    /// The `[DONE]` sentinel: the answer is complete.
    Done,
}

/// What an adapter's stream assembler made of one frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fed {
    /// Nothing to stream.
    Nothing,
    /// Answer text to stream.
    Text(String),
    /// The end marker: the answer is complete.
    End,
}

/// Why the stream of frames ended early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseError {
    /// Nothing arrived for this long.
    Idle(Duration),
    /// Reading the bytes failed (the connection was reset, the body was cut).
    Transport(String),
    /// The bytes were not an event stream of UTF-8 text.
    Malformed(String),
}

impl fmt::Display for SseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SseError::Idle(silence) => write!(f, "nothing arrived for {silence:?}"),
            SseError::Transport(detail) | SseError::Malformed(detail) => f.write_str(detail),
        }
    }
}

impl std::error::Error for SseError {}

/// The frames of `bytes`, each read watched by an `idle` timeout (see the module docs).
pub fn frames<S, B, E>(bytes: S, idle: Duration) -> impl Stream<Item = Result<Frame, SseError>>
where
    S: Stream<Item = Result<B, E>> + Send + 'static,
    B: Into<Bytes> + Send + 'static,
    E: std::error::Error + Send + 'static,
{
    SseByteStream::new(watchdog(bytes, idle)).filter_map(|item| {
        let frame = match item {
            Ok(event) => match event.data {
                Some(data) if data.trim() == "[DONE]" => Some(Ok(Frame::Done)),
                Some(data) => Some(Ok(Frame::Data(data))),
                None => None,
            },
            Err(DecodeError::Body(error)) => Some(Err(match error.downcast::<SseError>() {
                Ok(error) => *error,
                Err(other) => SseError::Transport(error_chain(other.as_ref())),
            })),
            Err(error) => {
                Some(Err(SseError::Malformed(format!("the event stream is unreadable ({error})"))))
            }
        };
        std::future::ready(frame)
    })
}

/// `bytes`, each read raced against `idle`; a failed or timed-out read ends the stream after
/// its error.
fn watchdog<S, B, E>(bytes: S, idle: Duration) -> impl Stream<Item = Result<Bytes, SseError>> + Send
where
    S: Stream<Item = Result<B, E>> + Send + 'static,
    B: Into<Bytes> + Send + 'static,
    E: std::error::Error + Send + 'static,
{
    futures::stream::unfold(Some(Box::pin(bytes)), move |state| async move {
        let mut bytes = state?;
        match tokio::time::timeout(idle, bytes.next()).await {
            Ok(Some(Ok(chunk))) => Some((Ok(chunk.into()), Some(bytes))),
            Ok(Some(Err(error))) => Some((Err(SseError::Transport(error_chain(&error))), None)),
            Ok(None) => None,
            Err(_) => Some((Err(SseError::Idle(idle)), None)),
        }
    })
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::pin::pin;

    use futures::stream;
    use proptest::prelude::*;

    use super::*;
    use crate::http::Decoder;

    const IDLE: Duration = Duration::from_secs(300);

    type Item = Result<Vec<u8>, io::Error>;
    type Outcome = Result<Frame, SseError>;

    fn ok(text: &str) -> Item {
        Ok(text.as_bytes().to_vec())
    }

    async fn collect(chunks: Vec<Item>) -> Vec<Result<Frame, SseError>> {
        frames(stream::iter(chunks), IDLE).collect().await
    }

    fn data(text: &str) -> Result<Frame, SseError> {
        Ok(Frame::Data(text.to_owned()))
    }

    #[tokio::test(start_paused = true)]
    async fn the_parser_table() {
        let reset = || Err(io::Error::new(io::ErrorKind::ConnectionReset, "connection reset"));
        let cases: Vec<(Vec<Item>, Vec<Outcome>)> = vec![
            (vec![ok("data: {\"a\":1}\n\ndata: [DONE]\n\n")], vec![data("{\"a\":1}"), Ok(Frame::Done)]),
            // Split anywhere, even inside a field name or a multi-byte character.
            (
                vec![ok("da"), ok("ta: h"), Ok(vec![0xc3]), Ok(vec![0xa9, b'\n']), ok("\ndata:[DONE]\n\n")],
                vec![data("hé"), Ok(Frame::Done)],
            ),
            // CRLF line ends, comments (keep-alives), event names, ids and retry fields.
            (
                vec![ok(": keep-alive\r\n\r\n: ping\r\nevent: message\r\nid: 7\r\nretry: 10\r\ndata: x\r\n\r\n")],
                vec![data("x")],
            ),
            // Several data lines join with newlines; a byte-order mark is dropped.
            (vec![ok("\u{feff}data: a\ndata: b\n\n")], vec![data("a\nb")]),
            (vec![Ok(vec![0xef]), Ok(vec![0xbb]), Ok(vec![0xbf])], vec![]),
            (vec![Ok(vec![0xef, 0xbb]), Ok(vec![0xbf]), ok("data: split bom\n\n")], vec![data("split bom")]),
            // Events without data are skipped.
            (vec![ok("event: ping\n\nid: 3\n\ndata: x\n\n")], vec![data("x")]),
            // An unterminated last event is discarded; a clean end just ends.
            (vec![ok("data: a\n\ndata: b")], vec![data("a")]),
            (vec![], vec![]),
            (vec![ok(": only comments\n\n")], vec![]),
            // A failed read after data is a transport error, and the end.
            (
                vec![ok("data: a\n\n"), reset(), ok("data: never\n\n")],
                vec![data("a"), Err(SseError::Transport("connection reset".into()))],
            ),
            // Data that is not UTF-8 is malformed.
            (
                vec![ok("data: a\n\n"), Ok(b"data: \xff\n\n".to_vec())],
                vec![data("a"), Err(SseError::Malformed("the event stream is unreadable (utf8 parse error: invalid utf-8 sequence of 1 bytes from index 0)".into()))],
            ),
        ];
        for (chunks, expected) in cases {
            let shown = format!("{chunks:?}");
            assert_eq!(collect(chunks).await, expected, "{shown}");
        }
    }

    /// A byte stream that sends `data: a`, then keep-alive comments every `gap` for `alive`, then
    /// goes silent forever.
    fn talker(gap: Duration, alive: Duration) -> impl Stream<Item = Item> + Send + 'static {
        let beats = (alive.as_millis() / gap.as_millis()) as usize;
        let talk = stream::iter([ok("data: a\n\n")]).chain(stream::iter(0..beats).then(
            move |_| async move {
                tokio::time::sleep(gap).await;
                ok(": keep-alive\n\n")
            },
        ));
        talk.chain(stream::pending())
    }

    #[tokio::test(start_paused = true)]
    async fn keep_alive_comments_are_life_and_silence_is_the_watchdogs() {
        let start = tokio::time::Instant::now();
        let gap = Duration::from_secs(200);
        let alive = Duration::from_secs(1000);
        let mut frames = pin!(frames(talker(gap, alive), IDLE));
        assert_eq!(frames.next().await, Some(data("a")));
        // 1000 s of comments 200 s apart (each under the 300 s watchdog), then 300 s of silence.
        assert_eq!(frames.next().await, Some(Err(SseError::Idle(IDLE))));
        assert_eq!(start.elapsed(), alive + IDLE);
        assert_eq!(frames.next().await, None, "the stream ends after its error");
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_start_times_out_too() {
        let start = tokio::time::Instant::now();
        let silent = stream::pending::<Item>();
        let mut frames = pin!(frames(silent, Duration::from_secs(5)));
        assert_eq!(frames.next().await, Some(Err(SseError::Idle(Duration::from_secs(5)))));
        assert_eq!(start.elapsed(), Duration::from_secs(5));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..64), 0..16)) {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
            runtime.block_on(async move {
                let items: Vec<Item> = chunks.into_iter().map(Ok).collect();
                decode(&collect(items).await);
            });
        }

        #[test]
        fn arbitrary_sse_shaped_bytes_never_panic(tokens in prop::collection::vec(sse_token(), 0..48), split in 1usize..16) {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
            runtime.block_on(async move {
                let bytes: Vec<u8> = tokens.concat();
                let items: Vec<Item> = bytes.chunks(split).map(|c| Ok(c.to_vec())).collect();
                decode(&collect(items).await);
            });
        }

        #[test]
        fn arbitrary_sse_of_json_chunks_never_panics(payloads in prop::collection::vec(chunk_json(), 0..12), split in 1usize..40) {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
            runtime.block_on(async move {
                let text: String = payloads.iter().map(|p| format!("data: {p}\n\n")).collect();
                let items: Vec<Item> = text.as_bytes().chunks(split).map(|c| Ok(c.to_vec())).collect();
                decode(&collect(items).await);
            });
        }
    }

    /// Feeds every frame to each compiled decoder — on past an error, a stronger test than the
    /// shell's, which stops at the first — then finishes it: none may panic.
    fn decode(frames: &[Outcome]) {
        #[cfg(feature = "openai")]
        drain(crate::openai::assembly::Assembler::new("P"), frames);
        #[cfg(feature = "anthropic")]
        drain(crate::anthropic::assembly::Assembler::new("P"), frames);
        let _ = frames;
    }

    #[allow(dead_code)]
    fn drain<D: Decoder>(mut decoder: D, frames: &[Outcome]) {
        for frame in frames.iter().filter_map(|f| f.clone().ok()) {
            let _ = decoder.feed(frame);
        }
        let _ = decoder.closed();
        let _ = decoder.finish();
    }

    /// Pieces of SSE syntax, a byte-order mark, JSON fragments and arbitrary bytes.
    fn sse_token() -> impl Strategy<Value = Vec<u8>> {
        let fixed: Vec<&'static [u8]> = vec![
            b"data:",
            b"data: ",
            b"event:",
            b"id:",
            b"retry:",
            b":",
            b"\n",
            b"\r",
            b"\r\n",
            b"\xef\xbb\xbf",
            b"\xef",
            b"[DONE]",
            b"{",
            b"}",
            b"\"",
            b"{\"choices\":[{\"delta\":",
            b"{\"error\":",
            b"\"tool_calls\":[{\"index\":",
            b"\xff",
            b"\xc3",
        ];
        prop_oneof![
            prop::sample::select(fixed).prop_map(<[u8]>::to_vec),
            prop::collection::vec(any::<u8>(), 0..8),
        ]
    }

    /// Chunk-shaped JSON with arbitrary content, indexes and argument fragments.
    fn chunk_json() -> impl Strategy<Value = String> {
        (any::<Option<String>>(), any::<Option<u32>>(), any::<Option<String>>(), any::<Option<String>>(), any::<bool>())
            .prop_map(|(content, index, id, args, usage)| {
                let mut delta = serde_json::json!({"content": content});
                if index.is_some() || id.is_some() || args.is_some() {
                    delta["tool_calls"] = serde_json::json!([{"index": index, "id": id, "function": {"name": "f", "arguments": args}}]);
                }
                let mut chunk = serde_json::json!({"choices": [{"index": 0, "delta": delta}]});
                if usage {
                    chunk["usage"] = serde_json::json!({"prompt_tokens": 1, "completion_tokens": 2});
                }
                chunk.to_string()
            })
    }
}
