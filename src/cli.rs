//! The subcommands of the `rein` command line, one file each.
//!
//! - [`demo`]: `rein demo` — the embedded demo scenario (the README's main job).
//! - [`check`]: `rein check LOG…` — the offline invariant checker.
//! - [`scenario`]: `rein scenario run FILE` — a scenario file on virtual time.

pub(crate) mod check;
pub(crate) mod demo;
pub(crate) mod scenario;
