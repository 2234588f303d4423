//! rein-plugins: rein's retry plugins.
//!
//! # Layout
//!
//! Pure core first:
//! - [`backoff`]: the backoff curve of SPEC §5.2, a pure function of the retry number and a
//!   jitter sample.
//! - [`llm_retry`]: the official executor `llm-retry` (SPEC §5): its strict configuration
//!   ([`llm_retry::config`]) and its normal/always decisions ([`llm_retry::decision`]).

pub mod backoff;
pub mod llm_retry;
