//! The model-visible history: one [`Message`] per `user/message`, `assistant/message` and
//! `tool/result` of a log, and [`Messages`], the list a request carries.
//!
//! # Why the history is shared, copy on write
//!
//! Every attempt carries the whole model-visible history ([`Messages`]), and a session's history
//! grows with every turn. Copied into each request, it would make turn 2,000 of a session cost
//! far more than turn 20 — in the runtime, before any provider saw it. [`Messages`] is shared: a
//! request takes the session's history with a constant-time clone. Appending to the session's
//! history copies it only if a request still holds the old one; by the time a step appends the
//! model's answer, its attempt has ended and the provider has dropped its request, so the
//! append is in place.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::event::ToolCall;

/// One entry of the model-visible history, folded from the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "camelCase")]
pub enum Message {
    /// A `user/message`.
    User {
        /// Its text.
        text: String,
    },
    /// An `assistant/message`.
    Assistant {
        /// Its text.
        text: String,
        /// The tool calls it asked for.
        #[serde(default, skip_serializing_if = "Vec::is_empty", rename = "toolCalls")]
        tool_calls: Vec<ToolCall>,
    },
    /// A `tool/result`.
    Tool {
        /// The call it answers.
        id: String,
        /// The output.
        output: String,
        /// Whether the tool failed.
        #[serde(rename = "isError")]
        is_error: bool,
    },
}

/// The model-visible history a request carries: a list of [`Message`]s whose clones share their
/// storage (see the module docs).
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Messages(Arc<Vec<Message>>);

impl std::fmt::Debug for Messages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}

impl std::ops::Deref for Messages {
    type Target = [Message];

    fn deref(&self) -> &[Message] {
        &self.0
    }
}

impl Messages {
    /// No messages.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a message (in place unless another clone still shares the list).
    pub fn push(&mut self, message: Message) {
        Arc::make_mut(&mut self.0).push(message);
    }

    /// The message at `index`, to change it in place.
    pub fn get_mut(&mut self, index: usize) -> Option<&mut Message> {
        Arc::make_mut(&mut self.0).get_mut(index)
    }
}

impl From<Vec<Message>> for Messages {
    fn from(messages: Vec<Message>) -> Self {
        Self(Arc::new(messages))
    }
}

impl FromIterator<Message> for Messages {
    fn from_iter<I: IntoIterator<Item = Message>>(iter: I) -> Self {
        Self(Arc::new(iter.into_iter().collect()))
    }
}

impl<'a> IntoIterator for &'a Messages {
    type Item = &'a Message;
    type IntoIter = std::slice::Iter<'a, Message>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl PartialEq<[Message]> for Messages {
    fn eq(&self, other: &[Message]) -> bool {
        self.len() == other.len() && self.iter().zip(other).all(|(a, b)| a == b)
    }
}

impl PartialEq<Vec<Message>> for Messages {
    fn eq(&self, other: &Vec<Message>) -> bool {
        *self == other[..]
    }
}

impl<const N: usize> PartialEq<[Message; N]> for Messages {
    fn eq(&self, other: &[Message; N]) -> bool {
        *self == other[..]
    }
}
