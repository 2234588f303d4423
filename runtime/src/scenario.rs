//! Scenarios (SPEC §10): one session driven deterministically on virtual time.
//!
//! - [`format`]: the scenario file as validated types; every error names its JSON path.

pub mod format;
