//! Caught panics as data: the text a crash report carries.
//!
//! A plugin's recovery, an adapter call or a tool call may panic; the runtime catches the panic
//! at the task boundary (`catch_unwind`) and turns it into a value — `Next` plus a
//! `plugin/crashed` event, an `UNKNOWN` failure, a tool error — instead of losing a task.

use std::any::Any;

/// The message of a caught panic (`panic!("…")` payloads are `&str` or `String`).
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "panic with a non-text payload".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panic_payloads_become_text() {
        let cases: Vec<(Box<dyn Any + Send>, &str)> = vec![
            (Box::new("static"), "static"),
            (Box::new(String::from("owned")), "owned"),
            (Box::new(7_u8), "panic with a non-text payload"),
        ];
        for (payload, expected) in cases {
            assert_eq!(panic_message(payload.as_ref()), expected);
        }
    }
}
