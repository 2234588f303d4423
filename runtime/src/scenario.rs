//! Scenarios (SPEC §10): one session driven deterministically on virtual time.
//!
//! - [`format`]: the scenario file as validated types; every error names its JSON path.
//! - [`report`]: the pure builder of the `--json` report from the session's log.

pub mod format;
pub mod report;
