//! Where `rein chat` writes: the answer to stdout, flushed chunk by chunk; notes, status lines
//! and panels to stderr, styled on a terminal (`--color`, `NO_COLOR`) and plain otherwise.
//!
//! Write errors are ignored: a closed stdout (`rein chat … | head -1`) must not stop the turn or
//! lose its log, and the exit status still tells how the turn ended. Stderr is written unlocked,
//! a line at a time, so it never holds the lock `tracing` needs across a wait.
//!
//! On a terminal, stderr may hold one transient line ([`Console::waiting`]: an attempt that
//! produces nothing), drawn in place with `\r` and erase-line, straight to the terminal (colour
//! choices strip styles, not this); it is erased before anything else is written.

use std::io::{self, IsTerminal, Write};

use anstream::{AutoStream, ColorChoice};
use anstyle::{AnsiColor, Style};

use super::view::{Out, Tone};

const DIM: Style = Style::new().dimmed();
const YELLOW: Style = AnsiColor::Yellow.on_default();
const RED: Style = AnsiColor::Red.on_default();

/// Erases the terminal's current line and returns to its start.
const ERASE_LINE: &str = "\r\x1b[2K";

/// The chat's two streams.
pub(crate) struct Console {
    stdout: io::Stdout,
    stderr: AutoStream<io::Stderr>,
    /// A transient line is on stderr (a terminal).
    transient: bool,
}

impl Console {
    /// The console; colour on stderr as `choice` says.
    pub(crate) fn new(choice: ColorChoice) -> Self {
        Self {
            stdout: io::stdout(),
            stderr: AutoStream::new(io::stderr(), choice),
            transient: false,
        }
    }

    /// Whether stderr is a terminal (the waiting line is then shown).
    pub(crate) fn status_is_terminal(&self) -> bool {
        io::stderr().is_terminal()
    }

    /// Draws `line` as the transient line on stderr, in place of the previous one, or erases it
    /// (`None`). Nothing when stderr is not a terminal.
    pub(crate) fn waiting(&mut self, line: Option<&str>) {
        if (line.is_none() && !self.transient) || !self.status_is_terminal() {
            return;
        }
        let mut raw = io::stderr().lock();
        let _ = write!(raw, "{ERASE_LINE}{}", line.unwrap_or_default());
        let _ = raw.flush();
        self.transient = line.is_some();
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
            self.waiting(None);
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
        self.waiting(None);
        let _ = writeln!(self.stderr, "{RED}error:{RED:#} {text}");
    }

    /// A `warning: …` line on stderr.
    pub(crate) fn warning(&mut self, text: &str) {
        self.waiting(None);
        let _ = writeln!(self.stderr, "{YELLOW}warning:{YELLOW:#} {text}");
    }

    /// Text already styled (a panel) on stderr, as it is.
    pub(crate) fn styled(&mut self, text: &str) {
        self.waiting(None);
        let _ = self.stderr.write_all(text.as_bytes());
        let _ = self.stderr.flush();
    }

    /// The interactive prompt marker, without a newline.
    pub(crate) fn marker(&mut self) {
        self.waiting(None);
        let _ = write!(self.stderr, "{DIM}>{DIM:#} ");
        let _ = self.stderr.flush();
    }

    fn line(&mut self, style: Style, text: &str) {
        self.waiting(None);
        let _ = writeln!(self.stderr, "{style}{text}{style:#}");
    }
}
