//! Reading a session's JSONL log as it grows: each read returns the complete lines appended
//! since the last one, so a page following a log reads every byte of it once, however long the
//! log is.
//!
//! The rules are the store's reader's (`read_log`): each complete line is an envelope with the
//! next `seq`; a last line without its newline is being written (or torn) and is not read until
//! it is whole; any other defect names the file and the line. A log that no longer continues
//! what was read — shorter than the part already read (cut back after a failed append), or whose
//! next line does not carry the next `seq` — is read again from its start, and the caller is
//! told so ([`Read::Again`]). Only a regular file is read, and never past the size it had when
//! the read began.

use std::fs::File;
use std::io::{BufReader, Read as _, Seek, SeekFrom};
use std::path::PathBuf;

use rein_runtime::event::Envelope;
use rein_runtime::store::StoreError;
use rein_runtime::store::line::{self, LineRead, MAX_LINE_BYTES};

/// What a read found.
#[derive(Debug, PartialEq)]
pub(crate) enum Read {
    /// The events appended since the last read (all of them on the first), maybe none.
    New(Vec<Envelope>),
    /// The log does not continue what was read: all of its events, from the start.
    Again(Vec<Envelope>),
}

/// One log file, read as it grows.
#[derive(Debug)]
pub(crate) struct LogReader {
    path: PathBuf,
    /// The bytes of complete lines read so far.
    offset: u64,
    /// The lines read so far (= the next `seq`).
    lines: u64,
    /// Every byte read from the file, for the tests' accounting.
    bytes_read: u64,
}

/// Why a read stopped short.
enum Stop {
    /// The next line does not continue what was read.
    Diverged(StoreError),
    /// The file cannot be read.
    Failed(String),
}

impl LogReader {
    /// A reader of the log at `path` that has read nothing yet.
    pub(crate) fn new(path: PathBuf) -> Self {
        Self { path, offset: 0, lines: 0, bytes_read: 0 }
    }

    /// How many bytes it has read from the file in all.
    #[cfg(test)]
    pub(crate) fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    /// The events appended since the last read, as the module says. Blocking.
    pub(crate) fn read(&mut self) -> Result<Read, String> {
        let continued = self.offset > 0;
        match self.read_on() {
            Ok(events) => Ok(Read::New(events)),
            Err(Stop::Failed(e)) => Err(e),
            Err(Stop::Diverged(e)) if !continued => Err(e.to_string()),
            Err(Stop::Diverged(_)) => {
                *self = Self::new(std::mem::take(&mut self.path));
                match self.read_on() {
                    Ok(events) => Ok(Read::Again(events)),
                    Err(Stop::Failed(e)) => Err(e),
                    Err(Stop::Diverged(e)) => Err(e.to_string()),
                }
            }
        }
    }

    fn read_on(&mut self) -> Result<Vec<Envelope>, Stop> {
        let shown = self.path.display().to_string();
        let failed = |e: std::io::Error| Stop::Failed(format!("{shown}: {e}"));
        // Looked at before it is opened: opening a FIFO would block.
        if !std::fs::metadata(&self.path).map_err(failed)?.is_file() {
            return Err(Stop::Failed(format!("{shown}: not a regular file")));
        }
        let file = File::open(&self.path).map_err(failed)?;
        let size = file.metadata().map_err(failed)?.len();
        if size < self.offset {
            let message = format!("the log is {size} bytes, shorter than the {} read", self.offset);
            return Err(Stop::Diverged(corrupt(&shown, self.lines + 1, message)));
        }
        let mut file = file;
        file.seek(SeekFrom::Start(self.offset)).map_err(failed)?;
        let mut reader = BufReader::new(file.take(size - self.offset));
        let mut events = Vec::new();
        let mut buf = Vec::new();
        loop {
            let before = self.bytes_read;
            let read = line::read_line(&mut reader, &mut buf, MAX_LINE_BYTES).map_err(failed)?;
            match read {
                LineRead::End | LineRead::Torn | LineRead::TooLong { complete: false, .. } => {
                    // Counted for the accounting, read again once whole.
                    self.bytes_read = before + buf.len() as u64;
                    return Ok(events);
                }
                LineRead::TooLong { bytes, complete: true } => {
                    let message = format!(
                        "the line is {bytes} bytes, over the limit of {MAX_LINE_BYTES} bytes"
                    );
                    return Err(Stop::Failed(corrupt(&shown, self.lines + 1, message).to_string()));
                }
                LineRead::Line => {
                    self.bytes_read = before + buf.len() as u64 + 1;
                    let event = line::decode(&buf, self.lines)
                        .map_err(|m| Stop::Diverged(corrupt(&shown, self.lines + 1, m)))?;
                    events.push(event);
                    self.offset += buf.len() as u64 + 1;
                    self.lines += 1;
                }
            }
        }
    }
}

/// The store's message for a line that does not parse (`PATH:LINE: corrupt log line: …`).
fn corrupt(path: &str, line: u64, message: String) -> StoreError {
    StoreError::Corrupt { path: path.to_owned(), line, message }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use std::path::Path;

    use rein_runtime::event::{AgentIdle, Event, UserMessage};

    use super::*;

    fn line(seq: u64, text: &str) -> String {
        let event = if text.is_empty() {
            Event::AgentIdle(AgentIdle {})
        } else {
            Event::UserMessage(UserMessage { text: text.into() })
        };
        let envelope = Envelope { seq, time: seq, event };
        format!("{}\n", serde_json::to_string(&envelope).unwrap())
    }

    fn append(path: &Path, text: &str) {
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap();
        file.write_all(text.as_bytes()).unwrap();
    }

    fn seqs(read: Result<Read, String>) -> String {
        match read {
            Ok(Read::New(events)) => {
                format!("new {:?}", events.iter().map(|e| e.seq).collect::<Vec<_>>())
            }
            Ok(Read::Again(events)) => {
                format!("again {:?}", events.iter().map(|e| e.seq).collect::<Vec<_>>())
            }
            Err(e) => format!("error {e}"),
        }
    }

    #[test]
    fn each_read_reads_only_what_was_appended_and_a_line_once_it_is_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let history: String = (0..1000).map(|seq| line(seq, "an old message")).collect();
        append(&path, &history);
        let mut reader = LogReader::new(path.clone());
        assert_eq!(seqs(reader.read()), format!("new {:?}", (0..1000).collect::<Vec<_>>()));
        assert_eq!(reader.bytes_read(), history.len() as u64);

        // Nothing new: nothing read.
        assert_eq!(seqs(reader.read()), "new []");
        assert_eq!(reader.bytes_read(), history.len() as u64);

        // One line, written in two parts: nothing until it is whole, then only it.
        let next = line(1000, "");
        let (first, rest) = next.split_at(10);
        append(&path, first);
        assert_eq!(seqs(reader.read()), "new []");
        append(&path, rest);
        assert_eq!(seqs(reader.read()), "new [1000]");
        let whole = history.len() + next.len();
        assert_eq!(reader.bytes_read(), (whole + first.len()) as u64, "the new bytes only");
    }

    #[test]
    fn a_log_that_no_longer_continues_is_read_again_and_a_corrupt_one_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        append(&path, &format!("{}{}", line(0, "a"), line(1, "b")));
        let mut reader = LogReader::new(path.clone());
        assert_eq!(seqs(reader.read()), "new [0, 1]");
        // Cut back to its first line: read again.
        std::fs::write(&path, line(0, "a")).unwrap();
        assert_eq!(seqs(reader.read()), "again [0]");
        // Replaced by a log that goes on where this one was: read on (only seqs tell logs
        // apart); one whose next line does not carry the next seq is read again.
        std::fs::write(&path, format!("{}{}", line(0, "x"), line(1, "y"))).unwrap();
        assert_eq!(seqs(reader.read()), "new [1]");
        std::fs::write(&path, format!("{}{}{}", line(0, "x"), line(1, "y"), line(5, "z"))).unwrap();
        assert_eq!(
            seqs(reader.read()),
            format!("error {}:3: corrupt log line: seq 5 where seq 2 was expected", path.display())
        );
        std::fs::write(&path, "not json\n").unwrap();
        let error = seqs(LogReader::new(path.clone()).read());
        assert!(
            error.starts_with(&format!("error {}:1: corrupt log line: ", path.display())),
            "{error}"
        );
        let missing = dir.path().join("missing.jsonl");
        let error = seqs(LogReader::new(missing.clone()).read());
        assert!(error.starts_with(&format!("error {}: ", missing.display())), "{error}");
        let error = seqs(LogReader::new(dir.path().to_owned()).read());
        assert_eq!(error, format!("error {}: not a regular file", dir.path().display()));
    }
}
