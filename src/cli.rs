//! The subcommands of the `rein` command line, one file each.
//!
//! - [`check`]: `rein check LOG…` — the offline invariant checker.

pub(crate) mod check;
