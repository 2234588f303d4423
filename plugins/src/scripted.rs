//! `scripted`: the waterfall's test double — a plugin that answers a list, one answer per failure
//! it is offered, in order, as the scripted provider plays one script entry per attempt.
//!
//! A scenario needs a plugin whose answer it chooses, to put `llm-retry` in front of a known
//! downstream: a downstream that retries (always mode accepts it and writes nothing), one that
//! crashes (always mode falls back to its own retry), one that stops. Its configuration:
//!
//! ```json
//! {"name": "scripted", "answers": ["retry", "next", "stop", "crash"]}
//! ```
//!
//! - `name` (default `"scripted"`): the plugin's name in the chain, in `plugin/crashed` and in
//!   actions; another name lets a scenario register two.
//! - `answers` (default `[]`): `retry`, `next`, `stop` answer that verdict; `crash` panics inside
//!   the recovery (the host restarts the plugin, counts the answer as `Next` and appends
//!   `plugin/crashed`; more crashes than the restart intensity allows remove it from the chain). When the list is used up every later failure is answered `next`, so a
//!   scripted plugin never holds the chain for ever.
//!
//! Both keys are read strictly: an unknown key or answer is an error naming its path
//! (`answers[1]: unknown answer "retyr"; …`).
//!
//! It writes nothing to the log and never waits: a `retry` answer reruns the request at once,
//! without `llm/retry` — legal, as for compaction's retries (the invariants constrain `llm/retry`
//! events when there are some, not attempts without them).
//!
//! # Layout
//!
//! Pure core: [`Answer`], [`Answers`] (the list and its cursor) and [`ScriptedConfig`] (the
//! strict reading). Shell: [`ScriptedPlugin`], which takes the next answer when offered a failure
//! and performs it; [`factory`] builds it from a configuration value under [`NAME`].
//!
//! # Why a crash skips the panic hook
//!
//! `crash` unwinds with [`std::panic::resume_unwind`]: to the plugin host it is a panic like any
//! other (caught at the recovery's task boundary, restart, `Next`, `plugin/crashed` whose
//! `error` is `scripted crash (failure n)`), but the process's panic hook is not run, so a
//! scenario that scripts a crash does not print a panic message and a backtrace on stderr as if
//! something had gone wrong.
//!
//! # Why the answer is taken when `recover` is called
//!
//! Like the scripted provider's entry, the answer is consumed synchronously in
//! [`Plugin::recover`], before the recovery task runs; so "n-th failure offered ↔ n-th answer"
//! holds whatever the timing, and a `crash` has used its answer before it panics: the restarted
//! plugin (the same value, a new actor) goes on with the next one.

use std::sync::{Arc, Mutex, PoisonError};

use rein_runtime::BoxFuture;
use rein_runtime::plugin::{ConfigError, Plugin, Recovery, Verdict};
use rein_runtime::retry_policy::RetryPolicy;
use serde_json::{Map, Value};

/// The name the plugin is registered under (and its default name).
pub const NAME: &str = "scripted";

/// One scripted answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Answer {
    /// Answer [`Verdict::Retry`].
    Retry,
    /// Answer [`Verdict::Next`].
    Next,
    /// Answer [`Verdict::Stop`].
    Stop,
    /// Panic inside the recovery.
    Crash,
}

impl Answer {
    /// Every answer, in the order the vocabulary lists them.
    pub const ALL: [Answer; 4] = [Answer::Retry, Answer::Next, Answer::Stop, Answer::Crash];

    /// Its word in a configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Answer::Retry => "retry",
            Answer::Next => "next",
            Answer::Stop => "stop",
            Answer::Crash => "crash",
        }
    }

    /// The answer a word names.
    pub fn parse(word: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == word)
    }
}

/// The answer list and how much of it is used: one answer per failure, in order, then `Next`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Answers {
    list: Vec<Answer>,
    used: usize,
}

impl Answers {
    /// The list, none used.
    pub fn new(list: impl IntoIterator<Item = Answer>) -> Self {
        Self { list: list.into_iter().collect(), used: 0 }
    }

    /// The answer to the next failure: the next of the list, or `Next` once it is used up.
    pub fn take(&mut self) -> Answer {
        match self.list.get(self.used) {
            Some(answer) => {
                self.used += 1;
                *answer
            }
            None => Answer::Next,
        }
    }

    /// The answers not used yet.
    pub fn remaining(&self) -> &[Answer] {
        &self.list[self.used..]
    }
}

/// The configuration `{"name"?, "answers"?}`, read strictly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptedConfig {
    /// The plugin's name (default [`NAME`]).
    pub name: String,
    /// Its answers, in order (default none).
    pub answers: Vec<Answer>,
}

impl Default for ScriptedConfig {
    fn default() -> Self {
        Self { name: NAME.to_owned(), answers: Vec::new() }
    }
}

impl ScriptedConfig {
    /// The keys the configuration may hold.
    pub const KEYS: &'static [&'static str] = &["name", "answers"];

    /// Reads a configuration value; `null` is the default. Errors are
    /// [`ConfigError::Invalid`] with the path relative to the value (`answers[2]`; empty for the
    /// value itself).
    pub fn parse(value: &Value) -> Result<Self, ConfigError> {
        let mut config = Self::default();
        let fields: &Map<String, Value> = match value {
            Value::Null => return Ok(config),
            Value::Object(fields) => fields,
            other => return Err(invalid("", format!("must be an object, got {other}"))),
        };
        if let Some(key) = fields.keys().find(|k| !Self::KEYS.contains(&k.as_str())) {
            let expected = Self::KEYS.join(", ");
            return Err(invalid(key, format!("unknown key (expected one of: {expected})")));
        }
        if let Some(name) = fields.get("name") {
            match name.as_str() {
                Some(name) if !name.is_empty() => config.name = name.to_owned(),
                _ => {
                    return Err(invalid("name", format!("must be a non-empty string, got {name}")));
                }
            }
        }
        if let Some(answers) = fields.get("answers") {
            let Some(list) = answers.as_array() else {
                return Err(invalid(
                    "answers",
                    format!("must be a list of answers ({}), got {answers}", vocabulary()),
                ));
            };
            for (i, word) in list.iter().enumerate() {
                let answer = match word.as_str() {
                    Some(text) => Answer::parse(text).ok_or_else(|| {
                        invalid(
                            &format!("answers[{i}]"),
                            format!("unknown answer {text:?}; expected one of {}", vocabulary()),
                        )
                    })?,
                    None => {
                        return Err(invalid(
                            &format!("answers[{i}]"),
                            format!("must be one of {}, got {word}", vocabulary()),
                        ));
                    }
                };
                config.answers.push(answer);
            }
        }
        Ok(config)
    }
}

fn vocabulary() -> String {
    Answer::ALL.iter().map(|a| format!("{:?}", a.as_str())).collect::<Vec<_>>().join(", ")
}

fn invalid(path: &str, message: String) -> ConfigError {
    ConfigError::Invalid { path: path.to_owned(), message }
}

/// A failure the plugin was offered, and what it answered (for tests).
#[derive(Debug, Clone, PartialEq)]
pub struct Offer {
    /// The turn.
    pub turn: u32,
    /// The step.
    pub step: u32,
    /// The failed attempt.
    pub attempt: u32,
    /// The provider route.
    pub provider: String,
    /// The failure's code.
    pub code: String,
    /// The effective policy the payload carried (`None`: no adapter served the attempt).
    pub retry_policy: Option<RetryPolicy>,
    /// What it answered.
    pub answer: Answer,
}

/// The `scripted` plugin.
///
/// ```
/// use rein_plugins::scripted::{Answer, ScriptedPlugin};
///
/// let plugin = ScriptedPlugin::from_config(&serde_json::json!({"answers": ["retry", "crash"]}))?;
/// assert_eq!(plugin.remaining(), [Answer::Retry, Answer::Crash]);
/// # Ok::<(), rein_runtime::plugin::ConfigError>(())
/// ```
#[derive(Debug)]
pub struct ScriptedPlugin {
    name: String,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    answers: Answers,
    offers: Vec<Offer>,
}

impl ScriptedPlugin {
    /// A plugin named `name` answering `answers`, in order.
    pub fn new(name: impl Into<String>, answers: impl IntoIterator<Item = Answer>) -> Self {
        let state = State { answers: Answers::new(answers), offers: Vec::new() };
        Self { name: name.into(), state: Mutex::new(state) }
    }

    /// The plugin a configuration value describes ([`ScriptedConfig::parse`]).
    pub fn from_config(config: &Value) -> Result<Self, ConfigError> {
        let ScriptedConfig { name, answers } = ScriptedConfig::parse(config)?;
        Ok(Self::new(name, answers))
    }

    /// Every failure offered so far, in order, with the answer it got.
    pub fn offers(&self) -> Vec<Offer> {
        self.state().offers.clone()
    }

    /// The answers not used yet.
    pub fn remaining(&self) -> Vec<Answer> {
        self.state().answers.remaining().to_vec()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic never happens while the lock is held (crashes happen in the recovery task).
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Builds `scripted` from a configuration value, as a plugin registry entry (register it under
/// [`NAME`]).
pub fn factory(config: &Value) -> Result<Arc<dyn Plugin>, ConfigError> {
    Ok(Arc::new(ScriptedPlugin::from_config(config)?))
}

impl Plugin for ScriptedPlugin {
    fn name(&self) -> &str {
        &self.name
    }

    fn recover(self: Arc<Self>, recovery: Recovery) -> BoxFuture<'static, Verdict> {
        let p = &recovery.payload;
        let (answer, number) = {
            let mut state = self.state();
            let answer = state.answers.take();
            state.offers.push(Offer {
                turn: p.turn,
                step: p.step,
                attempt: p.attempt,
                provider: p.provider.clone(),
                code: p.failure.code().to_owned(),
                retry_policy: p.retry_policy.clone(),
                answer,
            });
            (answer, state.offers.len())
        };
        tracing::debug!(plugin = %self.name, answer = answer.as_str(), number, "scripted answer");
        Box::pin(async move {
            match answer {
                Answer::Retry => Verdict::Retry,
                Answer::Next => Verdict::Next,
                Answer::Stop => Verdict::Stop,
                // A panic that skips the panic hook: see the module docs.
                Answer::Crash => std::panic::resume_unwind(Box::new(format!(
                    "scripted crash (failure {number})"
                ))),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;

    use rein_runtime::clock::VirtualClock;
    use rein_runtime::failure::Failure;
    use rein_runtime::plugin::{Downstream, RequestErrorPayload};
    use rein_runtime::random::Samples;
    use rein_runtime::session_log::SessionLog;
    use rein_runtime::store::memory::MemoryStore;
    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    use super::*;

    /// The panic message of a future that panics (run on a task of its own, as the plugin host
    /// runs a recovery).
    async fn panic_of(future: impl Future<Output = Verdict> + Send + 'static) -> String {
        let Err(error) = tokio::spawn(future).await else { panic!("it did not panic") };
        let panic = error.into_panic();
        panic.downcast_ref::<String>().cloned().unwrap_or_default()
    }

    #[test]
    fn answers_come_in_order_then_next_for_ever() {
        let mut answers = Answers::new([Answer::Retry, Answer::Crash, Answer::Stop]);
        assert_eq!(answers.remaining(), [Answer::Retry, Answer::Crash, Answer::Stop]);
        let taken: Vec<Answer> = (0..5).map(|_| answers.take()).collect();
        assert_eq!(taken, [Answer::Retry, Answer::Crash, Answer::Stop, Answer::Next, Answer::Next]);
        assert!(answers.remaining().is_empty());
        assert_eq!(Answers::default().take(), Answer::Next, "no list: a transparent link");
    }

    #[test]
    fn every_answer_reads_back_from_its_word() {
        for answer in Answer::ALL {
            assert_eq!(Answer::parse(answer.as_str()), Some(answer));
        }
        assert_eq!(Answer::parse("Retry"), None, "words are lowercase, exactly");
    }

    #[test]
    fn configurations_are_read_strictly_naming_the_field() {
        let words = r#""retry", "next", "stop", "crash""#;
        let cases = [
            (json!(3), "", "must be an object, got 3".to_owned()),
            (json!([]), "", "must be an object, got []".to_owned()),
            (json!({"nmae": "x"}), "nmae", "unknown key (expected one of: name, answers)".into()),
            (json!({"name": ""}), "name", "must be a non-empty string, got \"\"".into()),
            (json!({"name": 7}), "name", "must be a non-empty string, got 7".into()),
            (
                json!({"answers": "retry"}),
                "answers",
                format!("must be a list of answers ({words}), got \"retry\""),
            ),
            (
                json!({"answers": ["retry", "retyr"]}),
                "answers[1]",
                format!("unknown answer \"retyr\"; expected one of {words}"),
            ),
            (
                json!({"answers": ["RETRY"]}),
                "answers[0]",
                format!("unknown answer \"RETRY\"; expected one of {words}"),
            ),
            (json!({"answers": [null]}), "answers[0]", format!("must be one of {words}, got null")),
        ];
        for (value, path, message) in cases {
            let expected = ConfigError::Invalid { path: path.into(), message };
            assert_eq!(ScriptedConfig::parse(&value), Err(expected), "{value}");
        }
    }

    #[test]
    fn valid_configurations_fill_the_defaults() {
        let cases = [
            (json!({}), ScriptedConfig::default()),
            (Value::Null, ScriptedConfig::default()),
            (
                json!({"answers": ["retry", "next", "stop", "crash"]}),
                ScriptedConfig { name: NAME.into(), answers: Answer::ALL.to_vec() },
            ),
            (
                json!({"name": "second", "answers": []}),
                ScriptedConfig { name: "second".into(), answers: vec![] },
            ),
        ];
        for (value, expected) in cases {
            assert_eq!(ScriptedConfig::parse(&value), Ok(expected), "{value}");
        }
        assert_eq!(factory(&json!({"name": "second"})).unwrap().name(), "second");
        assert_eq!(factory(&json!({})).unwrap().name(), NAME);
    }

    /// A recovery of a SERVER failure on attempt `attempt`, with the end of the chain downstream.
    fn recovery(log: &SessionLog, attempt: u32) -> Recovery {
        Recovery {
            payload: Arc::new(RequestErrorPayload {
                session: Arc::from("s"),
                turn: 1,
                step: 1,
                attempt,
                provider: "mock".into(),
                failure: Failure::new("SERVER", "down").unwrap(),
                retry_policy: None,
                health: Default::default(),
                cancel: CancellationToken::new(),
                log: log.clone(),
            }),
            downstream: Downstream::end(),
            disposed: CancellationToken::new(),
            jitter: Arc::new(Samples::new([], 0).unwrap()),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn it_answers_one_failure_at_a_time_and_writes_nothing() {
        let store = MemoryStore::new();
        let clock = Arc::new(VirtualClock::start());
        let (log, _) = SessionLog::open(Arc::new(store.clone()), clock, "s").await.unwrap();
        let written = store.events("s").len();
        let plugin =
            Arc::new(ScriptedPlugin::new("double", [Answer::Stop, Answer::Crash, Answer::Retry]));

        let first = Arc::clone(&plugin).recover(recovery(&log, 1));
        // The answer is taken when offered, before the recovery runs.
        assert_eq!(plugin.remaining(), [Answer::Crash, Answer::Retry]);
        assert_eq!(first.await, Verdict::Stop);

        let crash = Arc::clone(&plugin).recover(recovery(&log, 2));
        assert_eq!(panic_of(crash).await, "scripted crash (failure 2)");

        assert_eq!(Arc::clone(&plugin).recover(recovery(&log, 3)).await, Verdict::Retry);
        assert_eq!(Arc::clone(&plugin).recover(recovery(&log, 4)).await, Verdict::Next);

        let answered: Vec<(u32, Answer)> =
            plugin.offers().iter().map(|o| (o.attempt, o.answer)).collect();
        assert_eq!(
            answered,
            [(1, Answer::Stop), (2, Answer::Crash), (3, Answer::Retry), (4, Answer::Next)]
        );
        let offer = &plugin.offers()[0];
        assert_eq!((offer.code.as_str(), offer.provider.as_str()), ("SERVER", "mock"));
        assert_eq!(store.events("s").len(), written, "it never writes to the log");
    }
}
