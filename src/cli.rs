//! The subcommands of the `rein` command line, one file each.
//!
//! - [`scenario`]: `rein scenario run FILE` — a scenario file on virtual time.

pub(crate) mod scenario;
