//! `rein chat [PROMPT]`: a conversation with a model — one turn for a prompt given on the command
//! line, or one turn per line of stdin without one. The README's main job.
//!
//! With `DEEPSEEK_API_KEY` set it talks to DeepSeek (with `ANTHROPIC_API_KEY`, to Anthropic;
//! with `OPENAI_API_KEY`, to any OpenAI-compatible server); with no key it uses the embedded
//! simulated provider, whose seeded
//! faults (rate limits with `Retry-After`, server errors, dropped connections, stalls) show the
//! retry machinery at work with no key and no server. The answer goes to stdout (streamed on a
//! terminal; piped, only what succeeded); a status line per scheduled retry, and the turn-tail
//! panel of a turn that retried or failed, go to stderr. The session is kept in a JSONL store (`--store`, default `.rein/sessions`) under
//! `--session` (a new id by default, printed), and a later `--session ID` resumes it: the
//! requests then carry the earlier history, and a turn a crash left open in its log is resumed
//! when the session opens, before the next prompt (a status line says so: `resumed turn 3 of
//! session ID (it was waiting for a retry)`). Ctrl-C cancels the running turn rather than killing
//! the process mid-write. Output and exit status: [`CHAT_HELP`]; the decisions behind them are
//! in `docs/runtime-semantics.md` ("rein chat").
//!
//! The runtime — the provider route, the default chain, the store and the session's place — is
//! built by [`super::agent`], shared with `rein console`. Pure core: [`view`] (what a turn's
//! events show, the exit status), [`input`] (what a line asks for). Shells: [`turn`] (one turn,
//! its signals and its panel), [`console`], [`signals`], [`telemetry`] (the subscriber and the
//! session/turn/step spans).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anstream::ColorChoice;
use rein_runtime::event::TurnEndReason;
use rein_runtime::plural::count;
use rein_runtime::session::Session;
use tokio::sync::mpsc;

use super::agent::generation::{self, GenerationArgs};
use super::agent::{self, ProviderArgs, sessions};
use super::show::ColorWhen;

mod breakers;
mod console;
mod input;
pub(crate) mod signals;
mod stall;
pub(crate) mod telemetry;
mod turn;
mod view;

use console::Console;
use signals::Signal;
use telemetry::Spans;

/// Exit status: a usage error or bad input (nothing was written).
const BAD_INPUT: u8 = 2;
/// Exit status: the last turn failed or was cancelled, or the runtime failed.
const FAILED: u8 = 1;

/// What `rein chat --help` says after the options: providers, files, output, exit status.
pub(crate) const CHAT_HELP: &str = "\
Providers:
  Without --provider, the first provider configured, named services first: DeepSeek when
  DEEPSEEK_API_KEY is set (DEEPSEEK_BASE_URL, DEEPSEEK_MODEL), else Anthropic when
  ANTHROPIC_API_KEY is (ANTHROPIC_BASE_URL, ANTHROPIC_MODEL; default claude-haiku-4-5), else an
  OpenAI-compatible server when OPENAI_API_KEY or OPENAI_BASE_URL is (OPENAI_MODEL; a base URL
  with no key is a local server that needs none, such as Ollama, llama.cpp or vLLM: no
  Authorization header is sent, and the banner says so), else the embedded simulated provider:
  no key, no network, seeded faults (rate limits with a Retry-After, server errors, dropped
  connections, stalls) retried by llm-retry. When several are configured, the banner names the
  others (--provider picks one). --seed N
  replays the simulated provider's faults and answers exactly; without it a random seed is
  used and printed. The API key never appears in any output or log, even where a server echoes
  it (an error, a header, the answer); a base URL prints without its user:password@ part, and
  one with a control character (a newline) is refused.

Generation:
  --system TEXT, --temperature T (0 to 2; an Anthropic route takes 0 to 1) and --max-tokens N
  (at least 1) apply to every request, on every route; unset, the provider's defaults (Anthropic
  requires a limit: 4096). The system prompt is not part of the session's history, nor written
  to its log: give it again when you continue a session.

Fallback:
  --fallback ROUTE (repeatable, in order of preference) finishes a turn on another route when
  the provider keeps failing (a rate limit, an exhausted quota, an outage): MODEL is another
  model of the same provider, PROVIDER:MODEL a model of deepseek, anthropic, openai (any
  OpenAI-compatible server: OPENAI_BASE_URL) or simulated, each configured by its own variables. A prefix that
  is not a provider is part of the model (llama3:8b). An exhausted quota, or a Retry-After over
  30 s, switches at once; other failures are retried on the provider first. The route is named
  PROVIDER:MODEL in the log and in the status line (`switched to openai:gpt-4o-mini · QUOTA`).
  See docs/runtime-semantics.md, \"fallback\".

Modes:
  With PROMPT, one turn. Without, one turn per line of stdin (a terminal or a pipe); a blank
  line is skipped; /exit or the end of input ends the chat. Ctrl-C cancels the running turn
  (the log records it cancelled by the user); at the interactive prompt, or pressed twice, it
  ends the chat.

Files:
  The session log is STORE/ID.jsonl (STORE: --store, default .rein/sessions, created
  owner-only). A new session gets a fresh id unless --session names one; --session with an
  existing id resumes that session, its history sent with every request.

Output:
  stdout   the answer. On a terminal, streamed as it arrives (an attempt that fails after
           streaming text is marked on stderr: that text is not part of the answer), control
           characters escaped. Piped, only what succeeded: each answered step's text, written
           when its attempt answered.
  stderr   the provider, its fallbacks and the session at the start; `retry 1/2 in 1.5 s ·
           RATE_LIMIT 429` for each retry scheduled, `switched to ROUTE · CODE` for each route
           switch; on a terminal, `waiting: nothing for 12 s (the watchdog gives up at 5 min)`
           while an attempt is quiet for 3 s or more; the turn-tail panel of a turn that
           retried or failed (expanded when it failed, or with --expand); how to continue the
           session at the end; `error: ...`.
           With RUST_LOG (e.g. RUST_LOG=info, which means warn,rein=info), tracing spans per
           session, turn, step and attempt with OpenTelemetry GenAI fields; without it, no
           tracing at all.

Exit status:
  0  the last turn completed (or no turn ran)
  1  the last turn failed or was cancelled, the runtime failed, or Ctrl-C or SIGTERM came while
     the session's log was read (nothing written)
  2  bad input, nothing written: a usage error, an invalid provider variable, a missing key for
     the --provider asked or a --fallback route, an invalid or repeated --fallback, an invalid
     --system, --temperature or --max-tokens, an invalid --session id, a store that is not a
     readable directory, a session log that cannot be read (the error names the file and line; a
     FIFO or a device is refused, not read), a session another process has open (the error names
     its pid and since when)";

/// Arguments of `rein chat`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ChatArgs {
    /// The prompt (one turn); without it, prompts are read from stdin, one per line.
    #[arg(value_name = "PROMPT")]
    prompt: Option<String>,
    #[command(flatten)]
    provider: ProviderArgs,
    #[command(flatten)]
    generation: GenerationArgs,
    /// The directory of session logs, or a PostgreSQL store: postgres://USER@HOST/DB (the
    /// password from the URL or PGPASSWORD, never printed) [default: the configuration file's
    /// `store`, else .rein/sessions].
    #[arg(long, value_name = "DIR|URL")]
    store: Option<PathBuf>,
    /// The session: an existing id resumes it, a new one starts it (default: a fresh id).
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// Show every attempt of a turn's panel, not only its summary line.
    #[arg(short, long)]
    expand: bool,
    /// When to colour stderr.
    #[arg(long, value_name = "WHEN", value_enum, default_value_t = ColorWhen::Auto)]
    color: ColorWhen,
}

/// Runs `rein chat`.
pub(crate) fn run(args: &ChatArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(FAILED);
        }
    };
    let status = runtime.block_on(chat(args));
    // Stdin's reader thread may still be blocked in a read; it is not waited for.
    runtime.shutdown_background();
    ExitCode::from(status)
}

async fn chat(args: &ChatArgs) -> u8 {
    let choice = match args.color {
        ColorWhen::Auto => ColorChoice::Auto,
        ColorWhen::Always => ColorChoice::Always,
        ColorWhen::Never => ColorChoice::Never,
    };
    let mut console = Console::new(choice);
    // First, so that no Ctrl-C from here on kills the process mid-write.
    let mut signals = match signals::listen() {
        Ok(signals) => signals,
        Err(e) => {
            console.error(&format!("cannot listen for Ctrl-C: {e}"));
            return FAILED;
        }
    };
    telemetry::init();

    // Reading the session's log (up to the log limit, 4 GiB) happens off this task, so that
    // Ctrl-C and SIGTERM are heard while it lasts.
    let preparing = tokio::task::spawn_blocking({
        let args = args.clone();
        move || prepare(&args)
    });
    let prepared = tokio::select! {
        prepared = preparing => prepared.unwrap_or_else(|e| Err(format!("cannot prepare: {e}"))),
        Some(_) = signals.recv() => return interrupted(&mut console),
    };
    let (routes, place, store) = match prepared {
        Ok(prepared) => prepared,
        Err(e) => {
            console.error(&e);
            return BAD_INPUT;
        }
    };
    // The chat holds its one session — and the lock on its log — for its whole run: hibernating
    // between two lines would let another process take the session, and the next line fail.
    let hold = std::time::Duration::MAX;
    let runtime = match agent::build(&routes, place.store.clone(), hold).await {
        Ok((runtime, _)) => runtime,
        Err(e) => {
            console.error(&e);
            return FAILED;
        }
    };
    let opened = tokio::select! {
        opened = runtime.session(&place.id) => opened,
        // The open goes on in the runtime's blocking pool, which the process does not wait for.
        Some(_) = signals.recv() => return interrupted(&mut console),
    };
    let session = match opened {
        Ok(session) => session,
        Err(e) => {
            console.error(&located(&place.shown, &e.to_string()));
            runtime.shutdown().await;
            return BAD_INPUT;
        }
    };

    banner(&mut console, &routes, &place, args.prompt.is_none());
    // Opening the session resumed the turn a crash left open (before any prompt of this run).
    if let Some(pending) = place.resumed.as_ref().and_then(|r| r.pending(&place.id)) {
        console.note(&pending.describe());
    }
    let mut spans = Spans::new(&place.id, &routes.primary.name, &routes.primary.model);
    let breakers = breakers::Breakers::of(&runtime);
    let mut shown = turn::Shown { expand: args.expand, watchdogs: routes.watchdogs(), breakers };
    // The resumed turn is shown to its end first (Ctrl-C cancels it); the prompt runs after it.
    let resumed = match session.resumed().await {
        Ok(Some(handle)) => {
            let shows = &mut console;
            turn::follow(&session, handle, &mut signals, &mut spans, shows, &mut shown)
                .await
                .map(Some)
        }
        Ok(None) => Ok(None),
        Err(e) => Err(e),
    };
    let last = match resumed {
        Err(e) => {
            console.error(&format!("the resumed turn could not be shown: {e}"));
            Err(FAILED)
        }
        Ok(Some(ran)) if ran.quit => Ok(Some(ran.reason)),
        Ok(_) => match &args.prompt {
            Some(prompt) => {
                one_shot(&session, prompt, &mut signals, &mut spans, &mut console, &mut shown).await
            }
            None => interactive(&session, &mut signals, &mut spans, &mut console, &mut shown).await,
        },
    };
    drop(spans);
    runtime.shutdown().await;
    let implied = args.store.is_none();
    let resume = match store.as_path() == Path::new(sessions::DEFAULT_STORE) || implied {
        true => format!("rein chat --session {}", place.id),
        false if sessions::is_postgres(&store) => {
            let url = place.shown.strip_suffix(&format!("#{}", place.id)).unwrap_or_default();
            format!("rein chat --store {url} --session {}", place.id)
        }
        false => format!("rein chat --store {} --session {}", store.display(), place.id),
    };
    console.note(&format!("session {} · continue it: {resume}", place.id));
    match last {
        Ok(last) => view::exit_status(last.as_ref()),
        Err(status) => status,
    }
}

/// Ctrl-C or SIGTERM while the session's log was being read: nothing was written.
fn interrupted(console: &mut Console) -> u8 {
    console.error("interrupted while the session's log was read; nothing was written");
    FAILED
}

/// The routes, the session's place and the store it is in, checked: every refusal is bad input.
fn prepare(args: &ChatArgs) -> Result<(agent::Routes, sessions::Place, PathBuf), String> {
    if args.prompt.as_deref().is_some_and(|p| p.trim().is_empty()) {
        return Err("PROMPT: must not be empty (omit it to chat line by line)".to_owned());
    }
    let planned = agent::plan(&args.provider)?;
    let mut routes = agent::routes(planned)?;
    let every = std::iter::once(&routes.primary).chain(&routes.fallbacks);
    routes.generation = generation::settings(&args.generation, every)?;
    let store = agent::store(args.store.as_deref(), routes.file.as_ref());
    // Last: opening the session's place may create the store.
    let place = match sessions::is_postgres(&store) {
        true => sessions::open_postgres(&store.to_string_lossy(), args.session.as_deref())?,
        false => sessions::open(&store, args.session.as_deref())?,
    };
    Ok((routes, place, store))
}

/// The lines on stderr before the first turn: the provider (and the fallbacks), the session, how
/// to use the mode.
fn banner(console: &mut Console, routes: &agent::Routes, place: &sessions::Place, lines: bool) {
    let route = &routes.primary;
    let mut provider = format!("rein chat · {} on {}", route.model, route.label);
    if let Some(seed) = route.seed {
        provider.push_str(&format!(
            " (seed {seed}) · no API key set: DEEPSEEK_API_KEY, ANTHROPIC_API_KEY or \
             OPENAI_API_KEY talks to a real model"
        ));
    }
    console.note(&provider);
    if !routes.also.is_empty() {
        let others: Vec<String> =
            routes.also.iter().map(|(kind, var)| format!("{} ({var})", kind.flag())).collect();
        console.note(&format!("also configured: {} · --provider chooses", others.join(", ")));
    }
    if let Some(fallbacks) = routes.fallback_labels() {
        console.note(&format!("fallback: {fallbacks}"));
    }
    let state = match &place.resumed {
        None => "new".to_owned(),
        Some(resumed) => format!("resumed, {}", count(resumed.turns, "turn", "turns")),
    };
    console.note(&format!("session {} ({state}) · log {}", place.id, place.shown));
    if let Some(torn) = place.resumed.as_ref().and_then(|r| r.torn.as_ref()) {
        console.warning(&format!(
            "{}: torn last line {} ({} bytes, a crash during an append): cut on reopen, kept in \
             {}.torn",
            place.shown, torn.line, torn.bytes, place.shown
        ));
    }
    if lines {
        console.note(
            "one prompt per line; /exit or the end of input ends the chat; Ctrl-C cancels a turn",
        );
    }
}

/// One turn; the last turn's ending, or the exit status of a failure to run it.
async fn one_shot(
    session: &Session,
    prompt: &str,
    signals: &mut mpsc::UnboundedReceiver<Signal>,
    spans: &mut Spans,
    console: &mut Console,
    shown: &mut turn::Shown,
) -> Result<Option<TurnEndReason>, u8> {
    match turn::run(session, prompt.to_owned(), signals, spans, console, shown).await {
        Ok(ran) => Ok(Some(ran.reason)),
        Err(e) => {
            console.error(&format!("the turn could not run: {e}"));
            Err(FAILED)
        }
    }
}

/// A turn per line of stdin until `/exit`, the end of input, Ctrl-C at the prompt or SIGTERM.
async fn interactive(
    session: &Session,
    signals: &mut mpsc::UnboundedReceiver<Signal>,
    spans: &mut Spans,
    console: &mut Console,
    shown: &mut turn::Shown,
) -> Result<Option<TurnEndReason>, u8> {
    let mut lines = input::read_stdin();
    let terminal = console.input_is_terminal();
    let mut last = None;
    loop {
        if terminal {
            console.marker();
        }
        let line = tokio::select! {
            line = lines.recv() => line,
            Some(_) = signals.recv() => {
                if terminal {
                    console.note("");
                }
                break;
            }
        };
        let prompt = match line {
            None => {
                if terminal {
                    console.note("");
                }
                break;
            }
            Some(Err(e)) => {
                console.error(&e);
                return Err(BAD_INPUT);
            }
            Some(Ok(line)) => match input::classify(&line) {
                input::Line::Blank => continue,
                input::Line::Exit => break,
                input::Line::Prompt(prompt) => prompt,
            },
        };
        if !terminal {
            console.note(&format!("> {}", rein::show::escape(&prompt)));
        }
        match turn::run(session, prompt, signals, spans, console, shown).await {
            Ok(ran) => {
                last = Some(ran.reason);
                if ran.quit {
                    break;
                }
            }
            Err(e) => {
                console.error(&format!("the turn could not run: {e}"));
                return Err(FAILED);
            }
        }
    }
    Ok(last)
}

/// An error about the session's log, naming the log once: most store errors already name the
/// file (a corrupt line, a lock another process holds); the rest get it in front.
fn located(path: &str, message: &str) -> String {
    if message.contains(path) { message.to_owned() } else { format!("{path}: {message}") }
}

#[cfg(test)]
mod tests {
    use super::located;

    #[test]
    fn an_error_names_the_log_once() {
        let path = ".rein/sessions/s.jsonl";
        let cases = [
            ("sqlite: disk I/O error", ".rein/sessions/s.jsonl: sqlite: disk I/O error"),
            (
                "session s: .rein/sessions/s.jsonl is in use by another process (pid 7)",
                "session s: .rein/sessions/s.jsonl is in use by another process (pid 7)",
            ),
            (
                ".rein/sessions/s.jsonl:3: corrupt log line: not JSON",
                ".rein/sessions/s.jsonl:3: corrupt log line: not JSON",
            ),
        ];
        for (message, shown) in cases {
            assert_eq!(located(path, message), shown, "{message}");
        }
    }
}
