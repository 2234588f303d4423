//! Reading a request's body: at most [`MAX_BODY_BYTES`], all of it within [`BODY_TIMEOUT`].
//!
//! A body announced longer than the limit (`Content-Length`) is refused before a byte of it is
//! read; one that turns out longer is refused once it passes the limit; one that has not fully
//! arrived in time (a client that sent part of it and waits) is refused then. Either way the
//! connection is closed after the answer: the rest of the body was never read. The answers are
//! the console's JSON errors (`server.rs`).

use std::time::Duration;

use axum::body::{Body, Bytes};
use futures::StreamExt;

/// The largest request body (8 MiB): any prompt within its own limit (1 MiB of text) fits,
/// however its JSON escapes it.
pub(crate) const MAX_BODY_BYTES: usize = 8 << 20;

/// The longest a request's body may take to arrive, from the moment its handler reads it.
pub(crate) const BODY_TIMEOUT: Duration = Duration::from_secs(10);

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
/// and arrives within `timeout`.
pub(crate) async fn read(
    body: Body,
    announced: Option<u64>,
    limit: usize,
    timeout: Duration,
) -> Result<Bytes, BodyError> {
    if announced.is_some_and(|length| length > limit as u64) {
        return Err(BodyError::TooLarge { limit });
    }
    let collect = async {
        let mut stream = body.into_data_stream();
        let mut bytes = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| BodyError::Broken(e.to_string()))?;
            if bytes.len() + chunk.len() > limit {
                return Err(BodyError::TooLarge { limit });
            }
            bytes.extend_from_slice(&chunk);
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
        let read_all = |body, announced, limit| read(body, announced, limit, second);
        assert_eq!(read_all(chunks(&["ab", "cd"]), Some(4), 4).await, Ok(Bytes::from("abcd")));
        assert_eq!(read_all(chunks(&[]), None, 4).await, Ok(Bytes::new()));
        // Announced too long: refused unread; longer than announced or unannounced: at the limit.
        assert_eq!(
            read_all(chunks(&["ab"]), Some(5), 4).await,
            Err(BodyError::TooLarge { limit: 4 })
        );
        assert_eq!(
            read_all(chunks(&["abc", "de"]), None, 4).await,
            Err(BodyError::TooLarge { limit: 4 })
        );
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
