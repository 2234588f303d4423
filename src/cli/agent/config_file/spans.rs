//! Where a key of a TOML file is: the line of the value a field path names.
//!
//! Errors and warnings about a configuration file name the field path the reader saw
//! (`plugins.auto-retry.retryableCodes[2]`) and the line of the file it came from. The values are
//! read with `toml` into plain tables; this keeps the same document parsed with its spans
//! ([`toml::de::DeTable`]) to answer "which line" for any path, as deep as the path goes (a path
//! deeper than the file — a field the file does not set — gets the line of its nearest
//! ancestor that the file does set).

use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// A parsed document's spans.
pub(crate) struct Spans<'t> {
    text: &'t str,
    root: Spanned<DeTable<'t>>,
}

/// One step of a field path: a key or an index.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step<'p> {
    Key(&'p str),
    Index(usize),
}

impl<'t> Spans<'t> {
    /// The spans of `text` (which `toml` already accepted; `None` if it does not parse).
    pub(crate) fn parse(text: &'t str) -> Option<Self> {
        DeTable::parse(text).ok().map(|root| Self { text, root })
    }

    /// The 1-based line of the value at `path` (`a.b[2].c`; keys with dots or brackets cannot be
    /// named), or of its deepest ancestor the document has; `None` when not even the first key
    /// is there.
    pub(crate) fn line(&self, path: &str) -> Option<usize> {
        let steps = steps(path);
        let (first, rest) = steps.split_first()?;
        let Step::Key(key) = first else { return None };
        let mut at = entry(self.root.get_ref(), key)?;
        let mut span = at.span();
        for step in rest {
            let next = match step {
                Step::Key(key) => match at.get_ref() {
                    DeValue::Table(table) => entry(table, key),
                    _ => None,
                },
                Step::Index(i) => at.get_ref().get(*i),
            };
            let Some(next) = next else { break };
            at = next;
            span = at.span();
        }
        Some(self.line_at(span))
    }

    /// The 1-based line of a byte offset range's start.
    fn line_at(&self, span: Range<usize>) -> usize {
        let start = span.start.min(self.text.len());
        self.text.as_bytes()[..start].iter().filter(|b| **b == b'\n').count() + 1
    }
}

fn entry<'a, 't>(table: &'a DeTable<'t>, key: &str) -> Option<&'a Spanned<DeValue<'t>>> {
    table.iter().find(|(k, _)| k.get_ref().as_ref() == key).map(|(_, v)| v)
}

/// `a.b[2].c` as steps.
fn steps(path: &str) -> Vec<Step<'_>> {
    let mut out = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (key, mut indexes) = match part.find('[') {
            Some(open) => (&part[..open], &part[open..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            out.push(Step::Key(key));
        }
        while let Some(rest) = indexes.strip_prefix('[') {
            let Some(close) = rest.find(']') else { break };
            if let Ok(i) = rest[..close].parse() {
                out.push(Step::Index(i));
            }
            indexes = &rest[close + 1..];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"store = "x"

[[routes]]
provider = "openai"
retryPolicy = { mode = "normal", backoff = { jitterRatio = 1.5 } }

[plugins.auto-retry]
retryableCodes = [
  "SERVER",
  "AUTH",
]
"#;

    #[test]
    fn a_path_finds_the_line_of_its_value_or_of_its_deepest_ancestor() {
        let spans = Spans::parse(FILE).unwrap();
        let cases = [
            ("store", Some(1)),
            ("routes[0].provider", Some(4)),
            ("routes[0].retryPolicy.backoff.jitterRatio", Some(5)),
            ("routes[0].model", Some(3)), // not set: its route's table
            ("routes[3].model", Some(3)), // no such route: the routes array
            ("plugins.auto-retry.retryableCodes[1]", Some(10)),
            ("plugins.auto-retry.retryableCodes", Some(8)),
            ("plugins.auto-retry.extraRetries", Some(7)),
            ("plugins.compaction.x", Some(7)), // `plugins` is implied by its first table header
            ("console.port", None),
        ];
        for (path, line) in cases {
            assert_eq!(spans.line(path), line, "{path}");
        }
    }

    #[test]
    fn a_path_is_read_as_keys_and_indexes() {
        use Step::{Index, Key};
        let cases: [(&str, Vec<Step>); 4] = [
            ("a", vec![Key("a")]),
            ("a.b[2].c", vec![Key("a"), Key("b"), Index(2), Key("c")]),
            ("codes[0][1]", vec![Key("codes"), Index(0), Index(1)]),
            ("", vec![]),
        ];
        for (path, want) in cases {
            assert_eq!(steps(path), want, "{path}");
        }
    }
}
