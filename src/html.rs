//! HTML views of session logs: the markup of `rein report`, built so that any page showing a
//! session (a console) can reuse its pieces. Markup is built with `maud`, which escapes every
//! interpolated string, so text from a provider or a model is always shown as text.
//!
//! - [`panel`]: one turn-tail panel as a collapsed `<details>`, and its stylesheet.
//! - [`conversation`]: a session's turns — messages, tool calls, the panel at each turn's tail,
//!   what a running turn streams — shared by the report and the console.
//! - [`report`]: a self-contained page: each log's conversation with a panel at the tail of
//!   each turn that retried or failed.
//! - [`THEME_CSS`]: the colour tokens the stylesheets use (CSS custom properties), light and
//!   dark through `prefers-color-scheme`.
//!
//! A page that embeds panels includes [`THEME_CSS`] (or defines the same `--rein-*` properties)
//! and [`panel::CSS`].

use std::fmt::Write as _;

use maud::{Escaper, Render};

pub mod conversation;
pub mod panel;
pub mod report;

/// The colour tokens (`--rein-bg`, `--rein-fg`, `--rein-bad`…), light by default and dark when
/// the reader's system prefers it.
pub const THEME_CSS: &str = include_str!("html/theme.css");

/// Text shown exactly as it is: escaped for HTML, and with carriage returns written as
/// character references so the parser does not fold `\r\n` into `\n`. Put it right after a
/// `"\n"` inside `<pre>`, whose first newline the parser drops, so that a text starting with a
/// newline keeps it.
#[derive(Debug, Clone, Copy)]
pub struct Verbatim<'a>(pub &'a str);

impl Render for Verbatim<'_> {
    fn render_to(&self, buffer: &mut String) {
        for (i, piece) in self.0.split('\r').enumerate() {
            if i > 0 {
                buffer.push_str("&#13;");
            }
            // Writing to a String cannot fail.
            let _ = Escaper::new(buffer).write_str(piece);
        }
    }
}

#[cfg(test)]
mod tests {
    use maud::html;

    use super::*;

    #[test]
    fn verbatim_text_is_escaped_and_keeps_carriage_returns() {
        let cases = [
            ("<script>x</script>", "&lt;script&gt;x&lt;/script&gt;"),
            ("a & \"b\" 'c'", "a &amp; &quot;b&quot; 'c'"),
            ("one\r\ntwo\r", "one&#13;\ntwo&#13;"),
        ];
        for (text, want) in cases {
            assert_eq!(html! { (Verbatim(text)) }.into_string(), want, "{text:?}");
        }
    }
}
