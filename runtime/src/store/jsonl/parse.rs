//! Reading a JSONL log's bytes: the pure half of a load.
//!
//! [`parse_log`] decides, from the bytes alone, which events the file holds, whether its last
//! line is torn (to be cut) or whether the file is corrupt (to be left alone). The shell in
//! [`super::log_file`] then performs what it decided. It reads line by line with
//! [`line::read_line`], so it never holds more than one line of at most the line limit: a longer
//! complete line is corrupt, a longer torn tail is torn like any other.
//!
//! # Why a missing newline means "torn", whatever the bytes are
//!
//! The writer writes every line together with its `\n` in one `write`, and acknowledges the
//! append only after that write (and, for `Disk`, the sync) returned. So a last line without its
//! newline belongs to an append that was never acknowledged: nobody was told it happened, and
//! cutting it loses nothing anyone relied on — even when its JSON happens to be complete. A line
//! that does end in `\n` was written whole; if it does not parse, something other than a crash
//! damaged the file, and only a person should decide what to do with it.

use std::io::BufRead;
use std::path::Path;

use crate::event::Envelope;
use crate::store::StoreError;
use crate::store::line::{self, LineRead};

/// What a log file holds.
#[derive(Debug, PartialEq)]
pub(super) struct ParsedLog {
    /// The events of the complete lines, in order (`seq` contiguous from 0).
    pub(super) events: Vec<Envelope>,
    /// A torn last line, if any.
    pub(super) torn: Option<TornLine>,
}

/// A last line without its newline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TornLine {
    /// Its 1-based line number.
    pub(super) line: u64,
    /// The byte offset where it starts (= the length of the complete part).
    pub(super) start: u64,
}

/// Parses a whole log read from `reader`, lines of at most `max` bytes. Every line ending in
/// `\n` must be an envelope with the next `seq`; a last line without `\n` is torn. Any other
/// defect (a longer line included) is [`StoreError::Corrupt`] naming `path` and the 1-based line;
/// a read error is [`StoreError::Io`].
pub(super) fn parse_log(
    mut reader: impl BufRead,
    path: &Path,
    max: usize,
) -> Result<ParsedLog, StoreError> {
    let mut events = Vec::new();
    let mut offset: u64 = 0;
    let mut buf = Vec::new();
    let corrupt = |line: u64, message: String| StoreError::Corrupt {
        path: path.display().to_string(),
        line,
        message,
    };
    for index in 0u64.. {
        let number = index + 1;
        let torn = Some(TornLine { line: number, start: offset });
        match line::read_line(&mut reader, &mut buf, max).map_err(|e| StoreError::io(path, e))? {
            LineRead::End => break,
            LineRead::Torn | LineRead::TooLong { complete: false, .. } => {
                return Ok(ParsedLog { events, torn });
            }
            LineRead::TooLong { bytes, complete: true } => {
                return Err(corrupt(
                    number,
                    format!("the line is {bytes} bytes, over the limit of {max} bytes"),
                ));
            }
            LineRead::Line => {
                let event = line::decode(&buf, index).map_err(|m| corrupt(number, m))?;
                events.push(event);
                offset += buf.len() as u64 + 1;
            }
        }
    }
    Ok(ParsedLog { events, torn: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = r#"{"seq":0,"time":1,"type":"user/message","data":{"text":"a"}}"#;
    const B: &str = r#"{"seq":1,"time":2,"type":"agent/idle","data":{}}"#;
    const B_AT_5: &str = r#"{"seq":5,"time":2,"type":"agent/idle","data":{}}"#;

    enum Want {
        /// (events, torn (line, start))
        Parsed(usize, Option<(u64, u64)>),
        /// (line, part of the message)
        Corrupt(u64, &'static str),
    }

    #[test]
    fn decides_torn_versus_corrupt_from_the_bytes() {
        let a = A.len() as u64 + 1;
        let cases: Vec<(String, Want)> = vec![
            (String::new(), Want::Parsed(0, None)),
            (format!("{A}\n"), Want::Parsed(1, None)),
            (format!("{A}\n{B}\n"), Want::Parsed(2, None)),
            // A last line without newline is torn, even when its JSON is complete.
            (format!("{A}\n{B}"), Want::Parsed(1, Some((2, a)))),
            (format!("{A}\n{{\"seq\":1,"), Want::Parsed(1, Some((2, a)))),
            (A.to_owned(), Want::Parsed(0, Some((1, 0)))),
            ("{".to_owned(), Want::Parsed(0, Some((1, 0)))),
            // A complete last line that does not parse is corrupt, not torn.
            (format!("{A}\n{{\"seq\":1,\n"), Want::Corrupt(2, "EOF")),
            // So is any middle line, and a blank line.
            (format!("{A}\ngarbage\n{B}\n"), Want::Corrupt(2, "expected value")),
            (format!("{A}\n\n{B}\n"), Want::Corrupt(2, "EOF")),
            // A corrupt middle line wins over a torn tail: nothing may be cut.
            (format!("garbage\n{A}\n{B}"), Want::Corrupt(1, "expected value")),
            // seq must be contiguous from 0.
            (format!("{B}\n"), Want::Corrupt(1, "seq 1 where seq 0")),
            (format!("{A}\n{B_AT_5}\n"), Want::Corrupt(2, "seq 5 where seq 1")),
            (format!("{A}\n{A}\n"), Want::Corrupt(2, "seq 0 where seq 1")),
        ];
        for (text, want) in cases {
            let got = parse_log(text.as_bytes(), Path::new("/logs/s.jsonl"), 1000);
            match (got, want) {
                (Ok(parsed), Want::Parsed(events, torn)) => {
                    assert_eq!(parsed.events.len(), events, "{text:?}");
                    let torn_got = parsed.torn.map(|t| (t.line, t.start));
                    assert_eq!(torn_got, torn, "{text:?}");
                }
                (Err(StoreError::Corrupt { path, line, message }), Want::Corrupt(l, needle)) => {
                    assert_eq!((path.as_str(), line), ("/logs/s.jsonl", l), "{text:?}");
                    assert!(message.contains(needle), "{text:?}: {message}");
                }
                (got, _) => panic!("{text:?}: unexpected {got:?}"),
            }
        }
    }

    #[test]
    fn the_error_reads_file_colon_line() {
        let err = parse_log(&b"nope\n"[..], Path::new("/logs/s.jsonl"), 1000).unwrap_err();
        assert!(err.to_string().starts_with("/logs/s.jsonl:1: corrupt log line: "), "{err}");
    }

    #[test]
    fn a_line_over_the_limit_is_corrupt_when_complete_and_torn_when_last() {
        let max = A.len();
        let long = format!("{{\"seq\":1,\"pad\":\"{}\"}}", "x".repeat(max));
        let err = parse_log(format!("{A}\n{long}\n{B}\n").as_bytes(), Path::new("/l"), max);
        let err = err.unwrap_err().to_string();
        let want =
            format!("/l:2: corrupt log line: the line is {} bytes, over the limit", long.len());
        assert!(err.starts_with(&want), "{err}");
        let parsed = parse_log(format!("{A}\n{long}").as_bytes(), Path::new("/l"), max).unwrap();
        assert_eq!(parsed.events.len(), 1);
        assert_eq!(parsed.torn, Some(TornLine { line: 2, start: A.len() as u64 + 1 }));
    }
}
