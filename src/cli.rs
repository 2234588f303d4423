//! The subcommands of the `rein` command line, one file each.
//!
//! - [`chat`]: `rein chat [PROMPT]` — a conversation with a model (the README's main job).
//! - [`console`]: `rein console` — the browser half: sessions, a live session view, the Plugins
//!   page.
//! - [`demo`]: `rein demo` — the embedded demo scenario on virtual time.
//! - [`check`]: `rein check LOG…` — the offline invariant checker.
//! - [`scenario`]: `rein scenario run FILE` — a scenario file on virtual time.
//! - [`show`]: `rein show LOG…` — turn-tail panels in the terminal.
//! - [`report`]: `rein report LOG… -o FILE` — a self-contained HTML report.
//! - [`codes`]: `rein codes` — the failure codes `auto-retry` knows, in their three groups.
//! - [`node`]: `rein node` — one node of a cluster sharing a PostgreSQL database: the console
//!   and its API, serving any session of the cluster.
//! - [`stress`]: `rein stress` — many agents under faults, cancellations and plugin chaos, then
//!   every guarantee checked.
//!
//! Shared by them:
//! - [`agent`]: the runtime `chat` talks through and `console` serves (provider, default chain,
//!   store).
//! - [`logs`]: reading the logs `show` and `report` look at.
//! - [`summary`]: the summary of a scenario run a person reads (`demo`, `scenario run`).
//! - [`output_file`]: files written whole (temporary file + rename), never through a link.

pub(crate) mod agent;
pub(crate) mod chat;
pub(crate) mod check;
pub(crate) mod codes;
pub(crate) mod config;
pub(crate) mod console;
pub(crate) mod demo;
pub(crate) mod logs;
pub(crate) mod node;
pub(crate) mod output_file;
pub(crate) mod report;
pub(crate) mod scenario;
pub(crate) mod show;
pub(crate) mod stress;
pub(crate) mod summary;
