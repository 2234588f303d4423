//! What one node asks another for a session it serves, and what it answers: the `body` and
//! `reply` of a row of `commands`, as JSON. Pure: encoding, decoding, and the mapping between a
//! session's errors and what travels.

use serde::{Deserialize, Serialize};

use crate::event::CancelCause;
use crate::provider::Generation;
use crate::session::{Prompt, SessionError};

/// A request for a session, forwarded to the node that serves it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub(crate) enum Command {
    /// Open the session (created if new).
    Open,
    /// A prompt.
    Prompt {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        route: Option<String>,
        #[serde(default)]
        generation: Generation,
    },
    /// A retry of the last turn.
    Retry,
    /// Cancel the running turn.
    Cancel { cause: CancelCause },
    /// Close the session.
    Close,
}

impl Command {
    /// The `kind` column: what a person reading the table sees first.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Command::Open => "open",
            Command::Prompt { .. } => "prompt",
            Command::Retry => "retry",
            Command::Cancel { .. } => "cancel",
            Command::Close => "close",
        }
    }

    pub(crate) fn prompt(prompt: Prompt) -> Self {
        Command::Prompt { text: prompt.text, route: prompt.route, generation: prompt.generation }
    }
}

/// The serving node's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "camelCase")]
pub(crate) enum Reply {
    /// Opened, or closed.
    Done,
    /// The prompted (or retried) turn started: its number and the `seq` of its first event.
    #[serde(rename_all = "camelCase")]
    Started { turn: u32, from_seq: u64 },
    /// Whether a running turn was cancelled.
    Cancelled { cancelled: bool },
    /// The session refused or failed the request.
    Failed { error: Refusal },
}

/// Why a request failed on the serving node, as it travels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub(crate) enum Refusal {
    /// A queued prompt dropped before it started.
    Dropped { cause: CancelCause },
    /// Anything else, in the serving node's words.
    Other { message: String },
}

impl Refusal {
    /// What the serving node's `error` becomes on the wire.
    pub(crate) fn of(error: &SessionError) -> Self {
        match error {
            SessionError::Dropped { cause } => Refusal::Dropped { cause: cause.clone() },
            other => Refusal::Other { message: other.to_string() },
        }
    }

    /// The error a caller of `session` sees.
    pub(crate) fn into_error(self, session: &str) -> SessionError {
        match self {
            Refusal::Dropped { cause } => SessionError::Dropped { cause },
            Refusal::Other { message } => {
                SessionError::Remote { session: session.to_owned(), message }
            }
        }
    }
}

/// Encodes a value of this module (they always encode).
pub(crate) fn encode<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_and_replies_travel_as_json_and_come_back_whole() {
        let warm = Generation::new().with_temperature(1.5).unwrap();
        let cases: [(Command, &str); 5] = [
            (Command::Open, r#"{"kind":"open"}"#),
            (
                Command::prompt(Prompt::new("hi").on("backup").generation(warm)),
                r#"{"kind":"prompt","text":"hi","route":"backup","generation":{"temperature":1.5}}"#,
            ),
            (Command::Retry, r#"{"kind":"retry"}"#),
            (
                Command::Cancel { cause: CancelCause::User },
                r#"{"kind":"cancel","cause":{"kind":"user"}}"#,
            ),
            (Command::Close, r#"{"kind":"close"}"#),
        ];
        for (command, json) in cases {
            assert_eq!(encode(&command), json);
            assert_eq!(serde_json::from_str::<Command>(json).unwrap(), command);
        }
        let plain: Command = serde_json::from_str(r#"{"kind":"prompt","text":"x"}"#).unwrap();
        assert_eq!(plain, Command::prompt(Prompt::new("x")));
        let replies = [
            (Reply::Done, r#"{"reply":"done"}"#),
            (
                Reply::Started { turn: 3, from_seq: 40 },
                r#"{"reply":"started","turn":3,"fromSeq":40}"#,
            ),
            (Reply::Cancelled { cancelled: true }, r#"{"reply":"cancelled","cancelled":true}"#),
        ];
        for (reply, json) in replies {
            assert_eq!(encode(&reply), json);
            assert_eq!(serde_json::from_str::<Reply>(json).unwrap(), reply);
        }
    }

    #[test]
    fn a_refusal_keeps_a_dropped_prompts_cause_and_the_serving_nodes_words() {
        let dropped = SessionError::Dropped { cause: CancelCause::User };
        let back = Refusal::of(&dropped).into_error("s");
        assert!(matches!(back, SessionError::Dropped { cause: CancelCause::User }), "{back}");
        let other = SessionError::NotStarted { session: "s".into(), message: "disk full".into() };
        let back = Refusal::of(&other).into_error("s");
        let SessionError::Remote { session, message } = &back else { panic!("{back:?}") };
        assert_eq!(session, "s");
        assert!(message.contains("disk full"), "{message}");
    }
}
