//! Where `rein chat` writes: the answer to stdout, flushed chunk by chunk; notes, status lines
//! and panels to stderr, styled on a terminal (`--color`, `NO_COLOR`) and plain otherwise.
//!
//! Write errors are ignored: a closed stdout (`rein chat … | head -1`) must not stop the turn or
//! lose its log, and the exit status still tells how the turn ended. Stderr is written unlocked,
//! a line at a time, so it never holds the lock `tracing` needs across a wait.

use std::io::{self, IsTerminal, Write};

use anstream::{AutoStream, ColorChoice};
use anstyle::{AnsiColor, Style};

use super::view::{Out, Tone};

const DIM: Style = Style::new().dimmed();
const YELLOW: Style = AnsiColor::Yellow.on_default();
const RED: Style = AnsiColor::Red.on_default();

/// The chat's two streams.
pub(crate) struct Console {
    stdout: io::Stdout,
    stderr: AutoStream<io::Stderr>,
}

impl Console {
    /// The console; colour on stderr as `choice` says.
    pub(crate) fn new(choice: ColorChoice) -> Self {
        Self { stdout: io::stdout(), stderr: AutoStream::new(io::stderr(), choice) }
    }

    /// Whether stdout is a terminal (the answer's control characters are then escaped).
    pub(crate) fn answer_is_terminal(&self) -> bool {
        self.stdout.is_terminal()
    }

    /// Whether stdin is a terminal (the interactive mode then shows a prompt marker).
    pub(crate) fn input_is_terminal(&self) -> bool {
        io::stdin().is_terminal()
    }

    /// Writes what a view produced.
    pub(crate) fn show(&mut self, outs: impl IntoIterator<Item = Out>) {
        for out in outs {
            match out {
                Out::Answer(text) => {
                    let mut stdout = self.stdout.lock();
                    let _ = stdout.write_all(text.as_bytes());
                    let _ = stdout.flush();
                }
                Out::Note(Tone::Status, text) => self.line(DIM, &text),
                Out::Note(Tone::Warning, text) => self.line(YELLOW, &text),
            }
        }
    }

    /// A plain line on stderr.
    pub(crate) fn note(&mut self, text: &str) {
        self.line(Style::new(), text);
    }

    /// An `error: …` line on stderr.
    pub(crate) fn error(&mut self, text: &str) {
        let _ = writeln!(self.stderr, "{RED}error:{RED:#} {text}");
    }

    /// A `warning: …` line on stderr.
    pub(crate) fn warning(&mut self, text: &str) {
        let _ = writeln!(self.stderr, "{YELLOW}warning:{YELLOW:#} {text}");
    }

    /// Text already styled (a panel) on stderr, as it is.
    pub(crate) fn styled(&mut self, text: &str) {
        let _ = self.stderr.write_all(text.as_bytes());
        let _ = self.stderr.flush();
    }

    /// The interactive prompt marker, without a newline.
    pub(crate) fn marker(&mut self) {
        let _ = write!(self.stderr, "{DIM}>{DIM:#} ");
        let _ = self.stderr.flush();
    }

    fn line(&mut self, style: Style, text: &str) {
        let _ = writeln!(self.stderr, "{style}{text}{style:#}");
    }
}
