//! The `rein` command line: a thin dispatcher over the subcommands in `cli/`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cli;

/// rein: an actor-based agent runtime whose model-request failures flow through a supervised
/// waterfall of retry plugins.
#[derive(Debug, Parser)]
#[command(name = "rein", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Chat with a model: DeepSeek with DEEPSEEK_API_KEY, Anthropic with ANTHROPIC_API_KEY, an
    /// OpenAI-compatible server with OPENAI_API_KEY, else the embedded simulated provider.
    ///
    /// One turn for a PROMPT, else one per line of stdin. The answer goes to stdout (streamed on
    /// a terminal); retries and the turn-tail panel of a turn that retried or failed go to
    /// stderr; the session is kept in a JSONL store and resumed with --session ID.
    #[command(after_help = cli::chat::CHAT_HELP)]
    Chat(cli::chat::ChatArgs),
    /// Serve the console: sessions, a live session view with prompt and cancel, the Plugins
    /// page, on http://127.0.0.1:PORT/ only.
    ///
    /// The runtime is the one `rein chat` builds (same providers, flags and store), or, with
    /// --read-only, none: the store's logs are shown and followed, nothing is written.
    #[command(after_help = cli::console::CONSOLE_HELP)]
    Console(cli::console::ConsoleArgs),
    /// Run one node of a cluster of rein processes sharing one PostgreSQL database.
    ///
    /// Its console and API on http://127.0.0.1:PORT/; it takes a fair share of the cluster's
    /// partitions, resumes the turns of a node that died, and serves any session of the cluster.
    #[command(after_help = cli::node::NODE_HELP)]
    Node(cli::node::NodeArgs),
    /// Run the embedded demo scenario (retries, a tool call, a manual retry) and write its log.
    #[command(after_help = cli::demo::DEMO_HELP)]
    Demo(cli::demo::DemoArgs),
    /// Check session logs against every rule of the session-log contract.
    #[command(after_help = cli::check::CHECK_HELP)]
    Check(cli::check::CheckArgs),
    /// Run scenario files: one session driven deterministically on virtual time.
    #[command(after_help = "Output and exit status: rein scenario run --help")]
    Scenario(cli::scenario::ScenarioArgs),
    /// Show the turn-tail panels of session logs (each turn that retried or failed).
    ///
    /// Each panel sums the turn up on one line; --expand adds every attempt with its origin,
    /// budget, wait, code, HTTP status and request id, and the provider's message verbatim.
    Show(cli::show::ShowArgs),
    /// List the failure codes auto-retry knows: on by default, opt in, never retried.
    #[command(after_help = cli::codes::CODES_HELP)]
    Codes(cli::codes::CodesArgs),
    /// Print the configuration `rein chat` and `rein console` would start with (rein.toml, the
    /// store's saved plugin settings, the defaults) and where each value came from.
    Config(cli::config::ConfigArgs),
    /// Write a self-contained HTML report of session logs.
    ///
    /// The conversation of each log, with a collapsed panel at the tail of each turn that retried
    /// or failed.
    Report(cli::report::ReportArgs),
    /// Run many agents at once under provider faults, cancellations, plugin disposals and
    /// settings changes, then check every guarantee.
    ///
    /// Every session log against the invariants, every turn ended within a deadline, nothing
    /// alive after shutdown; prints turns by outcome, retries by plugin, cancellation latency,
    /// plugin restarts and peak memory.
    #[command(after_help = cli::stress::STRESS_HELP)]
    Stress(cli::stress::StressArgs),
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Chat(args) => cli::chat::run(&args),
        Command::Console(args) => cli::console::run(&args),
        Command::Node(args) => cli::node::run(&args),
        Command::Demo(args) => cli::demo::run(&args),
        Command::Check(args) => cli::check::run(&args),
        Command::Scenario(args) => cli::scenario::run(&args),
        Command::Show(args) => cli::show::run(&args),
        Command::Report(args) => cli::report::run(&args),
        Command::Codes(args) => cli::codes::run(&args),
        Command::Config(args) => cli::config::run(&args),
        Command::Stress(args) => cli::stress::run(&args),
    }
}
