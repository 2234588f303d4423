//! Reading a request's body: at most [`MAX_BODY_BYTES`], all of it within [`BODY_TIMEOUT`].
//!
//! A body longer than the limit is refused, but first read to its end and dropped, up to
//! [`DRAIN_BYTES`] and within the same time: a client still sending its body when the answer
//! comes and the connection closes would see a broken pipe, not the answer. A body announced
//! (`Content-Length`) longer than that is refused before a byte of it is read. One that has not
//! fully arrived in time (a client that sent part of it and waits) is refused then. Either way the
//! connection is closed after the answer. The answers are the console's JSON errors
//! (`server.rs`).

use std::time::Duration;

use axum::body::{Body, Bytes};
use futures::StreamExt;

/// The largest request body (8 MiB): any prompt within its own limit (1 MiB of text) fits,
/// however its JSON escapes it.
pub(crate) const MAX_BODY_BYTES: usize = 8 << 20;

/// The longest a request's body may take to arrive, from the moment its handler reads it.
pub(crate) const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// How much of a body over the limit is read and dropped before the refusal (64 MiB).
pub(crate) const DRAIN_BYTES: u64 = 64 << 20;

/// Why a body could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BodyError {
    /// It is (or says it is) longer than the limit.
    TooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// It did not arrive within the limit.
    TimedOut(Duration),
    /// The connection failed while it arrived.
    Broken(String),
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::TooLarge { limit } => {
                write!(f, "the request body is larger than {} MiB", limit >> 20)
            }
            BodyError::TimedOut(limit) => {
                write!(f, "the request body did not arrive within {} s", limit.as_secs())
            }
            BodyError::Broken(e) => write!(f, "the request body could not be read: {e}"),
        }
    }
}

/// The body, when it is at most `limit` bytes (`announced` is its `Content-Length`, if sent)
/// and arrives within `timeout`; a longer one is drained as the module says, up to `drain`
/// bytes.
pub(crate) async fn read(
    body: Body,
    announced: Option<u64>,
    limit: usize,
    drain: u64,
    timeout: Duration,
) -> Result<Bytes, BodyError> {
    if announced.is_some_and(|length| length > drain) {
        return Err(BodyError::TooLarge { limit });
    }
    let collect = async {
        let mut stream = body.into_data_stream();
        let mut bytes = Vec::new();
        let mut seen: u64 = 0;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| BodyError::Broken(e.to_string()))?;
            seen += chunk.len() as u64;
            if seen > drain {
                break;
            }
            if seen <= limit as u64 {
                bytes.extend_from_slice(&chunk);
            }
        }
        if seen > limit as u64 || announced.is_some_and(|length| length > limit as u64) {
            return Err(BodyError::TooLarge { limit });
        }
        Ok(Bytes::from(bytes))
    };
    tokio::time::timeout(timeout, collect).await.map_err(|_| BodyError::TimedOut(timeout))?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(parts: &[&'static str]) -> Body {
        let parts: Vec<Result<Bytes, std::io::Error>> =
            parts.iter().map(|p| Ok(Bytes::from_static(p.as_bytes()))).collect();
        Body::from_stream(futures::stream::iter(parts))
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_is_read_within_its_size_and_time() {
        let second = Duration::from_secs(1);
        let read_all = |body, announced, limit| read(body, announced, limit, 8, second);
        assert_eq!(read_all(chunks(&["ab", "cd"]), Some(4), 4).await, Ok(Bytes::from("abcd")));
        assert_eq!(read_all(chunks(&[]), None, 4).await, Ok(Bytes::new()));
        // Too long, announced or not: drained (up to 8 bytes here), then refused.
        let too_large = Err(BodyError::TooLarge { limit: 4 });
        assert_eq!(read_all(chunks(&["ab", "cde"]), Some(5), 4).await, too_large);
        assert_eq!(read_all(chunks(&["abc", "de"]), None, 4).await, too_large);
        assert_eq!(read_all(chunks(&["abcdef", "ghijk", "x"]), None, 4).await, too_large);
        // Announced longer than what is drained: refused unread (the stream would fail if read).
        let failing = futures::stream::iter([Err::<Bytes, _>(std::io::Error::other("unread"))]);
        assert_eq!(read_all(Body::from_stream(failing), Some(9), 4).await, too_large);
        // Part of it, then nothing: refused when the time is up.
        let stalled = futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from("ab"))])
            .chain(futures::stream::pending());
        let started = tokio::time::Instant::now();
        assert_eq!(
            read_all(Body::from_stream(stalled), Some(4), 4).await,
            Err(BodyError::TimedOut(second))
        );
        assert_eq!(started.elapsed(), second);
    }

    #[test]
    fn refusals_say_what_was_refused() {
        let cases = [
            (
                BodyError::TooLarge { limit: MAX_BODY_BYTES },
                "the request body is larger than 8 MiB",
            ),
            (BodyError::TimedOut(BODY_TIMEOUT), "the request body did not arrive within 10 s"),
        ];
        for (error, want) in cases {
            assert_eq!(error.to_string(), want);
        }
    }
}
