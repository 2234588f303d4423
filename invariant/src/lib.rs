//! rein-invariant: the rules of the session-log contract (SPEC §8) as pure functions, an offline
//! checker, and a live validator.
//!
//! # Layout
//!
//! Pure core first:
//! - [`rules`]: the catalogue ([`Rule`], one stable kebab-case name per rule) and the rule code,
//!   one file per family: sessions (nesting and numbering), requests, retries.
//! - `state`: the fold the rules read — open turn and step, the current attempt, retry chains
//!   and retry-id ownership.
//! - [`violation`]: a broken rule as data ([`Violation`]).
//! - [`checker`]: [`Checker`] folds a log event by event; [`check_log`], [`check_finished_log`].
//! - [`schema`]: one line of text to an event, or the rule the line breaks.
//!
//! Shell:
//! - [`live`]: [`LiveValidator`], the runtime's `Validator` hook around a [`Checker`].
//!
//! No tokio, no actors and no I/O: callers read the logs (the `rein check` CLI, the session-log
//! actor) and hand events in.
//!
//! ```
//! use rein_invariant::{check_log, Rule};
//! use rein_runtime::event::{Envelope, Event, SessionStart, TurnStart};
//!
//! let log = [
//!     Envelope { seq: 0, time: 0, event: Event::SessionStart(SessionStart { session: "s".into(), format: 1 }) },
//!     Envelope { seq: 1, time: 0, event: Event::TurnStart(TurnStart { turn: 2 }) },
//! ];
//! let violations = check_log(&log);
//! assert_eq!(violations.len(), 1);
//! assert_eq!(violations[0].rule, Rule::TurnNumberedInOrder);
//! assert_eq!(
//!     violations[0].to_string(),
//!     "turn/start seq 1: turn 2 must be 1: the first turn is 1 [turn-numbered-in-order]"
//! );
//! ```

pub mod checker;
pub mod live;
pub mod rules;
pub mod schema;
mod state;
pub mod violation;

pub use checker::{Checker, check_finished_log, check_log};
pub use live::LiveValidator;
pub use rules::{Family, Rule};
pub use schema::{LineError, parse_line};
pub use violation::Violation;
