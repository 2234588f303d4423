//! One log line: an [`Envelope`] as one line of JSON.
//!
//! Both durable stores hold the same text: the JSONL store writes each line followed by `\n`,
//! the SQLite store keeps it in the `line` column. Decoding checks the `seq` a line must have, so
//! "not contiguous from 0" is reported at the line that breaks it, like any other corruption.
//!
//! # Why a line has a size limit
//!
//! A reader holds one line in memory to parse it. Without a bound, one damaged or hostile line —
//! gigabytes without a newline — makes the reader allocate until the process aborts. So a line
//! is at most [`MAX_LINE_BYTES`] (64 MiB, far above any event rein writes): the stores refuse to
//! write a longer one ([`EncodeError::TooLong`], nothing written), and every reader of logs —
//! the JSONL store's load, `rein check` — reads with [`read_line`], which never holds more than
//! the limit and reports a longer line as such.

use std::io::{self, BufRead, Read};

use crate::event::Envelope;

/// The longest log line, in bytes, without its newline: 64 MiB.
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// Why an event cannot be written as a log line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The event's line would be longer than [`MAX_LINE_BYTES`].
    #[error(
        "the event with seq {seq} is {bytes} bytes as a log line, over the limit of {MAX_LINE_BYTES} bytes (64 MiB)"
    )]
    TooLong {
        /// The event's `seq`.
        seq: u64,
        /// The length of its line.
        bytes: usize,
    },
    /// A counter of the event is at its largest value (`event::Exhausted`): nothing could
    /// follow it, so no log holds it.
    #[error("the event with seq {seq} cannot be written: {counter}")]
    Exhausted {
        /// The event's `seq`.
        seq: u64,
        /// The counter.
        counter: crate::event::Exhausted,
    },
    /// The event cannot be serialized.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// The JSON of one envelope, without a newline; at most [`MAX_LINE_BYTES`], with no counter at
/// its largest value.
pub fn encode(envelope: &Envelope) -> Result<String, EncodeError> {
    continuable(envelope)?;
    let line = serde_json::to_string(envelope)?;
    within_limit(envelope.seq, line.len())?;
    Ok(line)
}

/// Refuses an event with a counter at its largest value.
fn continuable(envelope: &Envelope) -> Result<(), EncodeError> {
    match envelope.exhausted() {
        Some(counter) => Err(EncodeError::Exhausted { seq: envelope.seq, counter }),
        None => Ok(()),
    }
}

/// Refuses a line of `bytes` bytes over [`MAX_LINE_BYTES`].
fn within_limit(seq: u64, bytes: usize) -> Result<(), EncodeError> {
    if bytes > MAX_LINE_BYTES { Err(EncodeError::TooLong { seq, bytes }) } else { Ok(()) }
}

/// The JSONL text of an append: each envelope's JSON followed by `\n`, in one buffer so that the
/// whole append can be written with a single `write`. Every line is at most [`MAX_LINE_BYTES`].
pub fn encode_lines(events: &[Envelope]) -> Result<Vec<u8>, EncodeError> {
    let mut buf = Vec::with_capacity(events.len() * 160);
    for event in events {
        continuable(event)?;
        let start = buf.len();
        serde_json::to_writer(&mut buf, event)?;
        within_limit(event.seq, buf.len() - start)?;
        buf.push(b'\n');
    }
    Ok(buf)
}

/// What [`read_line`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineRead {
    /// The end of the input: no more bytes.
    End,
    /// A complete line; the buffer holds it without its newline.
    Line,
    /// The last bytes of the input, without a newline; the buffer holds them.
    Torn,
    /// A line longer than the limit, skipped: the buffer is empty.
    TooLong {
        /// Its length in bytes, without the newline.
        bytes: u64,
        /// Whether it ends in a newline (else it is the input's torn tail).
        complete: bool,
    },
}

/// Reads the next line of `reader` into `buf` (cleared first), holding at most `max + 1` bytes
/// whatever the input: a longer line is skipped up to its newline (or the end of the input) and
/// reported as [`LineRead::TooLong`]. `max` is [`MAX_LINE_BYTES`] for logs.
pub fn read_line(reader: &mut impl BufRead, buf: &mut Vec<u8>, max: usize) -> io::Result<LineRead> {
    buf.clear();
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    let read = reader.by_ref().take(limit).read_until(b'\n', buf)?;
    if read == 0 {
        return Ok(LineRead::End);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        return Ok(LineRead::Line);
    }
    if buf.len() <= max {
        // `take` was not used up: the input ended.
        return Ok(LineRead::Torn);
    }
    let mut bytes = buf.len() as u64;
    buf.clear();
    loop {
        let available = match reader.fill_buf() {
            Ok(available) => available,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(LineRead::TooLong { bytes, complete: false });
        }
        if let Some(at) = available.iter().position(|&b| b == b'\n') {
            reader.consume(at + 1);
            bytes += at as u64;
            return Ok(LineRead::TooLong { bytes, complete: true });
        }
        let n = available.len();
        reader.consume(n);
        bytes += n as u64;
    }
}

/// Decodes one line (without its newline) that must hold `seq` = `expected` and no counter at
/// its largest value. The error says why, for a
/// [`StoreError::Corrupt`](super::StoreError::Corrupt) message.
pub fn decode(line: &[u8], expected: u64) -> Result<Envelope, String> {
    // The parser quotes what it did not expect whole: cut, it still says what and where.
    let envelope: Envelope = serde_json::from_slice(line)
        .map_err(|e| crate::quote::message(&e.to_string()).into_owned())?;
    if envelope.seq != expected {
        return Err(format!("seq {} where seq {expected} was expected", envelope.seq));
    }
    if let Some(counter) = envelope.exhausted() {
        return Err(format!("{counter}: the log cannot be continued"));
    }
    Ok(envelope)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Event, UserMessage};

    fn message(seq: u64, text: &str) -> Envelope {
        Envelope { seq, time: 7, event: Event::UserMessage(UserMessage { text: text.into() }) }
    }

    #[test]
    fn lines_are_one_json_object_each_even_when_text_has_newlines() {
        let events = [message(0, "a\nb"), message(1, "c")];
        let text = String::from_utf8(encode_lines(&events).unwrap()).unwrap();
        assert_eq!(
            text,
            "{\"seq\":0,\"time\":7,\"type\":\"user/message\",\"data\":{\"text\":\"a\\nb\"}}\n\
             {\"seq\":1,\"time\":7,\"type\":\"user/message\",\"data\":{\"text\":\"c\"}}\n"
        );
        for (line, event) in text.lines().zip(&events) {
            assert_eq!(line, encode(event).unwrap());
            assert_eq!(&decode(line.as_bytes(), event.seq).unwrap(), event);
        }
    }

    #[test]
    fn lines_are_read_within_the_limit_and_longer_ones_skipped() {
        use LineRead::*;
        let cases: [(&str, &[(LineRead, &str)]); 7] = [
            ("", &[(End, "")]),
            ("ab\ncd\n", &[(Line, "ab"), (Line, "cd"), (End, "")]),
            ("ab\n\ncd", &[(Line, "ab"), (Line, ""), (Torn, "cd"), (End, "")]),
            // Exactly the limit is fine; one byte more is too long, complete or torn.
            (
                "abcd\nabcde\nx\n",
                &[
                    (Line, "abcd"),
                    (TooLong { bytes: 5, complete: true }, ""),
                    (Line, "x"),
                    (End, ""),
                ],
            ),
            ("abcdefghij\n", &[(TooLong { bytes: 10, complete: true }, ""), (End, "")]),
            (
                "x\nabcdefghij",
                &[(Line, "x"), (TooLong { bytes: 10, complete: false }, ""), (End, "")],
            ),
            ("abcd", &[(Torn, "abcd"), (End, "")]),
        ];
        for (input, want) in cases {
            // A tiny buffer: a long line spans many `fill_buf`s.
            let mut reader = io::BufReader::with_capacity(2, input.as_bytes());
            let mut buf = Vec::new();
            for (read, text) in want {
                assert_eq!(read_line(&mut reader, &mut buf, 4).unwrap(), *read, "{input:?}");
                assert_eq!(buf, text.as_bytes(), "{input:?}");
                assert!(buf.capacity() <= 16, "{input:?}: holds at most the limit");
            }
        }
    }

    #[test]
    fn a_line_longer_than_the_limit_is_refused() {
        assert!(within_limit(3, MAX_LINE_BYTES).is_ok());
        let err = within_limit(3, MAX_LINE_BYTES + 1).unwrap_err();
        assert!(
            matches!(err, EncodeError::TooLong { seq: 3, bytes } if bytes == MAX_LINE_BYTES + 1)
        );
        assert_eq!(
            err.to_string(),
            "the event with seq 3 is 67108865 bytes as a log line, over the limit of 67108864 bytes (64 MiB)"
        );
    }

    #[test]
    fn a_counter_at_its_largest_value_is_neither_written_nor_read() {
        use crate::event::TurnStart;
        let last =
            Envelope { seq: 2, time: 7, event: Event::TurnStart(TurnStart { turn: u32::MAX }) };
        let err = encode(&last).unwrap_err().to_string();
        assert_eq!(
            err,
            "the event with seq 2 cannot be written: turn 4294967295 is the largest there can be: \
             no turn can follow it"
        );
        assert!(matches!(
            encode_lines(&[message(1, "a"), last]),
            Err(EncodeError::Exhausted { seq: 2, .. })
        ));
        let line = br#"{"seq":2,"time":7,"type":"turn/start","data":{"turn":4294967295}}"#;
        assert_eq!(
            decode(line, 2).unwrap_err(),
            "turn 4294967295 is the largest there can be: no turn can follow it: the log cannot \
             be continued"
        );
    }

    #[test]
    fn decoding_names_what_is_wrong() {
        let cases: [(&str, u64, &str); 4] = [
            (
                r#"{"seq":3,"time":7,"type":"user/message","data":{"text":"x"}}"#,
                2,
                "seq 3 where seq 2",
            ),
            (r#"{"seq":0,"time":7,"type":"user/message","data":{"text":"#, 0, "EOF"),
            (r#"{"seq":0,"time":7,"type":"no/such","data":{}}"#, 0, "no/such"),
            ("", 0, "EOF"),
        ];
        for (line, expected, needle) in cases {
            let err = decode(line.as_bytes(), expected).unwrap_err();
            assert!(err.contains(needle), "{line}: {err}");
        }
    }
}
