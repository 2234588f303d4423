//! The console's pages and the fragments its script swaps in, as `maud` markup (every
//! interpolated string escaped; provider and model text is always shown as text).
//!
//! - [`sessions`]: the sessions list ([`session_rows`] is its live body).
//! - [`session`]: one session's conversation with its turn-tail panels ([`tail`] and [`status`]
//!   are what its live stream sends: the articles after the settled turns, the state line), the
//!   prompt box and the cancel button.
//! - [`plugins`]: the Plugins page, one section per plugin of the chain ([`plugin`], swapped in
//!   after a save), with a settings form for the plugins whose settings change at run time.
//!
//! Pages load `/assets/console.css` and `/assets/console.js` only (no inline script or style, no
//! other origin): the server's `Content-Security-Policy` forbids anything else. The `data-*`
//! attributes are what the script and the tests read.

use std::collections::BTreeMap;

use maud::{DOCTYPE, Markup, html};
use rein_cli::html::conversation::{self, Streaming};
use rein_plugins::auto_retry::catalogue::{CATALOGUE, CodeGroup, CodeInfo, Group, Retried};
use rein_runtime::panel::panels;
use rein_runtime::plugin::PluginSettings;
use rein_runtime::transcript::transcript;
use serde_json::Value;

use super::staged::{Field, Kind};
use super::status::{self, State, Summary};
use super::tail::Tail;

/// What every page says about the console in its header.
#[derive(Debug, Clone)]
pub(crate) struct Context {
    /// `None` for a store served read-only; else the provider and model it talks to.
    pub(crate) live: Option<String>,
    /// The store directory, as given.
    pub(crate) store: String,
    /// The store is a PostgreSQL database, perhaps a cluster's: the sessions list names the
    /// node serving each session.
    pub(crate) cluster: bool,
}

impl Context {
    fn read_only(&self) -> bool {
        self.live.is_none()
    }
}

fn layout(
    context: &Context,
    title: &str,
    page: &str,
    data: &[(&str, &str)],
    body: Markup,
) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="color-scheme" content="light dark";
                title { (title) " · rein console" }
                link rel="stylesheet" href="/assets/console.css";
                script src="/assets/console.js" defer {}
            }
            body data-page=(page)
                data-live=(if context.read_only() { "false" } else { "true" })
                data-session=[data.iter().find(|(k, _)| *k == "session").map(|(_, v)| *v)] {
                header.console {
                    a.brand href="/" { "rein console" }
                    nav {
                        a href="/" aria-current=[current(matches!(page, "sessions" | "session"))] { "Sessions" }
                        a href="/plugins" aria-current=[current(page == "plugins")] { "Plugins" }
                    }
                    span.mode data-mode=(if context.read_only() { "read-only" } else { "live" }) {
                        @match &context.live {
                            Some(provider) => { (provider) " · store " code { (context.store) } }
                            None => { "read-only · store " code { (context.store) } }
                        }
                    }
                }
                main { (body) }
            }
        }
    }
}

/// The sessions list.
pub(crate) fn sessions(context: &Context, rows: &[Summary]) -> Markup {
    let body = html! {
        div.page-head {
            h1 { "Sessions" }
            @if !context.read_only() {
                button #new-session type="button" { "New session" }
            }
        }
        p.meta {
            @if context.read_only() {
                "The logs of the store, newest activity first. This console serves the store \
                 read-only: it shows the sessions and follows their logs, and changes nothing."
            } @else {
                "The sessions of the store, newest activity first; open one to follow it live and \
                 talk to it. " code { "rein chat --session ID" } " continues any of them in a \
                 terminal."
            }
        }
        p.error #page-error role="alert" hidden {}
        table.sessions {
            thead {
                tr {
                    th { "Session" } th { "First prompt" } th.num { "Turns" } th { "Now" }
                    th { "Last turn" } th.num { "Retried or failed" } th { "Last activity" }
                    @if context.cluster { th { "Node" } }
                }
            }
            tbody #session-rows { (session_rows(rows, context.cluster)) }
        }
    };
    layout(context, "Sessions", "sessions", &[], body)
}

/// The rows of the sessions list (replaced live); with `cluster`, a last column naming the node
/// serving each session (a dash when none holds its partition).
pub(crate) fn session_rows(rows: &[Summary], cluster: bool) -> Markup {
    let columns = if cluster { 8 } else { 7 };
    html! {
        @if rows.is_empty() {
            tr.empty { td colspan=(columns) { "No sessions yet." } }
        }
        @for row in rows {
            tr data-session=(row.id) {
                td { a href=(format!("/sessions/{}", row.id)) { code { (row.id) } } }
                @if let Some(error) = &row.error {
                    td.error colspan=(columns - 1) { "cannot be read: " (error) }
                } @else {
                    td.title { (or_dash(row.title.as_deref())) }
                    td.num { (row.turns) }
                    td.state data-state=(state_kind(&row.state)) { (row.state.describe()) }
                    td { (or_dash(row.last_ending.as_deref())) }
                    td.num { (row.retried_or_failed) }
                    td { @if let Some(time) = row.last_time { (time_tag(time)) } }
                    @if cluster { td.node { (or_dash(row.node.as_deref())) } }
                }
            }
        }
    }
}

/// `aria-current="page"` when `yes`.
fn current(yes: bool) -> Option<&'static str> {
    yes.then_some("page")
}

/// The text, or a muted dash.
fn or_dash(text: Option<&str>) -> Markup {
    html! { @if let Some(text) = text { (text) } @else { span.muted { "—" } } }
}

const PLACEHOLDER: &str =
    "Ask something. Ctrl+Enter sends; a prompt sent while a turn runs waits its turn.";

/// What the never-retried group says of itself.
const NEVER_NOTE: &str = "listed so you know they exist; they cannot be turned on";

fn time_tag(ms: u64) -> Markup {
    html! { time data-ms=(ms) { (status::utc(ms)) } }
}

fn state_kind(state: &State) -> &'static str {
    match state {
        State::Idle => "idle",
        State::Running { .. } => "running",
        State::Waiting { .. } => "waiting",
    }
}

/// What the session view shows of a log.
#[derive(Debug)]
pub(crate) struct SessionView<'a> {
    /// The session id.
    pub(crate) id: &'a str,
    /// Its log (all of it: nothing settled).
    pub(crate) log: &'a Tail,
}

/// One session: its state, its conversation, the prompt box.
pub(crate) fn session(context: &Context, view: &SessionView<'_>) -> Markup {
    let state = view.log.state();
    let body = html! {
        div.page-head {
            h1 { "Session " code { (view.id) } }
        }
        div.status-bar {
            p #status role="status" { (self::status(&state)) }
            @if !context.read_only() {
                button #cancel type="button" disabled[!state.is_running()] { "Cancel turn" }
            }
        }
        p.error #page-error role="alert" hidden {}
        section #conversation aria-live="polite" { (tail(view.log)) }
        @if context.read_only() {
            p.meta { "Read-only: this console follows the log as it grows and sends nothing." }
        } @else {
            form #prompt-form autocomplete="off" {
                label for="prompt" { "Prompt" }
                textarea #prompt name="text" rows="3"
                    placeholder=(PLACEHOLDER) {}
                div.actions {
                    button #send type="submit" { "Send" }
                }
            }
        }
    };
    layout(context, &format!("Session {}", view.id), "session", &[("session", view.id)], body)
}

/// The session's state line.
pub(crate) fn status(state: &State) -> Markup {
    html! {
        span.state data-state=(state_kind(state)) data-turn=[match state {
            State::Idle => None,
            State::Running { turn } | State::Waiting { turn, .. } => Some(turn),
        }] { (state.describe()) }
        @if let State::Waiting { since, delay_ms, .. } = state {
            " · " span.muted { "since " (time_tag(*since)) }
            // Whole milliseconds are enough to say when.
            @let until = since.saturating_add(delay_ms.max(0.0).round() as u64);
            " · " span.muted { "until " (time_tag(until)) }
        }
    }
}

/// The conversation after the settled turns of `log` (`tail.rs`): every turn of its tail with
/// its panel, what the running attempt streams, the queued messages; "No turn yet." when there
/// is nothing at all. With nothing settled, the whole conversation.
pub(crate) fn tail(log: &Tail) -> Markup {
    let events = log.events();
    let transcript = transcript(events);
    let panels = panels(events);
    let streaming = status::streaming(events);
    html! {
        @if log.settled() == 0 && transcript.turns.is_empty() && transcript.queued.is_empty() {
            p.note.empty { "No turn yet." }
        }
        (conversation::conversation(
            "conversation",
            &transcript,
            &panels,
            streaming.as_ref().map(|(turn, text)| Streaming { turn: *turn, text }),
        ))
    }
}

/// A plugin of the chain, as the Plugins page shows it.
#[derive(Debug, Clone)]
pub(crate) struct PluginView {
    /// Its name.
    pub(crate) name: String,
    /// Its settings and revision (`None`: it has none to show).
    pub(crate) settings: Option<PluginSettings>,
    /// Why its settings cannot change at run time, when they cannot.
    pub(crate) read_only: Option<String>,
    /// Its form, when the console can edit its settings.
    pub(crate) form: Option<&'static [Field]>,
    /// Where each value in force came from (`default`, `rein.toml:12`, `saved at revision 3`).
    pub(crate) sources: BTreeMap<String, String>,
}

/// The Plugins page.
pub(crate) fn plugins(context: &Context, plugins: &[PluginView]) -> Markup {
    let body = html! {
        div.page-head { h1 { "Plugins" } }
        @if context.read_only() {
            p.unavailable {
                "Unavailable: this console serves a store read-only, with no runtime, so there \
                 are no plugin settings to show or change. Run " code { "rein console" } " \
                 without " code { "--read-only" } " to edit them."
            }
        } @else {
            p.meta {
                "The plugin chain, outermost first. Edits stay staged in the form until Save, \
                 which sends only the fields that changed, based on the revision the form shows: \
                 if another client saved first, the save is refused and nothing is overwritten. \
                 Leaving the page discards staged edits."
            }
            @for plugin in plugins {
                (self::plugin(plugin, None))
            }
        }
    };
    layout(context, "Plugins", "plugins", &[], body)
}

/// One plugin's section; `saved` is the outcome line after a save.
pub(crate) fn plugin(plugin: &PluginView, saved: Option<&str>) -> Markup {
    html! {
        section.plugin #(format!("plugin-{}", plugin.name)) data-plugin=(plugin.name) {
            h2 { (plugin.name) }
            @match (&plugin.settings, plugin.form) {
                (None, _) => p.meta { "No settings." },
                (Some(settings), Some(fields)) if editable(plugin, settings) => {
                    (form(&plugin.name, settings, fields, saved, &plugin.sources))
                }
                (Some(settings), _) => {
                    p.meta.read-only {
                        "Read-only at run time"
                        @if let Some(reason) = &plugin.read_only { ": " (reason) }
                        "."
                    }
                    (values(&settings.settings, &plugin.sources))
                }
            }
        }
    }
}

/// Whether the console edits `plugin`'s settings.
fn editable(plugin: &PluginView, settings: &PluginSettings) -> bool {
    plugin.read_only.is_none() && !settings.read_only
}

fn values(settings: &Value, sources: &BTreeMap<String, String>) -> Markup {
    html! {
        dl.values {
            @if let Some(fields) = settings.as_object() {
                @for (key, value) in fields {
                    dt { code { (key) } }
                    dd {
                        code { (value.to_string()) }
                        @if let Some(source) = sources.get(key) {
                            " " span.source data-source=(source) { "(" (source) ")" }
                        }
                    }
                }
            }
        }
    }
}

fn form(
    plugin: &str,
    settings: &PluginSettings,
    fields: &[Field],
    saved: Option<&str>,
    sources: &BTreeMap<String, String>,
) -> Markup {
    let values = &settings.settings;
    html! {
        form.settings data-plugin=(plugin) data-revision=(settings.revision)
            autocomplete="off" novalidate {
            p.revision { "Revision " span.rev { (settings.revision) } }
            @for field in fields {
                (self::field(plugin, field, values.get(field.key), sources.get(field.key)))
            }
            div.actions {
                button.save type="submit" disabled { "Save" }
                span.staged role="status" { "No staged edits." }
            }
            p.outcome role="alert" data-outcome=[saved.map(|_| "saved")] hidden[saved.is_none()] {
                @if let Some(saved) = saved { (saved) }
            }
        }
    }
}

fn field(plugin: &str, field: &Field, value: Option<&Value>, source: Option<&String>) -> Markup {
    let id = format!("{plugin}-{}", field.key);
    let kind = match field.kind {
        Kind::Switch => "switch",
        Kind::Integer { .. } => "integer",
        Kind::Number { .. } => "number",
        Kind::Codes { .. } => "codes",
        Kind::Routes => "routes",
    };
    let text = value.map(|v| v.to_string()).unwrap_or_default();
    html! {
        div.field data-field=(field.key) data-kind=(kind) {
            @match field.kind {
                Kind::Switch => {
                    label.switch for=(id) {
                        input #(id) type="checkbox" role="switch" name=(field.key)
                            checked[value.and_then(Value::as_bool).unwrap_or(false)];
                        span.key { (field.key) }
                    }
                }
                Kind::Integer { min, max } => {
                    label for=(id) { span.key { (field.key) } }
                    input #(id) type="text" inputmode="numeric" name=(field.key) value=(text);
                    span.bounds { (min) "–" (max) }
                }
                Kind::Number { min, max } => {
                    label for=(id) { span.key { (field.key) } }
                    input #(id) type="text" inputmode="decimal" name=(field.key) value=(text);
                    span.bounds { (min) "–" (max) }
                }
                Kind::Codes { grouped, .. } => (codes(&id, field.key, value, grouped)),
                Kind::Routes => {
                    label for=(id) { span.key { (field.key) } " (one per line, in order)" }
                    textarea #(id) name=(field.key) rows="3" spellcheck="false" {
                        (names(value).join("\n"))
                    }
                }
            }
            p.help {
                (field.help)
                @if let Some(source) = source {
                    " " span.source data-source=(source) { "In force: " (source) "." }
                }
            }
            p.problem role="alert" hidden {}
        }
    }
}

/// The strings of a JSON list (nothing for anything else).
fn names(value: Option<&Value>) -> Vec<&str> {
    value
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// A code list: a switch per catalogue code — in its group when `grouped` (`auto-retry`'s
/// defaults), else in one list — the never-retried codes disabled, seeded from the accepted list,
/// and the other codes, one per line.
fn codes(id: &str, key: &str, value: Option<&Value>, grouped: bool) -> Markup {
    let accepted = names(value);
    let other: Vec<&str> =
        accepted.iter().copied().filter(|code| CodeGroup::of(code).is_none()).collect();
    let never = |group: &&Group| group.retried == Retried::Never;
    html! {
        fieldset.codes {
            legend { span.key { (key) } }
            @if grouped {
                @for group in &CATALOGUE.groups {
                    (code_group(group, &accepted, group_name(group.group), Some(group.title)))
                }
            } @else {
                div.group data-group="switchable" {
                    ul {
                        @for info in CATALOGUE.groups.iter().filter(|g| !never(g)).flat_map(|g| g.codes) {
                            (code_switch(info, &accepted, false))
                        }
                    }
                }
                @for group in CATALOGUE.groups.iter().filter(never) {
                    (code_group(group, &accepted, group_name(group.group), Some(group.title)))
                }
            }
            label for=(format!("{id}-other")) { "Other codes, one per line" }
            textarea #(format!("{id}-other")) name="otherCodes" rows="3" spellcheck="false" {
                (other.join("\n"))
            }
        }
    }
}

/// One group of the catalogue: its title, and a switch per code (disabled in the never-retried
/// group).
fn code_group(group: &Group, accepted: &[&str], name: &str, title: Option<&str>) -> Markup {
    let never = group.retried == Retried::Never;
    html! {
        div.group data-group=(name) {
            @if let Some(title) = title {
                h4 {
                    (title)
                    @if never { span.muted { " · " (NEVER_NOTE) } }
                }
            }
            ul {
                @for info in group.codes {
                    (code_switch(info, accepted, never))
                }
            }
        }
    }
}

/// The switch of one catalogue code, on when `accepted` lists it.
fn code_switch(info: &CodeInfo, accepted: &[&str], disabled: bool) -> Markup {
    html! {
        li {
            label.switch title=(info.description) {
                input type="checkbox" role="switch" data-code=(info.code)
                    checked[accepted.contains(&info.code)] disabled[disabled];
                code { (info.code) }
                span.desc { (info.description) }
            }
        }
    }
}

fn group_name(group: CodeGroup) -> &'static str {
    match group {
        CodeGroup::Default => "default",
        CodeGroup::OptIn => "optIn",
        CodeGroup::Never => "never",
    }
}

/// A page that says what went wrong: a path nothing serves, a session that does not exist, a
/// log that cannot be read.
pub(crate) fn problem(context: &Context, title: &str, what: &str) -> Markup {
    let body = html! {
        div.page-head { h1 { (title) } }
        p.error { (what) }
        p { a href="/" { "All sessions" } }
    };
    layout(context, title, "problem", &[], body)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::staged;
    use super::*;

    fn context() -> Context {
        Context {
            live: Some("model on provider <x>".into()),
            store: ".rein/sessions".into(),
            cluster: false,
        }
    }

    #[test]
    fn the_code_switches_are_seeded_from_the_accepted_list() {
        let settings = PluginSettings {
            revision: 4,
            settings: json!({
                "enabled": true, "extraRetries": 3, "initialDelayMs": 1000, "maxDelayMs": 60000,
                "jitterRatio": 0.2, "retryableCodes": ["SERVER", "QUOTA", "AUTH", "HTTP_418", "X<1>"],
            }),
            read_only: false,
        };
        let view = PluginView {
            name: "auto-retry".into(),
            settings: Some(settings),
            read_only: None,
            form: staged::form("auto-retry"),
            sources: BTreeMap::from([(
                "extraRetries".to_owned(),
                "saved at revision 4".to_owned(),
            )]),
        };
        let html = plugin(&view, None).into_string();
        for needle in [
            r#"data-revision="4""#,
            r#"<input type="checkbox" role="switch" data-code="SERVER" checked>"#,
            r#"<input type="checkbox" role="switch" data-code="QUOTA" checked>"#,
            r#"<input type="checkbox" role="switch" data-code="RATE_LIMIT">"#,
            r#"<input type="checkbox" role="switch" data-code="AUTH" checked disabled>"#,
            r#"<input type="checkbox" role="switch" data-code="ABORTED" disabled>"#,
            r#"name="otherCodes" rows="3" spellcheck="false">HTTP_418
X&lt;1&gt;</textarea>"#,
            r#"<input id="auto-retry-extraRetries" type="text" inputmode="numeric" name="extraRetries" value="3">"#,
            r#"<input id="auto-retry-jitterRatio" type="text" inputmode="decimal" name="jitterRatio" value="0.2">"#,
            r#"<input id="auto-retry-enabled" type="checkbox" role="switch" name="enabled" checked>"#,
            r#"<button class="save" type="submit" disabled>Save</button>"#,
        ] {
            assert!(html.contains(needle), "{needle} in {html}");
        }
    }

    #[test]
    fn the_fallback_form_lists_its_routes_in_order_and_its_codes_in_one_list() {
        let settings = PluginSettings {
            revision: 2,
            settings: json!({
                "routes": ["openai:small", "deepseek:deepseek-reasoner"],
                "codes": ["RATE_LIMIT", "QUOTA"], "eagerCodes": [],
                "maxWaitMs": 30000, "cooldownMs": 60000,
            }),
            read_only: false,
        };
        let view = PluginView {
            name: "fallback".into(),
            settings: Some(settings),
            read_only: None,
            form: staged::form("fallback"),
            sources: BTreeMap::new(),
        };
        let html = plugin(&view, None).into_string();
        for needle in [
            r#"<div class="field" data-field="routes" data-kind="routes">"#,
            r#"<textarea id="fallback-routes" name="routes" rows="3" spellcheck="false">openai:small
deepseek:deepseek-reasoner</textarea>"#,
            r#"<div class="group" data-group="switchable">"#,
            r#"<input type="checkbox" role="switch" data-code="QUOTA" checked>"#,
            r#"<input type="checkbox" role="switch" data-code="AUTH" disabled>"#,
            r#"<input id="fallback-cooldownMs" type="text" inputmode="numeric" name="cooldownMs" value="60000">"#,
        ] {
            assert!(html.contains(needle), "{needle} in {html}");
        }
        assert!(!html.contains("On by default"), "auto-retry's groups are not fallback's: {html}");
    }

    #[test]
    fn read_only_plugins_and_consoles_show_values_without_a_form() {
        let view = PluginView {
            name: "llm-retry".into(),
            settings: Some(PluginSettings {
                revision: 0,
                settings: json!({"maxTransientRetries": 5}),
                read_only: true,
            }),
            read_only: Some("fixed when the runtime is built".into()),
            form: None,
            sources: BTreeMap::new(),
        };
        let html = plugin(&view, None).into_string();
        assert!(html.contains("Read-only at run time: fixed when the runtime is built."), "{html}");
        assert!(html.contains("<dt><code>maxTransientRetries</code></dt><dd><code>5</code></dd>"));
        assert!(!html.contains("<form"), "{html}");

        let read_only = Context { live: None, store: "logs".into(), cluster: false };
        let page = plugins(&read_only, &[view]).into_string();
        assert!(page.contains(r#"<p class="unavailable">Unavailable"#), "{page}");
        assert!(!page.contains("maxTransientRetries"), "{page}");
        let page = sessions(&context(), &[]).into_string();
        assert!(page.contains("model on provider &lt;x&gt;"), "escaped: {page}");
        assert!(page.contains("No sessions yet."), "{page}");
        assert!(page.contains(r#"<script src="/assets/console.js" defer></script>"#), "{page}");
    }
}
