//! [`EchoTool`]: returns its `text` argument unchanged. The tool every example and scenario can
//! rely on (`"tools": ["echo"]`).

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{Tool, ToolOutcome};
use crate::future::BoxFuture;
use crate::provider::ToolSpec;

/// Returns the `text` argument: `{"text": "hi"}` → `hi`. A bare JSON string is echoed too; any
/// other argument is an error the model sees, naming what was expected.
#[derive(Debug, Clone, Copy, Default)]
pub struct EchoTool;

impl EchoTool {
    /// The tool's name.
    pub const NAME: &'static str = "echo";
}

/// The pure part: what `echo` answers for `arguments`.
fn echo(arguments: &Value) -> Result<String, String> {
    match arguments {
        Value::String(text) => Ok(text.clone()),
        Value::Object(map) => match map.get("text") {
            Some(Value::String(text)) => Ok(text.clone()),
            Some(other) => Err(format!("echo: arguments.text must be a string, got {other}")),
            None => Err("echo: missing arguments.text".to_owned()),
        },
        other => Err(format!("echo: arguments must be {{\"text\": string}}, got {other}")),
    }
}

impl Tool for EchoTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(Self::NAME, "Returns its `text` argument unchanged.").with_parameters(
            serde_json::json!({
                "type": "object",
                "properties": {"text": {"type": "string", "description": "The text to return."}},
                "required": ["text"],
            }),
        )
    }

    fn call(
        &self,
        arguments: Value,
        _cancel: CancellationToken,
    ) -> BoxFuture<'static, ToolOutcome> {
        let answer = match echo(&arguments) {
            Ok(text) => ToolOutcome::Output(text),
            Err(error) => ToolOutcome::Error(error),
        };
        Box::pin(async move { answer })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn echo_answers_its_text_and_names_what_is_wrong() {
        let table: Vec<(Value, Result<&str, &str>)> = vec![
            (json!({"text": "hi"}), Ok("hi")),
            (json!({"text": ""}), Ok("")),
            (json!({"text": "hi", "extra": 1}), Ok("hi")),
            (json!("bare"), Ok("bare")),
            (json!({"text": 3}), Err("echo: arguments.text must be a string, got 3")),
            (json!({}), Err("echo: missing arguments.text")),
            (json!(null), Err("echo: arguments must be {\"text\": string}, got null")),
            (json!([1]), Err("echo: arguments must be {\"text\": string}, got [1]")),
        ];
        for (arguments, expected) in table {
            let got = echo(&arguments);
            assert_eq!(got, expected.map(str::to_owned).map_err(str::to_owned), "{arguments}");
        }
    }

    #[tokio::test]
    async fn the_tool_is_named_echo() {
        assert_eq!(EchoTool.spec().name, "echo");
        let out = EchoTool.call(json!({"text": "x"}), CancellationToken::new()).await;
        assert_eq!(out, ToolOutcome::Output("x".to_owned()));
        let out = EchoTool.call(json!({"text": 1}), CancellationToken::new()).await;
        assert_eq!(out, ToolOutcome::Error("echo: arguments.text must be a string, got 1".into()));
    }
}
