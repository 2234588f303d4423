//! One turn-tail panel as HTML: a `<details>` element, collapsed, whose `<summary>` is the
//! panel's summary line and whose body lists every line of the panel.
//!
//! ```html
//! <details class="rein-panel" data-turn="1" data-ending="failed">
//!   <summary><span class="rein-panel-head">Retried 2 times this turn</span> · <span
//!     class="rein-panel-tail">finally failed with SERVER</span></summary>
//!   <ol class="rein-panel-lines">
//!     <li class="rein-line rein-attempt" data-outcome="failed">
//!       <div class="rein-fields"><span class="rein-origin" data-origin="llm-retry">llm-retry</span>
//!         · <span class="rein-budget">attempt 1/2</span> · …</div>
//!       <pre class="rein-raw">the provider's message, verbatim</pre>
//!     </li>
//!   </ol>
//! </details>
//! ```
//!
//! The classes and `data-*` attributes are the styling and testing hooks ([`CSS`] styles them
//! with the `--rein-*` tokens of [`THEME_CSS`](super::THEME_CSS)). Fields are separated by
//! text (` · `), so a panel copied as text reads like `rein show --expand`.

use maud::{Markup, html};
use rein_runtime::failure::Failure;
use rein_runtime::panel::{Attempt, AttemptEnd, Line, TurnPanel, format_ms};
use rein_runtime::plural::count;

use super::Verbatim;

/// The panel stylesheet.
pub const CSS: &str = include_str!("panel.css");

/// The markup of `panel`, collapsed.
pub fn panel(panel: &TurnPanel) -> Markup {
    html! {
        details.rein-panel data-turn=(panel.turn) data-ending=(panel.ending.kind()) {
            summary {
                span.rein-panel-head { (panel.head()) }
                " · "
                span.rein-panel-tail { (panel.tail()) }
            }
            ol.rein-panel-lines {
                @for line in &panel.lines {
                    (self::line(line))
                }
            }
        }
    }
}

/// A separator between fields.
fn sep() -> Markup {
    html! { span.rein-sep { " · " } }
}

/// A provider's text, in full.
fn raw(text: &str) -> Markup {
    html! { pre.rein-raw { "\n" (Verbatim(text)) } }
}

fn line(line: &Line) -> Markup {
    match line {
        Line::Attempt(a) => attempt(a),
        Line::NotStarted(r) => html! {
            li.rein-line.rein-not-started {
                div.rein-fields {
                    span.rein-origin data-origin=(r.plugin) { (r.plugin) } (sep())
                    span.rein-budget { (r.budget()) } (sep())
                    span.rein-wait { "wait " (r.wait()) } (sep())
                    span.rein-where { "turn " (r.turn) "·step " (r.step) } (sep())
                    span.rein-provider { (r.provider) } (sep())
                    span.rein-outcome data-outcome="never-started" { "never started" }
                    " (retrying " span.rein-code { (r.code) } ")"
                }
            }
        },
        Line::Waiting(r) => html! {
            li.rein-line.rein-waiting {
                div.rein-fields {
                    span.rein-origin data-origin=(r.plugin) { (r.plugin) } (sep())
                    span.rein-budget { (r.budget()) } (sep())
                    span.rein-wait { "wait " (r.wait()) } (sep())
                    span.rein-where { "turn " (r.turn) "·step " (r.step) } (sep())
                    span.rein-provider { (r.provider) } (sep())
                    span.rein-outcome data-outcome="waiting" { "waiting" }
                    " (retrying " span.rein-code { (r.code) } ")"
                }
            }
        },
        Line::RouteSwitched(r) => html! {
            li.rein-line.rein-route-switched {
                div.rein-fields {
                    span.rein-origin { "route switched" } (sep())
                    span.rein-where { "turn " (r.turn) "·step " (r.step) } (sep())
                    span.rein-provider { (r.from) " → " (r.to) } (sep())
                    span.rein-code { (r.code) } (sep())
                    span.rein-reason { (r.reason) }
                }
            }
        },
        Line::Compacted(c) => html! {
            li.rein-line.rein-compacted {
                div.rein-fields {
                    span.rein-origin { "context compacted" } (sep())
                    span.rein-where { "turn " (c.turn) "·step " (c.step) } (sep())
                    span { "removed " (count(c.removed.len(), "event", "events")) ", kept " (c.kept) }
                }
            }
        },
        Line::PluginCrashed(p) => html! {
            li.rein-line.rein-crashed {
                div.rein-fields {
                    span.rein-code { "plugin crashed" } (sep())
                    span.rein-origin data-origin=(p.plugin) { (p.plugin) } (sep())
                    span { "restart " (p.restarts) }
                }
                (raw(&p.error))
            }
        },
        Line::ConfigChanged(c) => html! {
            li.rein-line.rein-config-changed {
                div.rein-fields {
                    span.rein-origin { "settings changed" } (sep())
                    span { (c.plugin) } (sep())
                    span { "revision " (c.revision) } (sep())
                    span { (c.changed.join(", ")) }
                }
            }
        },
        Line::Throttled(t) => html! {
            li.rein-line.rein-throttled {
                div.rein-fields {
                    span.rein-origin { "retry throttled" } (sep())
                    span.rein-origin data-origin=(t.plugin) { (t.plugin) } (sep())
                    span.rein-where { "turn " (t.turn) "·step " (t.step) } (sep())
                    span.rein-provider { (t.provider) } (sep())
                    span.rein-code { (t.code) } (sep())
                    span.rein-reason { "the route's retry budget is spent" }
                }
            }
        },
        Line::TurnFailed(f) => html! {
            li.rein-line.rein-turn-failed data-outcome="failed" {
                div.rein-fields {
                    span.rein-origin { "turn failed" }
                    (failure_fields(f))
                }
                (raw(f.message()))
            }
        },
        other => html! { li.rein-line { (format!("{other:?}")) } },
    }
}

fn attempt(a: &Attempt) -> Markup {
    let origin = a.origin.label();
    html! {
        li.rein-line.rein-attempt data-outcome=(a.outcome.kind()) data-attempt=(a.attempt) {
            div.rein-fields {
                span.rein-origin data-origin=(origin) { (origin) }
                @if let Some(retry) = a.origin.retry() {
                    (sep()) span.rein-budget { (retry.budget()) }
                    (sep()) span.rein-wait { "waited " (format_ms(retry.delay_ms)) }
                }
                (sep()) span.rein-where { "turn " (a.turn) "·step " (a.step) }
                (sep())
                span.rein-provider title=(format!("model {}", a.model)) { (a.provider) }
                @if a.resumed {
                    (sep()) span.rein-resumed { (Attempt::RESUMED) }
                }
                @match &a.outcome {
                    AttemptEnd::Failed(failure) => {
                        (failure_fields(failure))
                        @if a.short_circuited() {
                            (sep()) span.rein-short-circuited { (Attempt::SHORT_CIRCUITED) }
                        }
                    }
                    other => {
                        (sep())
                        span.rein-outcome data-outcome=(other.kind()) { (other.kind()) }
                    }
                }
            }
            @if let Some(failure) = a.failure() {
                (raw(failure.message()))
            }
            @if a.outcome != AttemptEnd::Answered && !a.streamed.is_empty() {
                details.rein-streamed {
                    summary { "streamed before it ended" }
                    (raw(&a.streamed))
                }
            }
        }
    }
}

/// ` · CODE · HTTP 503 · retry-after 2000 ms · request r-1`
fn failure_fields(failure: &Failure) -> Markup {
    html! {
        (sep()) span.rein-code { (failure.code()) }
        @if let Some(status) = failure.status() {
            (sep()) span.rein-status { "HTTP " (status) }
        }
        @if let Some(ms) = failure.provider_retry_after_ms() {
            (sep()) span.rein-retry-after { "retry-after " (format_ms(ms)) }
        }
        @if let Some(id) = failure.request_id() {
            (sep()) span.rein-request { "request " (id) }
        }
    }
}

#[cfg(test)]
mod tests {
    use rein_runtime::panel::{Ending, Origin, ScheduledRetry};

    use super::*;

    fn failed(message: &str) -> Failure {
        Failure::new("SERVER", message)
            .unwrap()
            .with_status(503)
            .unwrap()
            .with_request_id("r-\"1\"")
            .unwrap()
    }

    fn sample() -> TurnPanel {
        let retry = ScheduledRetry {
            plugin: "llm-retry".into(),
            mode: "normal".into(),
            retry_id: "id".into(),
            retry: 1,
            max_retries: Some(2),
            delay_ms: 500.0,
            turn: 1,
            step: 1,
            provider: "mock".into(),
            code: "SERVER".into(),
            time: 0,
        };
        let attempt = |attempt, origin, outcome| Attempt {
            turn: 1,
            step: 1,
            attempt,
            provider: "mock".into(),
            model: "m".into(),
            time: 0,
            origin,
            outcome,
            streamed: String::new(),
            resumed: false,
        };
        let message = "\n<script>document.title='x'</script> & </pre>\r\nend";
        TurnPanel {
            turn: 1,
            retries: 1,
            ending: Ending::Failed(failed("last")),
            lines: vec![
                Line::Attempt(attempt(1, Origin::Harness, AttemptEnd::Failed(failed(message)))),
                Line::Attempt(attempt(2, Origin::Retry(retry), AttemptEnd::Failed(failed("last")))),
            ],
        }
    }

    #[test]
    fn a_panel_is_a_collapsed_details_with_every_field() {
        let html = panel(&sample()).into_string();
        assert!(
            html.starts_with(
                r#"<details class="rein-panel" data-turn="1" data-ending="failed"><summary><span class="rein-panel-head">Retried 1 time this turn</span> · <span class="rein-panel-tail">finally failed with SERVER</span></summary>"#
            ),
            "{html}"
        );
        assert!(!html.contains(" open"), "collapsed: {html}");
        for field in [
            r#"<span class="rein-origin" data-origin="harness">harness</span>"#,
            r#"<span class="rein-origin" data-origin="llm-retry">llm-retry</span>"#,
            r#"<span class="rein-budget">attempt 1/2</span>"#,
            r#"<span class="rein-wait">waited 500 ms</span>"#,
            r#"<span class="rein-where">turn 1·step 1</span>"#,
            r#"<span class="rein-provider" title="model m">mock</span>"#,
            r#"<span class="rein-code">SERVER</span>"#,
            r#"<span class="rein-status">HTTP 503</span>"#,
            r#"<span class="rein-request">request r-&quot;1&quot;</span>"#,
        ] {
            assert!(html.contains(field), "{field} in {html}");
        }
    }

    #[test]
    fn the_attempt_after_a_restart_says_it_resumed() {
        let mut resumed = sample();
        if let Some(Line::Attempt(attempt)) = resumed.lines.last_mut() {
            attempt.resumed = true;
        }
        let html = panel(&resumed).into_string();
        assert!(
            html.contains(r#"<span class="rein-resumed">resumed after a restart</span>"#),
            "{html}"
        );
        assert_eq!(html.matches("rein-resumed").count(), 1, "only that attempt: {html}");
        assert!(!panel(&sample()).into_string().contains("rein-resumed"));
    }

    #[test]
    fn a_short_circuited_attempt_and_a_throttled_retry_are_named() {
        let mut panel = sample();
        if let Some(Line::Attempt(attempt)) = panel.lines.last_mut() {
            let message =
                "route \"mock\" is open (circuit breaker) until 9 ms: no request was sent";
            attempt.outcome =
                AttemptEnd::Failed(Failure::internal(rein_runtime::failure::CIRCUIT_OPEN, message));
        }
        panel.lines.insert(
            1,
            Line::Throttled(rein_runtime::event::RetryThrottled {
                turn: 1,
                step: 1,
                provider: "mock".into(),
                plugin: "auto-retry".into(),
                code: "SERVER".into(),
            }),
        );
        let html = self::panel(&panel).into_string();
        for needle in [
            r#"<span class="rein-panel-head">Retried 1 time this turn, then throttled</span>"#,
            r#"<li class="rein-line rein-throttled"><div class="rein-fields"><span class="rein-origin">retry throttled</span>"#,
            r#"<span class="rein-reason">the route's retry budget is spent</span>"#,
            r#"<span class="rein-code">CIRCUIT_OPEN</span><span class="rein-sep"> · </span><span class="rein-short-circuited">short-circuited: the route's breaker is open, no request was sent</span>"#,
        ] {
            assert!(html.contains(needle), "{needle} in {html}");
        }
        assert_eq!(html.matches("rein-short-circuited").count(), 1, "only that attempt: {html}");
    }

    #[test]
    fn provider_text_is_escaped_and_kept_whole() {
        let html = panel(&sample()).into_string();
        assert!(
            html.contains(
                "<pre class=\"rein-raw\">\n\n&lt;script&gt;document.title='x'&lt;/script&gt; &amp; &lt;/pre&gt;&#13;\nend</pre>"
            ),
            "{html}"
        );
        assert!(!html.contains("<script"), "{html}");
    }
}
