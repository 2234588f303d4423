//! The interactive mode's input: lines from stdin, a terminal or a pipe alike.
//!
//! Each line is a prompt; a blank line is skipped; `/exit` (or `/quit`) ends the chat, as the end
//! of input does. Any other line, one starting with `/` included, goes to the model as it is
//! (without its line ending).
//!
//! Stdin is read on a thread of its own that hands whole lines over a channel, so waiting for a
//! line never holds a tokio worker, Ctrl-C can end the wait, and the process can exit while the
//! thread is still blocked in a read (it is not one of tokio's blocking tasks, which a runtime
//! waits for).

use std::io::BufRead;

use tokio::sync::mpsc;

/// What a line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Line {
    /// A prompt for the model.
    Prompt(String),
    /// End the chat.
    Exit,
    /// Nothing (a blank line).
    Blank,
}

/// What `line` (as read, with or without its line ending) asks for.
pub(crate) fn classify(line: &str) -> Line {
    let line = line.strip_suffix('\n').unwrap_or(line);
    let line = line.strip_suffix('\r').unwrap_or(line);
    match line.trim() {
        "" => Line::Blank,
        "/exit" | "/quit" => Line::Exit,
        _ => Line::Prompt(line.to_owned()),
    }
}

/// Starts reading stdin: each line (a `Result`: a line that is not UTF-8, or a read error, is an
/// error naming the line) arrives on the channel; the channel closes at the end of input.
pub(crate) fn read_stdin() -> mpsc::UnboundedReceiver<Result<String, String>> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = Vec::new();
        for number in 1.. {
            buf.clear();
            let line = match stdin.read_until(b'\n', &mut buf) {
                Ok(0) => break,
                Ok(_) => String::from_utf8(std::mem::take(&mut buf))
                    .map_err(|_| format!("stdin: line {number} is not UTF-8")),
                Err(e) => Err(format!("stdin: line {number}: {e}")),
            };
            let stop = line.is_err();
            if tx.send(line).is_err() || stop {
                break;
            }
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_prompts_blanks_or_the_exit_command() {
        let cases = [
            ("hello\n", Line::Prompt("hello".into())),
            ("hello\r\n", Line::Prompt("hello".into())),
            ("  spaced out  \n", Line::Prompt("  spaced out  ".into())),
            ("last line without newline", Line::Prompt("last line without newline".into())),
            ("/usr/bin is a directory?\n", Line::Prompt("/usr/bin is a directory?".into())),
            ("\n", Line::Blank),
            ("   \t\n", Line::Blank),
            ("/exit\n", Line::Exit),
            (" /quit \n", Line::Exit),
            ("/exit now\n", Line::Prompt("/exit now".into())),
        ];
        for (line, want) in cases {
            assert_eq!(classify(line), want, "{line:?}");
        }
    }
}
