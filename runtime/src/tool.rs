//! Tools the model may call: the [`Tool`] trait and the [`Toolbox`] a runtime offers.
//!
//! A tool is called by the step that received the model's `toolCalls`: the step appends
//! `tool/call`, awaits [`Tool::call`] racing the turn's cancellation, and appends `tool/result`.
//!
//! # An error the model sees, or a failure
//!
//! A call ends in a [`ToolOutcome`]: its output; an error the model should see and react to (bad
//! arguments, a file that does not exist) — written as `tool/result {isError: true}`, and the turn
//! goes on to its next step; or a failure — the tool cannot work (or it panicked). A failure is
//! never offered to the waterfall (that is for provider failures): the call still gets its
//! `tool/result {isError: true}`, so the model-visible history stays well formed (every call
//! answered) and a later `Session::retry()` shows the model what went wrong, and then the step
//! and the turn end with `{kind:"error"}` (code [`TOOL_ERROR`]).
//!
//! A call to a tool the agent does not have is the model's mistake, not a broken tool: it is an
//! error the model sees ([`Toolbox::unknown`]: `no tool named "grep"; available: "echo"`), so the
//! model can answer without it or call a tool it has — bounded, like any tool use, by the turn's
//! step limit.
//!
//! # Why the future is `'static`
//!
//! The step races the call against the turn's cancellation token and drops it when the turn is
//! cancelled; a `'static` future owns what it needs, so dropping it is always safe. Tools that
//! hold a long wait should also watch `cancel` to release resources early.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::future::BoxFuture;
use crate::provider::ToolSpec;

pub mod echo;

/// What a tool author uses, in one import: `use rein_runtime::tool::prelude::*;`.
pub mod prelude {
    pub use super::{Tool, ToolOutcome};
    pub use crate::future::BoxFuture;
    pub use crate::provider::ToolSpec;
    pub use tokio_util::sync::CancellationToken;
}

/// The failure code of a turn ended by a tool error (not offered to the waterfall).
pub const TOOL_ERROR: &str = "TOOL_ERROR";

/// How a tool call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolOutcome {
    /// The output the model sees.
    Output(String),
    /// An error the model sees (`tool/result {isError: true}`); the turn goes on, so the model
    /// can react to it.
    Error(String),
    /// The tool failed: the call is answered with `isError: true` and the turn ends `error`
    /// ([`TOOL_ERROR`]).
    Failure(String),
}

/// A tool the model may call.
///
/// ```
/// use rein_runtime::prelude::*;
/// use rein_runtime::tool::prelude::*;
/// use serde_json::{Value, json};
/// use tokio_util::sync::CancellationToken;
///
/// /// Adds two numbers.
/// struct Add;
///
/// impl Tool for Add {
///     fn spec(&self) -> ToolSpec {
///         ToolSpec {
///             name: "add".into(),
///             description: "Adds a and b.".into(),
///             parameters: json!({"type": "object", "required": ["a", "b"],
///                                "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}),
///         }
///     }
///     fn call(&self, arguments: Value, _: CancellationToken) -> BoxFuture<'static, ToolOutcome> {
///         let outcome = match (arguments["a"].as_f64(), arguments["b"].as_f64()) {
///             (Some(a), Some(b)) => ToolOutcome::Output((a + b).to_string()),
///             // The model sees the error and may call again: the turn goes on.
///             _ => ToolOutcome::Error("add: a and b must be numbers".into()),
///         };
///         Box::pin(std::future::ready(outcome))
///     }
/// }
///
/// # tokio_test::block_on(async {
/// let cancel = CancellationToken::new();
/// assert_eq!(Add.call(json!({"a": 2, "b": 3}), cancel.clone()).await, ToolOutcome::Output("5".into()));
/// assert!(matches!(Add.call(json!({"a": "2"}), cancel).await, ToolOutcome::Error(_)));
/// # });
/// ```
///
/// Offer it with `RuntimeBuilder::tool(Arc::new(Add))`; its calls and results are logged as
/// `tool/call` and `tool/result`.
pub trait Tool: Send + Sync + 'static {
    /// Its name, description and parameters, as offered to the model.
    fn spec(&self) -> ToolSpec;

    /// Runs one call (see [`ToolOutcome`]). The future is dropped if the turn is cancelled.
    fn call(&self, arguments: Value, cancel: CancellationToken) -> BoxFuture<'static, ToolOutcome>;
}

/// The tools a runtime offers, in registration order.
#[derive(Clone, Default)]
pub struct Toolbox {
    order: Vec<ToolSpec>,
    by_name: HashMap<String, Arc<dyn Tool>>,
}

impl std::fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Toolbox").field("tools", &self.order).finish()
    }
}

impl Toolbox {
    /// An empty toolbox.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool; a later tool with the same name replaces the earlier one (keeping its place).
    pub fn add(&mut self, tool: Arc<dyn Tool>) {
        let spec = tool.spec();
        match self.order.iter_mut().find(|s| s.name == spec.name) {
            Some(slot) => *slot = spec.clone(),
            None => self.order.push(spec.clone()),
        }
        self.by_name.insert(spec.name, tool);
    }

    /// The specs offered to the model, in registration order.
    pub fn specs(&self) -> &[ToolSpec] {
        &self.order
    }

    /// The tool named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.by_name.get(name)
    }

    /// How many tools there are.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The outcome of a call to `name` when no tool has that name: an error the model sees,
    /// naming the tools it may call (`no tool named "grep"; available: "echo", "add"`, or
    /// `available: none`), in registration order.
    pub fn unknown(&self, name: &str) -> ToolOutcome {
        let available = match self.order.is_empty() {
            true => "none".to_owned(),
            false => {
                let names: Vec<String> =
                    self.order.iter().map(|s| format!("{:?}", s.name)).collect();
                names.join(", ")
            }
        };
        ToolOutcome::Error(format!("no tool named {name:?}; available: {available}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Named(&'static str, &'static str);

    impl Tool for Named {
        fn spec(&self) -> ToolSpec {
            ToolSpec::new(self.0, self.1)
        }
        fn call(&self, _: Value, _: CancellationToken) -> BoxFuture<'static, ToolOutcome> {
            let out = self.1.to_owned();
            Box::pin(async move { ToolOutcome::Output(out) })
        }
    }

    #[tokio::test]
    async fn tools_keep_registration_order_and_a_new_one_replaces_its_namesake() {
        let mut tools = Toolbox::new();
        tools.add(Arc::new(Named("b", "first b")));
        tools.add(Arc::new(Named("a", "an a")));
        tools.add(Arc::new(Named("b", "second b")));
        let names: Vec<_> = tools.specs().iter().map(|s| s.description.as_str()).collect();
        assert_eq!(names, ["second b", "an a"]);
        let out = tools.get("b").unwrap().call(Value::Null, CancellationToken::new()).await;
        assert_eq!(out, ToolOutcome::Output("second b".to_owned()));
        assert!(tools.get("c").is_none());
        assert_eq!(tools.len(), 2);
    }

    #[test]
    fn a_call_to_an_unknown_tool_is_an_error_the_model_sees_naming_the_tools_it_has() {
        let mut two = Toolbox::new();
        two.add(Arc::new(Named("echo", "e")));
        two.add(Arc::new(Named("add", "a")));
        let cases = [
            (Toolbox::new(), "grep", r#"no tool named "grep"; available: none"#),
            (two.clone(), "grep", r#"no tool named "grep"; available: "echo", "add""#),
            (two, "say \"hi\"\n", r#"no tool named "say \"hi\"\n"; available: "echo", "add""#),
        ];
        for (tools, name, message) in cases {
            assert_eq!(tools.unknown(name), ToolOutcome::Error(message.to_owned()), "{name:?}");
        }
    }
}
