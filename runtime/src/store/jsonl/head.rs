//! A JSONL log's [`Head`], read from the end of its file.
//!
//! # Why the head is read backwards, not kept in a file
//!
//! A `<session>.head` file beside each log would be a second write (and, at `Disk`, a second
//! sync) on every append, doubling the cost of the store's one operation that must be cheap. But
//! the head only depends on the log from its last turn boundary on: the last `turn/start` or
//! `turn/end` decides the open turn, and a pending wait can only be in the open turn. So the head
//! is derived when asked (at start, by `Runtime::resume_pending`), by walking back from the end of
//! the file in fixed-size windows, a line at a time, until the last `turn/start` or `turn/end`,
//! and folding forward from there. That reads a closed log's last few lines, and an open turn's
//! lines, never the history before it; appends pay nothing.
//!
//! A last line without its newline was never acknowledged (see the store): it is not part of the
//! head, and nothing is cut here (this is a read; opening the session cuts it). The `seq`s walked
//! must run back one by one; a line that does not parse, or breaks that run, makes the head
//! unreadable, naming the file (the session's load then reports it with its line).

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

use crate::event::{Envelope, Event};
use crate::file;
use crate::store::line::{MAX_LINE_BYTES, decode};
use crate::store::{Head, MAX_LOG_BYTES};

/// The window read at a time (larger for a longer line).
const WINDOW: usize = 64 * 1024;

/// The head of the log at `path`; `Ok(None)` when there is no such file. The error is a message
/// naming the file.
pub(super) fn read_head(path: &Path) -> Result<Option<Head>, String> {
    let at = |e: io::Error| format!("{}: {e}", path.display());
    let mut file = match file::open_read(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(at(e)),
    };
    let len = file::within(&file, MAX_LOG_BYTES).map_err(at)?;
    let mut lines = Lines { file: &mut file, pos: len, held: Vec::new(), started: false };
    // The newest events first, back to (and including) the last turn boundary.
    let mut newest_first: Vec<Envelope> = Vec::new();
    while let Some(line) = lines.previous().map_err(at)? {
        let corrupt = |message: String| {
            format!("{}: the log's end does not parse: {message}", path.display())
        };
        let event = match newest_first.last() {
            None => {
                serde_json::from_slice::<Envelope>(&line).map_err(|e| corrupt(e.to_string()))?
            }
            Some(after) => {
                let expected = after
                    .seq
                    .checked_sub(1)
                    .ok_or_else(|| corrupt("a line before seq 0".into()))?;
                decode(&line, expected).map_err(corrupt)?
            }
        };
        let boundary = matches!(event.event, Event::TurnStart(_) | Event::TurnEnd(_));
        newest_first.push(event);
        if boundary {
            break;
        }
    }
    let mut head = Head::default();
    for event in newest_first.iter().rev() {
        head.apply(event);
    }
    Ok(Some(head))
}

/// A file's complete lines, read from its end backwards.
struct Lines<'a> {
    file: &'a mut File,
    /// The bytes before `pos` are not read yet.
    pos: u64,
    /// Read bytes not yet returned: the end of the line being assembled, and the lines after it
    /// that are not returned yet (`held` ends at the end of the next line to return).
    held: Vec<u8>,
    /// Whether the trailing part of the file (a torn tail) has been dropped.
    started: bool,
}

impl Lines<'_> {
    /// The line before the last one returned (without its newline); `None` at the file's start.
    fn previous(&mut self) -> io::Result<Option<Vec<u8>>> {
        loop {
            if !self.started {
                // Drop everything after the last newline: a torn tail, never acknowledged.
                if let Some(at) = self.held.iter().rposition(|&b| b == b'\n') {
                    self.held.truncate(at + 1);
                    self.started = true;
                    continue;
                }
                if self.pos == 0 {
                    return Ok(None);
                }
                self.held.clear();
                self.read_window()?;
                continue;
            }
            if self.held.is_empty() && self.pos == 0 {
                return Ok(None);
            }
            // `held` ends with the newline of the line to return (or is empty).
            let body = self.held.len().saturating_sub(1);
            if let Some(at) = self.held[..body].iter().rposition(|&b| b == b'\n') {
                let line = self.held[at + 1..body].to_vec();
                self.held.truncate(at + 1);
                return Ok(Some(line));
            }
            if self.pos == 0 {
                let line = self.held[..body].to_vec();
                self.held.clear();
                return Ok(Some(line));
            }
            if body > MAX_LINE_BYTES {
                return Err(io::Error::other(format!(
                    "a line is over the limit of {MAX_LINE_BYTES} bytes"
                )));
            }
            self.read_window()?;
        }
    }

    /// Prepends the window before `pos` to `held` (a window at least as long as `held`, so a
    /// long line costs reads in proportion to its length).
    fn read_window(&mut self) -> io::Result<()> {
        let size = WINDOW.max(self.held.len());
        let from = self.pos.saturating_sub(size as u64);
        let mut window = vec![0; usize::try_from(self.pos - from).unwrap_or(0)];
        self.file.seek(SeekFrom::Start(from))?;
        self.file.read_exact(&mut window)?;
        window.extend_from_slice(&self.held);
        self.held = window;
        self.pos = from;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{AgentIdle, LlmRetry, TurnEnd, TurnEndReason, TurnStart, UserMessage};
    use crate::failure::Failure;

    fn line(seq: u64, time: u64, event: Event) -> String {
        serde_json::to_string(&Envelope { seq, time, event }).unwrap() + "\n"
    }

    fn retry(delay_ms: f64) -> Event {
        Event::LlmRetry(LlmRetry {
            retry_id: "r".into(),
            turn: 2,
            step: 1,
            provider: "p".into(),
            plugin: "llm-retry".into(),
            mode: "normal".into(),
            policy_key: "k".into(),
            retry: 1,
            max_retries: Some(3),
            delay_ms,
            failure: Failure::new("TRANSPORT", "x").unwrap(),
        })
    }

    fn read(text: &str) -> Result<Option<Head>, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, text).unwrap();
        read_head(&path)
    }

    #[test]
    fn the_head_is_read_from_the_end_back_to_the_last_turn_boundary() {
        let idle = || Event::AgentIdle(AgentIdle {});
        let start = |turn| Event::TurnStart(TurnStart { turn });
        let end = |turn| Event::TurnEnd(TurnEnd { turn, reason: TurnEndReason::Completed });
        let long = Event::UserMessage(UserMessage { text: "é".repeat(100_000) });
        let closed = [line(0, 1, idle()), line(1, 2, start(1)), line(2, 3, end(1))].concat();
        let open = [closed.clone(), line(3, 4, start(2)), line(4, 100, retry(50.5))].concat();
        let head = |next_seq, open_turn, wake_at| Some(Head { next_seq, open_turn, wake_at });
        // (the file, the head)
        let cases: Vec<(String, Option<Head>)> = vec![
            (String::new(), head(0, None, None)),
            (line(0, 1, idle()), head(1, None, None)),
            (closed.clone(), head(3, None, None)),
            (open.clone(), head(5, Some(2), Some(151))),
            // Lines longer than a window, before and inside the open turn.
            (
                [line(0, 1, long.clone()), line(1, 2, start(1)), line(2, 3, long.clone())].concat(),
                head(3, Some(1), None),
            ),
            ([line(0, 1, long.clone()), line(1, 2, long.clone())].concat(), head(2, None, None)),
            // A torn tail is not part of the head.
            (format!("{open}{{\"seq\":5,\"ti"), head(5, Some(2), Some(151))),
            ("{\"seq\":0".into(), head(0, None, None)),
        ];
        for (text, want) in cases {
            assert_eq!(read(&text).unwrap(), want, "{}", &text[..text.len().min(200)]);
        }
        // What is before the boundary is never parsed.
        let behind = format!("not json\n{}", &closed[closed.find('\n').unwrap() + 1..]);
        assert_eq!(read(&behind).unwrap(), head(3, None, None));
    }

    #[test]
    fn a_log_whose_end_does_not_parse_has_no_head() {
        let start = Event::TurnStart(TurnStart { turn: 1 });
        let idle = || Event::AgentIdle(AgentIdle {});
        for text in [
            "not json\n".to_owned(),
            format!("{}not json\n", line(0, 1, start.clone())),
            // A gap in the seqs walked back.
            format!("{}{}", line(0, 1, start.clone()), line(2, 1, idle())),
        ] {
            let err = read(&text).unwrap_err();
            assert!(err.contains("s.jsonl: the log's end does not parse"), "{err}");
        }
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_head(&dir.path().join("missing.jsonl")), Ok(None));
    }
}
