//! One session's `.jsonl` file: the blocking I/O of the JSONL store.
//!
//! Everything here runs on tokio's blocking pool with the session's slot locked (see
//! [`super`]), so a load never sees half of a concurrent append and two appends never interleave.
//!
//! # Why an append is all or nothing
//!
//! An append is one `write` of all its lines. If that write (or, for `Disk`, the sync) fails, the
//! file is truncated back to its length before the append and the open handle is dropped, so a
//! failed append never shows up on reload, not even as complete lines (a full disk can take half
//! of a write: the half is cut). If the truncation itself fails, the store remembers the length
//! the file must be cut back to, and cuts it before the session's next append or load (which fail
//! while it cannot): the file never grows past its last acknowledged end with what nobody was
//! told.

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::path::Path;

use super::parse::{TornLine, parse_log};
use crate::event::Envelope;
use crate::file;
use crate::store::line::{LineRead, MAX_LINE_BYTES, decode, read_line};
use crate::store::sync::Syncer;
use crate::store::{Durability, Loaded, MAX_LOG_BYTES, StoreError, TornTail};

/// How the store writes: its durability and syncer.
#[derive(Clone, Copy)]
pub(super) struct WriteMode<'a> {
    pub(super) durability: Durability,
    pub(super) syncer: &'a dyn Syncer,
}

impl WriteMode<'_> {
    /// Syncs `file` when the durability is `Disk`.
    fn sync(&self, file: &File, path: &Path) -> Result<(), StoreError> {
        if self.durability == Durability::Disk {
            self.syncer.sync(file).map_err(|e| StoreError::io(path, e))?;
        }
        Ok(())
    }

    /// Makes a newly created entry of `dir` durable when the durability is `Disk`.
    fn sync_dir(&self, dir: &Path) -> Result<(), StoreError> {
        // Only Unix can open (and fsync) a directory; elsewhere the file system orders this.
        if cfg!(unix) && self.durability == Durability::Disk {
            let handle = File::open(dir).map_err(|e| StoreError::io(dir, e))?;
            self.sync(&handle, dir)?;
        }
        Ok(())
    }
}

/// A log file opened for appending, with what the store knows about it.
#[derive(Debug)]
pub(super) struct LogFile {
    file: File,
    /// The length of its complete lines (= the file's length).
    len: u64,
    /// The `seq` the next appended event must have.
    next_seq: u64,
}

impl LogFile {
    /// The `seq` the next appended event must have.
    pub(super) fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Creates the log of a new session (its first append must start at seq 0).
    pub(super) fn create(path: &Path, mode: WriteMode<'_>) -> Result<Self, StoreError> {
        let options = OpenOptions::new().read(true).append(true).create(true).clone();
        let file = file::open(path, &options).map_err(|e| StoreError::io(path, e))?;
        if let Some(dir) = path.parent() {
            mode.sync_dir(dir)?;
        }
        Ok(Self { file, len: 0, next_seq: 0 })
    }

    /// Opens an existing log for appending without reading all of it: only its last line is
    /// parsed (for the next `seq`). `None` when the file does not exist. A torn tail sends it
    /// down the full [`load`] path, which cuts the tail only if the rest of the file is sound.
    pub(super) fn open(
        path: &Path,
        torn_path: &Path,
        mode: WriteMode<'_>,
    ) -> Result<Option<Self>, StoreError> {
        let mut file = match file::open(path, OpenOptions::new().read(true).append(true)) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StoreError::io(path, e)),
        };
        let len = file::within(&file, MAX_LOG_BYTES).map_err(|e| StoreError::io(path, e))?;
        if len == 0 {
            return Ok(Some(Self { file, len, next_seq: 0 }));
        }
        let corrupt = |file: &mut File, message: String| StoreError::Corrupt {
            path: path.display().to_string(),
            line: count_lines(file).unwrap_or(0),
            message,
        };
        let line =
            match last_line(&mut file, len, MAX_LINE_BYTES).map_err(|e| StoreError::io(path, e))? {
                LastLine::Complete(line) => line,
                LastLine::Torn => {
                    drop(file);
                    return Ok(load(path, torn_path, mode, Cut::Allowed)?.and_then(|(_, log)| log));
                }
                LastLine::TooLong => {
                    let message = format!("the line is over the limit of {MAX_LINE_BYTES} bytes");
                    return Err(corrupt(&mut file, message));
                }
            };
        let envelope = serde_json::from_slice::<crate::event::Envelope>(&line)
            .map_err(|e| corrupt(&mut file, crate::quote::message(&e.to_string()).into_owned()))?;
        if let Some(counter) = envelope.exhausted() {
            return Err(corrupt(&mut file, format!("{counter}: the log cannot be continued")));
        }
        Ok(Some(Self { file, len, next_seq: envelope.seq + 1 }))
    }

    /// Appends `bytes` (whole lines holding `count` events) with one write, then syncs when
    /// `Disk`. On error the file is cut back to its previous length; the caller must then drop
    /// this handle (its state is no longer trusted), and, if the cut failed, cut the file back to
    /// [`AppendFailed::cut_back_to`] before anything else touches it.
    pub(super) fn append(
        &mut self,
        bytes: &[u8],
        count: u64,
        path: &Path,
        mode: WriteMode<'_>,
    ) -> Result<(), AppendFailed> {
        let after = self.len.saturating_add(bytes.len() as u64);
        if after > MAX_LOG_BYTES {
            let message = format!(
                "the append would take the log to {after} bytes, over the limit of {}",
                file::size(MAX_LOG_BYTES)
            );
            let error = StoreError::io(path, io::Error::new(io::ErrorKind::FileTooLarge, message));
            return Err(AppendFailed { error, cut_back_to: None });
        }
        let written = self
            .file
            .write_all(bytes)
            .map_err(|e| StoreError::io(path, e))
            .and_then(|()| mode.sync(&self.file, path));
        if let Err(error) = written {
            let cut = self.file.set_len(self.len).is_ok() && mode.sync(&self.file, path).is_ok();
            return Err(AppendFailed { error, cut_back_to: (!cut).then_some(self.len) });
        }
        self.len += bytes.len() as u64;
        self.next_seq += count;
        Ok(())
    }
}

impl LogFile {
    /// The events from `seq` on. The file's last `next_seq - seq` lines are found by walking back
    /// from its end, a chunk at a time ([`start_of_last_lines`]), then decoded forward, each
    /// checked for its `seq`: the work follows the bytes returned, not the file's length. A line
    /// that does not parse, or a file shorter than this handle knows, is [`StoreError::Corrupt`]
    /// at its line (`seq + 1`); the caller then drops this handle.
    pub(super) fn read_from(&self, seq: u64, path: &Path) -> Result<Vec<Envelope>, StoreError> {
        if seq >= self.next_seq {
            return Ok(Vec::new());
        }
        let lines = self.next_seq - seq;
        let mut file = &self.file;
        let start =
            start_of_last_lines(&mut file, self.len, lines).map_err(|e| StoreError::io(path, e))?;
        file.seek(SeekFrom::Start(start)).map_err(|e| StoreError::io(path, e))?;
        let mut reader = BufReader::with_capacity(64 * 1024, file.take(self.len - start));
        let mut events = Vec::with_capacity(usize::try_from(lines).unwrap_or(0));
        let mut buf = Vec::new();
        for expected in seq..self.next_seq {
            let corrupt = |message: String| StoreError::Corrupt {
                path: path.display().to_string(),
                line: expected + 1,
                message,
            };
            match read_line(&mut reader, &mut buf, MAX_LINE_BYTES)
                .map_err(|e| StoreError::io(path, e))?
            {
                LineRead::Line => events.push(decode(&buf, expected).map_err(corrupt)?),
                LineRead::TooLong { bytes, .. } => {
                    return Err(corrupt(format!(
                        "the line is {bytes} bytes, over the limit of {MAX_LINE_BYTES} bytes"
                    )));
                }
                LineRead::End | LineRead::Torn => {
                    return Err(corrupt(format!(
                        "the log ends before seq {expected}, which the store wrote"
                    )));
                }
            }
        }
        Ok(events)
    }
}

/// Where the last `lines` lines (`lines >= 1`) of a file of length `len` start, its complete
/// lines each ending in `\n`: walks back from the end a chunk at a time, counting newlines. 0
/// when the file has no more lines than that.
fn start_of_last_lines(file: &mut (impl Read + Seek), len: u64, lines: u64) -> io::Result<u64> {
    const CHUNK: u64 = 64 * 1024;
    // The file's final newline ends its last line; the `lines`th newline before it ends the
    // line before the first one asked.
    let mut end = len.saturating_sub(1);
    let mut seen = 0u64;
    let mut chunk = Vec::new();
    while end > 0 {
        let from = end.saturating_sub(CHUNK);
        chunk.resize(usize::try_from(end - from).unwrap_or(0), 0);
        file.seek(SeekFrom::Start(from))?;
        file.read_exact(&mut chunk)?;
        for (at, _) in chunk.iter().enumerate().rev().filter(|(_, b)| **b == b'\n') {
            seen += 1;
            if seen == lines {
                return Ok(from + at as u64 + 1);
            }
        }
        end = from;
    }
    Ok(0)
}

/// A failed append: its error, and the length the file must still be cut back to when cutting
/// it back failed too.
#[derive(Debug)]
pub(super) struct AppendFailed {
    pub(super) error: StoreError,
    pub(super) cut_back_to: Option<u64>,
}

/// Cuts the log at `path` back to `len` (the end of its last acknowledged append).
pub(super) fn cut_back(path: &Path, len: u64) -> Result<(), StoreError> {
    let file =
        file::open(path, OpenOptions::new().write(true)).map_err(|e| StoreError::io(path, e))?;
    file.set_len(len).and_then(|()| file.sync_data()).map_err(|e| StoreError::io(path, e))?;
    tracing::warn!(file = %path.display(), len, "cut a failed append back");
    Ok(())
}

/// Whether a load may cut a torn tail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cut {
    /// Nobody else writes the log: a torn tail is a crash's, and is cut.
    Allowed,
    /// Another process holds the session: the tail may be its append in flight, so the load
    /// only reports it (and opens nothing for appending).
    ReadOnly,
}

/// Loads a log: parses every line (streaming, one line of at most [`MAX_LINE_BYTES`] in memory,
/// a file of at most [`MAX_LOG_BYTES`]), cuts a torn tail when `cut` allows (keeping its bytes in
/// `torn_path`), and returns the events, with the file opened for appending when it is writable
/// (and cutting was allowed). `None` when the file does not exist. On [`StoreError::Corrupt`]
/// the file is not modified.
pub(super) fn load(
    path: &Path,
    torn_path: &Path,
    mode: WriteMode<'_>,
    cut: Cut,
) -> Result<Option<(Loaded, Option<LogFile>)>, StoreError> {
    let file = match file::open_read(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io(path, e)),
    };
    let size = file::within(&file, MAX_LOG_BYTES).map_err(|e| StoreError::io(path, e))?;
    let mut reader = BufReader::with_capacity(64 * 1024, file.take(size));
    let parsed = parse_log(&mut reader, path, MAX_LINE_BYTES)?;
    let mut len =
        reader.get_mut().get_mut().stream_position().map_err(|e| StoreError::io(path, e))?;
    if cut == Cut::ReadOnly {
        let torn =
            parsed.torn.map(|t| TornTail { line: t.line, bytes: len - t.start, kept_in: None });
        return Ok(Some((Loaded { events: parsed.events, torn }, None)));
    }
    // A read-only log still loads (when it needs no cut); it just cannot be appended to.
    let writable = file::open(path, OpenOptions::new().read(true).append(true));
    let torn = match parsed.torn {
        Some(torn) => {
            let file = writable.as_ref().map_err(|e| StoreError::io(path, clone_io(e)))?;
            let tail = cut_torn(file, path, torn_path, torn, mode)?;
            len = torn.start;
            Some(tail)
        }
        None => None,
    };
    let next_seq = parsed.events.len() as u64;
    let log = writable.ok().map(|file| LogFile { file, len, next_seq });
    Ok(Some((Loaded { events: parsed.events, torn }, log)))
}

/// A copy of an I/O error (kind and message), for reporting an error that is still borrowed.
fn clone_io(e: &io::Error) -> io::Error {
    io::Error::new(e.kind(), e.to_string())
}

/// Cuts a torn last line: copies its bytes (the file from `torn.start` on, streamed) and a `\n`
/// to `torn_path` (one line per cut), then truncates the log to the end of its previous line,
/// then warns.
fn cut_torn(
    file: &File,
    path: &Path,
    torn_path: &Path,
    torn: TornLine,
    mode: WriteMode<'_>,
) -> Result<TornTail, StoreError> {
    let existed = torn_path.exists();
    let mut keep = file::open(torn_path, OpenOptions::new().append(true).create(true))
        .map_err(|e| StoreError::io(torn_path, e))?;
    let mut source = file;
    source.seek(SeekFrom::Start(torn.start)).map_err(|e| StoreError::io(path, e))?;
    let copied = io::copy(&mut source, &mut keep)
        .and_then(|n| keep.write_all(b"\n").map(|()| n))
        .map_err(|e| StoreError::io(torn_path, e))?;
    // The cut bytes must be safe before they leave the log.
    mode.sync(&keep, torn_path)?;
    if !existed && let Some(dir) = torn_path.parent() {
        mode.sync_dir(dir)?;
    }
    file.set_len(torn.start).map_err(|e| StoreError::io(path, e))?;
    mode.sync(file, path)?;
    tracing::warn!(
        file = %path.display(),
        line = torn.line,
        bytes = copied,
        kept_in = %torn_path.display(),
        "cut a torn last line (an append that was never acknowledged)",
    );
    Ok(TornTail { line: torn.line, bytes: copied, kept_in: Some(torn_path.to_path_buf()) })
}

/// The last line of a non-empty file.
#[derive(Debug, PartialEq)]
enum LastLine {
    /// A complete line, without its `\n`.
    Complete(Vec<u8>),
    /// The file does not end with `\n`: its last line is torn.
    Torn,
    /// The last line is longer than the line limit.
    TooLong,
}

/// The last line of a non-empty file of length `len`, lines of at most `max` bytes: walks back
/// from the final newline to the one before it, a chunk at a time, holding at most `max` bytes.
fn last_line(file: &mut File, len: u64, max: usize) -> io::Result<LastLine> {
    const CHUNK: u64 = 8 * 1024;
    let mut last = [0u8];
    file.seek(SeekFrom::Start(len - 1))?;
    file.read_exact(&mut last)?;
    if last[0] != b'\n' {
        return Ok(LastLine::Torn);
    }
    // The chunks of the line, last first; joined once at the end.
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    let mut held = 0usize;
    let mut start = len - 1;
    while start > 0 {
        let from = start.saturating_sub(CHUNK);
        let mut chunk = vec![0; usize::try_from(start - from).unwrap_or(0)];
        file.seek(SeekFrom::Start(from))?;
        file.read_exact(&mut chunk)?;
        let newline = chunk.iter().rposition(|&b| b == b'\n');
        if let Some(at) = newline {
            chunk.drain(..=at);
        }
        held += chunk.len();
        if held > max {
            return Ok(LastLine::TooLong);
        }
        chunks.push(chunk);
        if newline.is_some() {
            break;
        }
        start = from;
    }
    let line = chunks.into_iter().rev().flatten().collect();
    Ok(LastLine::Complete(line))
}

/// How many lines (newlines) a file has, for an error message; reads it a buffer at a time.
fn count_lines(file: &mut File) -> io::Result<u64> {
    file.seek(SeekFrom::Start(0))?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut lines = 0u64;
    loop {
        match file.read(&mut buf) {
            Ok(0) => return Ok(lines),
            Ok(n) => lines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sync::CountingSyncer;

    #[test]
    fn the_last_lines_start_after_the_newline_before_them() {
        let long = "x".repeat(200_000); // longer than a chunk: the walk crosses chunks
        let text = format!("a\nbb\n{long}\nccc\n");
        let at = |line: &str| text.find(&format!("{line}\n")).unwrap() as u64;
        // (lines asked, where they start)
        let cases = [(1, at("ccc")), (2, at(&long)), (3, at("bb")), (4, 0), (5, 0), (99, 0)];
        for (lines, start) in cases {
            let mut file = io::Cursor::new(text.as_bytes());
            let found = start_of_last_lines(&mut file, text.len() as u64, lines).unwrap();
            assert_eq!(found, start, "{lines} line(s)");
        }
        let mut one = io::Cursor::new(&b"only\n"[..]);
        assert_eq!(start_of_last_lines(&mut one, 5, 1).unwrap(), 0);
    }

    #[test]
    fn an_append_that_would_take_the_log_past_its_limit_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let syncer = CountingSyncer::fdatasync();
        let mode = WriteMode { durability: Durability::Os, syncer: &syncer };
        let mut log = LogFile::create(&path, mode).unwrap();
        log.append(b"{}\n", 1, &path, mode).unwrap();
        // As if the log had grown to a few bytes short of the limit.
        log.len = MAX_LOG_BYTES - 4;
        let failed = log.append(b"{\"x\":1}\n", 1, &path, mode).unwrap_err();
        assert_eq!(failed.cut_back_to, None, "nothing to cut back");
        let want = format!(
            "{}: the append would take the log to {} bytes, over the limit of 4 GiB",
            path.display(),
            MAX_LOG_BYTES + 4
        );
        assert_eq!(failed.error.to_string(), want);
        assert_eq!(std::fs::read(&path).unwrap(), b"{}\n");
    }
}
