//! Test fixtures shared by rein's crates (not published; a path dev-dependency only).
//!
//! Every crate's tests take their helpers from here instead of copying them or including
//! another crate's files. One concept per module:
//!
//! - [`history`]: a builder of session logs, event by event ([`History`]), with the
//!   failed-attempt prefix most retry tests start from ([`History::failed`]).
//! - [`failed`]: the same failed attempt as the events a step appends, or as an open session log
//!   holding them (for the plugins' unit tests).
//! - [`generate`]: valid logs drawn from a byte string (for property tests).
//! - [`log`]: reading logs back (kinds, turn ends, answers, failures, retries, requests) and the
//!   checks every end-to-end log must pass ([`log::assert_valid`], [`log::assert_invariants`]).
//! - [`scripted`]: an adapter that answers each attempt from a script and records the requests.
//! - [`plugins`]: test plugins whose recovery is a closure, sharing a trace of who was asked.
//! - [`recorder`]: a plugin that records the offers it gets and answers as told.
//! - [`stamped`]: envelopes for store tests, stamped at a fixed time, and a many-sessions
//!   append workload.
//! - [`runtime`]: the runtime most end-to-end tests build (memory store, virtual clock, live
//!   validator, one scripted route), and its checked shutdown.
//! - [`postgres`]: a throwaway PostgreSQL cluster in a temporary directory ([`PgCluster`]).
//!
//! Behind features, the parts that pull more:
//!
//! - `mutation`: the strategies of bad-input property tests: `mutation`, bytes flipped, cut,
//!   inserted or removed, and `arbitrary_json`, any JSON value.
//! - `spans`: `spans`, capturing tracing spans' fields.
//! - `server`: `server`, a scripted model server on loopback (axum), and `messages`, the
//!   Anthropic Messages stream it can play.
//! - `heap`: `heap`, the heap a parked turn and an idle session hold.
//! - `cli`: `cli`, `console` and `scenario_files`, the `rein` binary as a process (`rein
//!   console`, `rein node`), and `proxy`, a TCP proxy that can cut a process off its server.
//! - `browser`: `browser`, a headless Chromium driven through chromedriver.
//!
//! For the crates this one depends on (`rein-event`, `rein-runtime`, `rein-invariant`), only
//! their integration tests (`tests/`) use it: their unit tests would see two copies of their own
//! types.

// Fixtures panic on a broken set-up: a failing fixture is a failing test.
#![allow(clippy::unwrap_used)]

#[cfg(feature = "mutation")]
pub mod arbitrary_json;
#[cfg(feature = "browser")]
pub mod browser;
#[cfg(feature = "cli")]
pub mod cli;
#[cfg(feature = "cli")]
pub mod console;
pub mod failed;
pub mod generate;
#[cfg(feature = "heap")]
pub mod heap;
pub mod history;
pub mod log;
#[cfg(feature = "server")]
pub mod messages;
#[cfg(feature = "mutation")]
pub mod mutation;
pub mod plugins;
pub mod postgres;
#[cfg(feature = "cli")]
pub mod proxy;
pub mod recorder;
pub mod runtime;
#[cfg(feature = "cli")]
pub mod scenario_files;
pub mod scripted;
#[cfg(feature = "server")]
pub mod server;
#[cfg(feature = "spans")]
pub mod spans;
pub mod stamped;

pub use history::History;
pub use postgres::PgCluster;
