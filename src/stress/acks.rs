//! The acknowledgement side channel (`rein stress --acks PATH`): one line `ack SESSION SEQ` for
//! every event the run saw acknowledged by its session log, written as soon as it is known.
//!
//! An event reaches a turn's event stream only after the store acknowledged it at the store's
//! durability, so a line here promises the event is in the log at that durability. A crash test
//! kills the run at a random moment, reads these lines, and checks that every event they name
//! survived. The lines are written by a thread of their own (never a tokio worker) and handed to
//! the operating system as soon as the queue is empty; a kill can leave the last line cut off
//! (without its newline), which a reader ignores.

use std::io::{self, Write};
use std::path::Path;
use std::sync::mpsc;
use std::thread::JoinHandle;

/// The writer of the side channel.
pub struct Acks {
    queue: mpsc::Sender<(String, u64)>,
    thread: JoinHandle<io::Result<()>>,
}

impl Acks {
    /// Writes the lines to `path`, created or truncated; `-` is standard output.
    pub fn open(path: &Path) -> io::Result<Self> {
        let out: Box<dyn Write + Send> = if path == Path::new("-") {
            Box::new(io::stdout())
        } else {
            Box::new(std::fs::File::create(path)?)
        };
        let (queue, lines) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("rein-stress-acks".into())
            .spawn(move || write_lines(&lines, out))?;
        Ok(Self { queue, thread })
    }

    /// A handle agents send their acknowledgements through.
    pub fn sender(&self) -> AckSender {
        AckSender(self.queue.clone())
    }

    /// Writes what is queued and closes the channel (every [`AckSender`] must be gone).
    pub fn close(self) -> io::Result<()> {
        drop(self.queue);
        self.thread.join().unwrap_or_else(|_| Err(io::Error::other("the ack writer panicked")))
    }
}

/// Where an agent reports an acknowledged event.
#[derive(Clone)]
pub struct AckSender(mpsc::Sender<(String, u64)>);

impl AckSender {
    /// `session`'s event `seq` is durable.
    pub fn ack(&self, session: &str, seq: u64) {
        let _ = self.0.send((session.to_owned(), seq));
    }
}

fn write_lines(
    lines: &mpsc::Receiver<(String, u64)>,
    out: Box<dyn Write + Send>,
) -> io::Result<()> {
    let mut out = io::BufWriter::new(out);
    while let Ok((session, seq)) = lines.recv() {
        writeln!(out, "ack {session} {seq}")?;
        while let Ok((session, seq)) = lines.try_recv() {
            writeln!(out, "ack {session} {seq}")?;
        }
        out.flush()?;
    }
    out.flush()
}
