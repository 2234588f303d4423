//! rein-cli: the `rein` command line and what only it needs, as a library for its binary, its
//! tests and the system benchmark. An agent program depends on the library `rein` (package
//! `rein-agent`) instead, which builds no web server and no command line.
//!
//! - [`scenario`]: scenario runs with the shipped plugins and the invariant checker.
//! - [`html`]: HTML views of session logs: turn-tail panels and the `rein report` page.
//! - [`stress`]: the engine of `rein stress` (many agents under faults, cancellations and plugin
//!   chaos, every guarantee checked after), also run by the system benchmark.
//!
//! The library root is `src/rein_cli.rs`, not `src/lib.rs`: the facade's `lib.rs` moved to
//! `rein/src/lib.rs` and keeps its history there.

// The family, under the names the modules below use (`crate::runtime::…`).
use rein::{invariant, plugins, providers, runtime};

pub mod html;
pub mod scenario;
pub mod stress;

/// The README's code, compiled with the doctests so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
