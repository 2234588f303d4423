//! The console's HTTP server (axum): the routes, and the wiring between a request, the pure
//! checks (`guard`, `request`, `staged`, `status`), the pages and the runtime.
//!
//! | route | answers |
//! |---|---|
//! | `GET /`, `/sessions/{id}`, `/plugins`, `/routes` | the pages |
//! | `GET /assets/console.css`, `/assets/console.js` | the page's only assets, embedded |
//! | `GET /api/sessions` | every session's row (`{"sessions": [...], "readOnly": bool}`) |
//! | `POST /api/sessions` | a new session (`{"id"}` optional) → 201 `{"id", "url"}` |
//! | `GET /api/sessions/{id}` | its state and its whole log |
//! | `GET /api/sessions/{id}/events` | server-sent `update` events: the state and the whole conversation at once, then on every append what follows the final turns (`follow.rs`) |
//! | `GET /api/events` | server-sent `update` events for the sessions list |
//! | `POST /api/sessions/{id}/prompt` | `{"text"}` → 202: the turn starts (or waits its turn) |
//! | `POST /api/sessions/{id}/cancel` | → `{"cancelled": bool}` |
//! | `POST /api/sessions/{id}/turns` | `{"text"}` → the turn's events as they are committed, a JSON line each, then its outcome (`turns.rs`; the session is created if new) |
//! | `GET /api/sessions/{id}/turns/{turn}?from=SEQ` | turn `turn` followed in the log from `SEQ` to its `turn/end`, wherever it runs (`turns.rs`) |
//! | `GET /api/plugins`, `/api/plugins/{name}` | settings, revision, whether they can change |
//! | `PATCH /api/plugins/{name}` | `{"revision", "patch"}` → the runtime's settings API |
//! | `POST /api/plugins/{name}/staged` | a form's staged edits → what Save would send, and what blocks it (nothing applied) |
//! | `POST /api/plugins/{name}/save` | a form's staged edits → saved (only the changed fields, under the form's revision) |
//! | `GET /api/routes` | every route's health: breaker state, tokens, until when open, settings and revision, its changes (`health.rs`) |
//! | `GET /api/routes/events` | server-sent `update` events: the routes (`routes`, and the page's `html`) at once, then whenever they changed (looked at on every append and once a second) |
//!
//! Errors are `{"error": {"kind", "message", …}}`: `badRequest` 400, `forbidden` 403 (a foreign
//! `Host` or `Origin`), `readOnly` 403, `notFound` 404, `timeout` 408 (a body that did not
//! arrive in time), `exists` 409, `stale` 409 (another client saved first; `revision` is the
//! current one), `tooLarge` 413, `unsupportedMediaType` 415 (a write without a JSON body),
//! `invalid` 422 (`problems`, each naming its field), `unavailable` 503. Sessions are created
//! one at a time, so of concurrent creations of one id exactly one succeeds.
//! Every response forbids framing, sniffing, caching and any script or style from elsewhere.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRequest, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use maud::Markup;
use rein_runtime::event::CancelCause;
use rein_runtime::plugin::ConfigError;
use rein_runtime::runtime::Runtime;
use rein_runtime::session::SessionError;
use rein_runtime::store::{SessionStore, check_session_id};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::body::{self, BODY_TIMEOUT, BodyError, DRAIN_BYTES, MAX_BODY_BYTES};
use super::drawn::Drawn;
use super::feed::{Changes, Feed};
use super::follow;
use super::guard::{self, Own};
use super::health::{RouteHealth, RouteView};
use super::logs::Logs;
use super::pages::{self, Context, PluginView, SessionView};
use super::request::{self, BadRequest};
use super::staged::{self, Problem};
use super::status;
use super::tail::Tail;
use crate::cli::agent::config_file::sources;

mod turns;

/// The stylesheet: the colour tokens, the panels', the conversation's, the console's own.
fn css() -> String {
    [
        rein_cli::html::THEME_CSS,
        rein_cli::html::panel::CSS,
        rein_cli::html::report::CSS,
        include_str!("console.css"),
    ]
    .join("\n")
}

/// The page script.
const JS: &str = include_str!("console.js");

/// The least time between two updates of a session view (a fast stream appends many chunks).
const SESSION_GAP: Duration = Duration::from_millis(100);
/// The least time between two updates of the sessions list (it reads every log).
const LIST_GAP: Duration = Duration::from_millis(500);

/// What every response carries.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The runtime the console serves, when it serves one.
pub(crate) struct Live {
    /// The runtime.
    pub(crate) runtime: Runtime,
    /// The node it is, when it is one of a cluster (`rein node`).
    pub(crate) node: Option<rein_runtime::cluster::Node>,
    /// Its store, when it is a PostgreSQL database.
    pub(crate) cluster: Option<Arc<rein_runtime::store::postgres::PostgresStore>>,
    /// Its store (for fresh session ids).
    pub(crate) store: Arc<dyn SessionStore>,
    /// Told of every append.
    pub(crate) feed: Arc<Feed>,
    /// Held while a session is created.
    pub(crate) creating: tokio::sync::Mutex<()>,
    /// The settings of the revisions forms were drawn at.
    pub(crate) drawn: Drawn,
    /// Each plugin's settings as built (defaults overlaid with the configuration file's), by
    /// plugin: what a value's source is told from.
    pub(crate) built: BTreeMap<String, Value>,
    /// Where the configuration file sets each plugin's keys (`PATH:LINE`) and to what, by plugin.
    pub(crate) file_keys: BTreeMap<String, BTreeMap<String, (String, Value)>>,
    /// The routes, in order (the primary first).
    pub(crate) routes: Vec<String>,
}

/// Everything a request can reach.
pub(crate) struct App {
    /// What the pages say about the console.
    pub(crate) context: Context,
    /// The console's own address.
    pub(crate) own: Own,
    /// Where the logs are read from.
    pub(crate) logs: Logs,
    /// The runtime; `None` for a store served read-only.
    pub(crate) live: Option<Live>,
    /// The store, when it is a PostgreSQL database (a cluster's: the rows name each session's
    /// node).
    pub(crate) cluster: Option<Arc<rein_runtime::store::postgres::PostgresStore>>,
    /// Cancelled when the console stops: every event stream ends.
    pub(crate) closing: CancellationToken,
    /// The tasks that await the turns prompts started.
    pub(crate) turns: TaskTracker,
}

type Shared = State<Arc<App>>;

/// The router over `app`.
pub(crate) fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(sessions_page))
        .route("/sessions/{id}", get(session_page))
        .route("/plugins", get(plugins_page))
        .route("/routes", get(routes_page))
        .route("/assets/console.css", get(stylesheet))
        .route("/assets/console.js", get(script))
        .route("/api/sessions", get(list_sessions).post(new_session))
        .route("/api/sessions/{id}", get(one_session))
        .route("/api/sessions/{id}/events", get(session_events))
        .route("/api/sessions/{id}/prompt", post(prompt))
        .route("/api/sessions/{id}/cancel", post(cancel))
        .route("/api/sessions/{id}/turns", post(turns::prompt))
        .route("/api/sessions/{id}/turns/{turn}", get(turns::follow))
        .route("/api/events", get(list_events))
        .route("/api/plugins", get(list_plugins))
        .route("/api/plugins/{name}", get(one_plugin).patch(patch_plugin))
        .route("/api/plugins/{name}/staged", post(check_form))
        .route("/api/plugins/{name}/save", post(save_form))
        .route("/api/routes", get(list_routes))
        .route("/api/routes/events", get(route_events))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(Arc::clone(&app), guarded))
        .with_state(app)
}

// ---- the guard and the headers ----

fn text_header(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Refuses what `guard::check` refuses (403) and writes without a JSON body (415); adds the
/// security headers to every response.
async fn guarded(State(app): Shared, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let method = request.method().as_str().to_owned();
    let api = request.uri().path().starts_with("/api/");
    let checked = guard::check(
        app.own,
        &method,
        text_header(headers, header::HOST),
        text_header(headers, header::ORIGIN),
        headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()),
    );
    let mut response = match checked {
        Err(refusal) => refused(api, StatusCode::FORBIDDEN, "forbidden", &refusal.to_string()),
        Ok(())
            if guard::is_write(&method)
                && !guard::json_body(text_header(headers, header::CONTENT_TYPE)) =>
        {
            let message = "a write must send a JSON body (Content-Type: application/json)";
            refused(api, StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupportedMediaType", message)
        }
        Ok(()) => next.run(request).await,
    };
    let headers = response.headers_mut();
    for (name, value) in [
        ("content-security-policy", CSP),
        ("x-content-type-options", "nosniff"),
        ("x-frame-options", "DENY"),
        ("referrer-policy", "no-referrer"),
        ("cross-origin-opener-policy", "same-origin"),
        ("cross-origin-resource-policy", "same-origin"),
        ("cache-control", "no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

fn refused(api: bool, status: StatusCode, kind: &str, message: &str) -> Response {
    if api {
        error(status, kind, message)
    } else {
        (status, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], format!("{message}\n"))
            .into_response()
    }
}

// ---- answers ----

fn error(status: StatusCode, kind: &str, message: impl Into<String>) -> Response {
    error_with(status, kind, message, Map::new())
}

fn error_with(
    status: StatusCode,
    kind: &str,
    message: impl Into<String>,
    extra: Map<String, Value>,
) -> Response {
    let mut body = Map::new();
    body.insert("kind".into(), Value::from(kind));
    body.insert("message".into(), Value::from(message.into()));
    body.extend(extra);
    (status, axum::Json(json!({ "error": body }))).into_response()
}

fn bad_request(e: &BadRequest) -> Response {
    let extra = Map::from_iter([("field".to_owned(), Value::from(e.field.clone()))]);
    error_with(StatusCode::BAD_REQUEST, "badRequest", e.to_string(), extra)
}

/// A write's body, read as `body.rs` says.
struct Body(Bytes);

impl<S: Send + Sync> FromRequest<S> for Body {
    type Rejection = Response;

    async fn from_request(request: Request, _: &S) -> Result<Self, Response> {
        let announced = text_header(request.headers(), header::CONTENT_LENGTH)
            .and_then(|length| length.trim().parse().ok());
        body::read(request.into_body(), announced, MAX_BODY_BYTES, DRAIN_BYTES, BODY_TIMEOUT)
            .await
            .map(Body)
            .map_err(|e| body_refused(&e))
    }
}

/// A body that could not be read: the answer, after which the connection closes (the rest of
/// the body is never read).
fn body_refused(e: &BodyError) -> Response {
    let (status, kind) = match e {
        BodyError::TooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "tooLarge"),
        BodyError::TimedOut(_) => (StatusCode::REQUEST_TIMEOUT, "timeout"),
        BodyError::Broken(_) => (StatusCode::BAD_REQUEST, "badRequest"),
    };
    let mut response = error(status, kind, e.to_string());
    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

fn read_only_console() -> Response {
    error(
        StatusCode::FORBIDDEN,
        "readOnly",
        "this console serves a store read-only: nothing can be changed",
    )
}

fn page(markup: Markup) -> Response {
    Html(markup.into_string()).into_response()
}

async fn not_found(State(app): Shared, request: Request) -> Response {
    let path = request.uri().path().to_owned();
    if path.starts_with("/api/") {
        return error(StatusCode::NOT_FOUND, "notFound", format!("nothing at {path}"));
    }
    let markup =
        pages::problem(&app.context, "Not found", &format!("Nothing is served at {path}."));
    (StatusCode::NOT_FOUND, Html(markup.into_string())).into_response()
}

async fn stylesheet() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], css()).into_response()
}

async fn script() -> Response {
    ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], JS).into_response()
}

// ---- logs ----

impl App {
    /// Every session's row, newest activity first.
    async fn rows(&self) -> Result<Vec<status::Summary>, String> {
        follow::Store::new(&self.logs, self.cluster.clone()).rows().await
    }

    /// What tells a stream of session `id` (`None`: of the sessions list) that a log grew.
    fn changes(&self, id: Option<&str>) -> Changes {
        match (&self.live, id) {
            (Some(live), Some(id)) => Changes::Feed(live.feed.session(id)),
            (Some(live), None) => Changes::Feed(live.feed.all()),
            (None, id) => self.logs.polled(id),
        }
    }
}

/// Server-sent `update` events: what `next` makes of `follower` at once, then after every
/// change — at most one per `gap`, the changes in between coalesced, nothing sent when `next`
/// finds nothing new — until the console stops. `next` takes the follower and gives it back
/// with its update.
fn updates<S, F, R>(
    app: Arc<App>,
    changes: Changes,
    gap: Duration,
    follower: S,
    next: F,
) -> Response
where
    S: Send + 'static,
    F: Fn(S) -> R + Send + Sync + Copy + 'static,
    R: std::future::Future<Output = (S, Option<Value>)> + Send,
{
    let start = (app, changes, follower, true);
    let stream =
        futures::stream::unfold(start, move |(app, mut changes, mut follower, first)| async move {
            let mut wait = !first;
            loop {
                if wait {
                    tokio::select! {
                        () = async {
                            tokio::time::sleep(gap).await;
                            changes.next().await;
                        } => {}
                        () = app.closing.cancelled() => return None,
                    }
                }
                wait = true;
                if app.closing.is_cancelled() {
                    return None;
                }
                let (back, update) = next(follower).await;
                follower = back;
                if let Some(update) = update {
                    let event = Event::default().event("update").data(update.to_string());
                    return Some((Ok::<_, Infallible>(event), (app, changes, follower, false)));
                }
            }
        });
    Sse::new(stream).keep_alive(KeepAlive::default()).into_response()
}

// ---- sessions ----

async fn sessions_page(State(app): Shared) -> Response {
    match app.rows().await {
        Ok(rows) => page(pages::sessions(&app.context, &rows)),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, "internal", e),
    }
}

async fn session_page(State(app): Shared, Path(id): Path<String>) -> Response {
    match app.logs.read(&id).await {
        Ok(Some(events)) => {
            page(pages::session(&app.context, &SessionView { id: &id, log: &Tail::of(events) }))
        }
        Ok(None) => {
            let markup =
                pages::problem(&app.context, "Not found", &format!("There is no session {id:?}."));
            (StatusCode::NOT_FOUND, Html(markup.into_string())).into_response()
        }
        Err(e) => {
            let markup = pages::problem(&app.context, "Cannot read the log", &e);
            (StatusCode::INTERNAL_SERVER_ERROR, Html(markup.into_string())).into_response()
        }
    }
}

async fn list_sessions(State(app): Shared) -> Response {
    match app.rows().await {
        Ok(rows) => {
            axum::Json(json!({"sessions": rows, "readOnly": app.live.is_none()})).into_response()
        }
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, "internal", e),
    }
}

async fn list_events(State(app): Shared) -> Response {
    let changes = app.changes(None);
    // The last update sent: a poll that finds the same rows sends nothing.
    let store = (follow::Store::new(&app.logs, app.cluster.clone()), None::<Value>);
    let cluster = app.context.cluster;
    updates(Arc::clone(&app), changes, LIST_GAP, store, move |(mut store, last)| async move {
        let update = match store.rows().await {
            Ok(rows) => json!({"rows": pages::session_rows(&rows, cluster).into_string()}),
            Err(e) => json!({"error": e}),
        };
        if last.as_ref() == Some(&update) {
            return ((store, last), None);
        }
        ((store, Some(update.clone())), Some(update))
    })
}

async fn one_session(State(app): Shared, Path(id): Path<String>) -> Response {
    match app.logs.read(&id).await {
        Ok(Some(events)) => axum::Json(json!({
            "id": id,
            "state": status::state(&events),
            "turns": events.iter().filter(|e| e.kind() == "turn/start").count(),
            "events": events,
        }))
        .into_response(),
        Ok(None) => no_session(&id),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, "unreadable", e),
    }
}

fn no_session(id: &str) -> Response {
    error(StatusCode::NOT_FOUND, "notFound", format!("there is no session {id:?}"))
}

async fn session_events(State(app): Shared, Path(id): Path<String>) -> Response {
    match app.logs.exists(&id).await {
        Ok(true) => {}
        Ok(false) => return no_session(&id),
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, "unreadable", e),
    }
    let changes = app.changes(Some(&id));
    let session = follow::Session::new(&id, &app.logs);
    updates(Arc::clone(&app), changes, SESSION_GAP, session, |mut session| async move {
        let update = session.update().await;
        (session, update)
    })
}

async fn new_session(State(app): Shared, Body(body): Body) -> Response {
    let Some(live) = &app.live else { return read_only_console() };
    let asked = match request::new_session(&body) {
        Ok(asked) => asked,
        Err(e) => return bad_request(&e),
    };
    if let Some(Err(e)) = asked.as_deref().map(check_session_id) {
        return bad_request(&BadRequest { field: "id".into(), message: e.to_string() });
    }
    // One creation at a time: the check that the log does not exist and the open that writes
    // it are one step, so of two requests for one id exactly one creates it.
    let _creating = live.creating.lock().await;
    let id = match asked {
        Some(id) => match crate::cli::agent::sessions::is_free(live.store.as_ref(), &id).await {
            Ok(true) => id,
            Ok(false) => {
                return error(StatusCode::CONFLICT, "exists", format!("session {id:?} exists"));
            }
            Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, "unreadable", e),
        },
        None => match crate::cli::agent::sessions::fresh_id_in(live.store.as_ref()).await {
            Ok(id) => id,
            Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, "internal", e),
        },
    };
    match live.runtime.session(&id).await {
        Ok(_) => {
            (StatusCode::CREATED, axum::Json(json!({"id": id, "url": format!("/sessions/{id}")})))
                .into_response()
        }
        Err(e) => session_error(&e),
    }
}

fn session_error(e: &SessionError) -> Response {
    match e {
        SessionError::ShutDown => {
            error(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "the console is stopping")
        }
        other => error(StatusCode::CONFLICT, "session", other.to_string()),
    }
}

async fn prompt(State(app): Shared, Path(id): Path<String>, Body(body): Body) -> Response {
    let Some(live) = &app.live else { return read_only_console() };
    let text = match request::prompt(&body) {
        Ok(text) => text,
        Err(e) => return bad_request(&e),
    };
    match app.logs.exists(&id).await {
        Ok(true) => {}
        Ok(false) => return no_session(&id),
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, "unreadable", e),
    }
    let session = match live.runtime.session(&id).await {
        Ok(session) => session,
        Err(e) => return session_error(&e),
    };
    match session.prompt(text) {
        Ok(handle) => {
            // Awaited so the turn's outcome is taken; its events reach the page through the log.
            app.turns.spawn(async move {
                if let Err(e) = handle.await {
                    tracing::debug!(error = %e, "a console prompt did not run");
                }
            });
            (StatusCode::ACCEPTED, axum::Json(json!({"session": id}))).into_response()
        }
        Err(e) => session_error(&e),
    }
}

async fn cancel(State(app): Shared, Path(id): Path<String>) -> Response {
    let Some(live) = &app.live else { return read_only_console() };
    match app.logs.exists(&id).await {
        Ok(true) => {}
        Ok(false) => return no_session(&id),
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, "unreadable", e),
    }
    let session = match live.runtime.session(&id).await {
        Ok(session) => session,
        Err(e) => return session_error(&e),
    };
    match session.cancel(CancelCause::User).await {
        Ok(cancelled) => axum::Json(json!({"cancelled": cancelled})).into_response(),
        Err(e) => session_error(&e),
    }
}

// ---- plugins ----

/// Plugin `name` of the chain as the pages show it; its settings are noted as seen at their
/// revision (`drawn.rs`).
fn plugin_view(live: &Live, name: &str) -> Option<PluginView> {
    let runtime = &live.runtime;
    if !runtime.plugins().iter().any(|n| n == name) {
        return None;
    }
    let settings = runtime.plugin_settings(name).ok();
    if let Some(settings) = &settings {
        live.drawn.saw(name, settings.revision, &settings.settings);
    }
    let read_only = settings.as_ref().filter(|s| s.read_only).map(|s| {
        match runtime.check_plugin_settings(name, &json!({}), s.revision) {
            Err(ConfigError::ReadOnly { reason, .. }) => reason,
            _ => "its settings cannot change while the runtime runs".to_owned(),
        }
    });
    let sources = settings.as_ref().map_or_else(BTreeMap::new, |settings| {
        let built = live.built.get(name).cloned().unwrap_or(Value::Null);
        let file = live.file_keys.get(name).cloned().unwrap_or_default();
        sources::sources(&built, &file, &settings.settings, settings.revision)
            .into_iter()
            .map(|(key, source)| (key, source.to_string()))
            .collect()
    });
    Some(PluginView {
        name: name.to_owned(),
        settings,
        read_only,
        form: staged::form(name),
        sources,
    })
}

fn plugin_json(view: &PluginView) -> Value {
    let editable = view.form.is_some()
        && view.read_only.is_none()
        && view.settings.as_ref().is_some_and(|s| !s.read_only);
    json!({
        "name": view.name,
        "revision": view.settings.as_ref().map(|s| s.revision),
        "settings": view.settings.as_ref().map(|s| s.settings.clone()),
        "readOnly": view.settings.as_ref().is_some_and(|s| s.read_only),
        "readOnlyReason": view.read_only,
        "editable": editable,
        "sources": view.sources,
    })
}

async fn plugins_page(State(app): Shared) -> Response {
    let views: Vec<PluginView> = match &app.live {
        Some(live) => {
            live.runtime.plugins().iter().filter_map(|name| plugin_view(live, name)).collect()
        }
        None => Vec::new(),
    };
    page(pages::plugins(&app.context, &views))
}

async fn list_plugins(State(app): Shared) -> Response {
    let Some(live) = &app.live else {
        return axum::Json(json!({"plugins": [], "readOnly": true})).into_response();
    };
    let plugins: Vec<Value> = live
        .runtime
        .plugins()
        .iter()
        .filter_map(|name| plugin_view(live, name))
        .map(|view| plugin_json(&view))
        .collect();
    axum::Json(json!({"plugins": plugins, "readOnly": false})).into_response()
}

fn no_plugin(name: &str) -> Response {
    error(StatusCode::NOT_FOUND, "notFound", format!("no plugin named {name:?} is in the chain"))
}

async fn one_plugin(State(app): Shared, Path(name): Path<String>) -> Response {
    let Some(live) = &app.live else { return read_only_console() };
    match plugin_view(live, &name) {
        Some(view) => axum::Json(plugin_json(&view)).into_response(),
        None => no_plugin(&name),
    }
}

/// The top-level field a settings path names (`retryableCodes[2]` → `retryableCodes`).
fn field_of(path: &str) -> &str {
    path.split(['[', '.']).next().unwrap_or(path)
}

fn stale(based_on: u64, current: u64) -> Response {
    let extra = Map::from_iter([
        ("revision".to_owned(), Value::from(current)),
        ("basedOn".to_owned(), Value::from(based_on)),
    ]);
    error_with(
        StatusCode::CONFLICT,
        "stale",
        format!(
            "not saved: another client saved revision {current} after revision {based_on}, \
             which these edits are based on. Nothing was overwritten; reload to start from the \
             current settings"
        ),
        extra,
    )
}

fn invalid(problems: &[Problem]) -> Response {
    let message = problems.first().map_or_else(String::new, |p| p.message.clone());
    let extra = Map::from_iter([("problems".to_owned(), json!(problems))]);
    error_with(StatusCode::UNPROCESSABLE_ENTITY, "invalid", message, extra)
}

fn config_error(name: &str, e: ConfigError) -> Response {
    match e {
        ConfigError::StaleRevision { based_on, current } => stale(based_on, current),
        ConfigError::Invalid { path, message } => {
            let field = field_of(&path).to_owned();
            invalid(&[Problem { field, message: format!("{path}: {message}") }])
        }
        ConfigError::UnknownPlugin(_) => no_plugin(name),
        e @ ConfigError::NotSaved { .. } => {
            error(StatusCode::SERVICE_UNAVAILABLE, "notSaved", e.to_string())
        }
        other => error(StatusCode::FORBIDDEN, "readOnly", other.to_string()),
    }
}

async fn patch_plugin(State(app): Shared, Path(name): Path<String>, Body(body): Body) -> Response {
    let Some(live) = &app.live else { return read_only_console() };
    let based = match request::patch(&body) {
        Ok(based) => based,
        Err(e) => return bad_request(&e),
    };
    let runtime = &live.runtime;
    match runtime.configure_plugin(&name, Value::Object(based.object), based.revision).await {
        Ok(outcome) => axum::Json(json!({
            "revision": outcome.revision,
            "changed": outcome.changed,
            "settings": plugin_view(live, &name).and_then(|view| view.settings).map(|s| s.settings),
        }))
        .into_response(),
        Err(e) => config_error(&name, e),
    }
}

/// A form's staged edits, read against the settings of the revision it was drawn at.
struct Read {
    view: PluginView,
    /// The current revision.
    revision: u64,
    /// The revision the form was drawn at.
    based_on: u64,
    staged: staged::Staged,
    /// Whether the settings of `based_on` are known (else `staged` holds no change, only the
    /// problems of the values themselves).
    known: bool,
}

fn read_form(live: &Live, name: &str, body: &[u8]) -> Result<Read, Box<Response>> {
    let runtime = &live.runtime;
    let based = request::form(body).map_err(|e| Box::new(bad_request(&e)))?;
    let view = plugin_view(live, name).ok_or_else(|| Box::new(no_plugin(name)))?;
    let (Some(settings), Some(fields), None) = (&view.settings, view.form, &view.read_only) else {
        let reason = view.read_only.clone().unwrap_or_else(|| "no editable settings".to_owned());
        return Err(Box::new(error(
            StatusCode::FORBIDDEN,
            "readOnly",
            format!("the settings of plugin {name} cannot be changed here: {reason}"),
        )));
    };
    let revision = settings.revision;
    // Another client may have saved since the form was drawn: its edits are what differs from
    // the settings it shows, not from the current ones.
    let drawn = if based.revision == revision {
        Some(settings.settings.clone())
    } else {
        live.drawn.at(name, based.revision)
    };
    let known = drawn.is_some();
    let mut staged =
        staged::stage(fields, drawn.as_ref().unwrap_or(&settings.settings), &based.object);
    if !known {
        staged.patch.clear();
        staged.changed.clear();
    }
    if revision == based.revision && staged.problems.is_empty() && !staged.patch.is_empty() {
        // The plugin is the authority: whatever it would refuse blocks the save too.
        let patch = Value::Object(staged.patch.clone());
        if let Err(ConfigError::Invalid { path, message }) =
            runtime.check_plugin_settings(name, &patch, based.revision)
        {
            let field = field_of(&path).to_owned();
            staged.problems.push(Problem { field, message: format!("{path}: {message}") });
        }
    }
    Ok(Read { view, revision, based_on: based.revision, staged, known })
}

async fn check_form(State(app): Shared, Path(name): Path<String>, Body(body): Body) -> Response {
    let Some(live) = &app.live else { return read_only_console() };
    match read_form(live, &name, &body) {
        Ok(read) => axum::Json(json!({
            "revision": read.revision,
            "basedOn": read.based_on,
            "stale": read.revision != read.based_on,
            "changed": read.known.then_some(read.staged.changed),
            "problems": read.staged.problems,
        }))
        .into_response(),
        Err(response) => *response,
    }
}

async fn save_form(State(app): Shared, Path(name): Path<String>, Body(body): Body) -> Response {
    let Some(live) = &app.live else { return read_only_console() };
    let read = match read_form(live, &name, &body) {
        Ok(read) => read,
        Err(response) => return *response,
    };
    if read.revision != read.based_on {
        return stale(read.based_on, read.revision);
    }
    if !read.staged.problems.is_empty() {
        return invalid(&read.staged.problems);
    }
    if read.staged.patch.is_empty() {
        let html =
            pages::plugin(&read.view, Some("Nothing to save: no field changed.")).into_string();
        return axum::Json(json!({"revision": read.revision, "changed": [], "html": html}))
            .into_response();
    }
    let patch = Value::Object(read.staged.patch);
    match live.runtime.configure_plugin(&name, patch, read.based_on).await {
        Ok(outcome) => {
            let saved =
                format!("Saved revision {}: {}.", outcome.revision, outcome.changed.join(", "));
            let view = plugin_view(live, &name).unwrap_or(read.view);
            let html = pages::plugin(&view, Some(&saved)).into_string();
            axum::Json(
                json!({"revision": outcome.revision, "changed": outcome.changed, "html": html}),
            )
            .into_response()
        }
        Err(e) => config_error(&name, e),
    }
}

// ---- routes ----

/// Every route of the runtime as the Routes page shows it now.
fn route_views(live: &Live) -> Vec<RouteView> {
    let runtime = &live.runtime;
    let now_ms = rein_runtime::clock::Clock::now_ms(&rein_runtime::clock::WallClock);
    live.routes
        .iter()
        .map(|name| {
            let health = runtime.route_health(name).and_then(|now| {
                Some(RouteHealth {
                    now,
                    settings: runtime.route_health_settings(name).ok()?,
                    history: runtime.route_health_history(name)?,
                    now_ms,
                })
            });
            RouteView { name: name.clone(), health }
        })
        .collect()
}

async fn routes_page(State(app): Shared) -> Response {
    let views = app.live.as_ref().map(route_views).unwrap_or_default();
    page(pages::routes(&app.context, &views))
}

async fn list_routes(State(app): Shared) -> Response {
    let Some(live) = &app.live else {
        return axum::Json(json!({"routes": [], "readOnly": true})).into_response();
    };
    let routes: Vec<Value> = route_views(live).iter().map(RouteView::to_json).collect();
    axum::Json(json!({"routes": routes, "readOnly": false})).into_response()
}

async fn route_events(State(app): Shared) -> Response {
    let Some(live) = &app.live else { return read_only_console() };
    let changes = Changes::feed_or_tick(live.feed.all());
    // The last update sent: a look that finds the routes as they were sends nothing.
    let follower = (Arc::clone(&app), None::<Value>);
    updates(Arc::clone(&app), changes, SESSION_GAP, follower, |(app, last)| async move {
        let Some(live) = &app.live else { return ((app, last), None) };
        let views = route_views(live);
        let routes: Vec<Value> = views.iter().map(RouteView::to_json).collect();
        let update = json!({"routes": routes, "html": pages::route_sections(&views).into_string()});
        if last.as_ref() == Some(&update) {
            return ((app, last), None);
        }
        ((app, Some(update.clone())), Some(update))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_settings_path_names_its_top_field() {
        let cases = [
            ("retryableCodes[2]", "retryableCodes"),
            ("extraRetries", "extraRetries"),
            ("a.b", "a"),
            ("", ""),
        ];
        for (path, want) in cases {
            assert_eq!(field_of(path), want, "{path}");
        }
    }
}
