//! Write your own plugin: `session-budget` caps the retries a session may spend across all its
//! turns, sits in front of the default chain, and has settings changed at run time.
//!
//! Run: `cargo run --release --example custom_plugin`
//!
//! `llm-retry`'s budget is per retry chain (a step's attempts on one route): a session whose
//! provider keeps failing gets that budget afresh on every turn. `session-budget`, written here,
//! adds a budget for the whole session: it counts the session's `llm/retry` events (whoever
//! scheduled them) with a projection of its own over the session log — so the count survives
//! hibernation and restarts, because it is read from the log and not kept in memory — and once
//! the session has spent `maxRetriesPerSession` retries it answers [`Verdict::Stop`] to the next
//! failure: the turn ends with it and nobody downstream retries. Below the cap it answers
//! [`Verdict::Next`] and the default chain decides as usual.
//!
//! Its setting is changed at run time like the shipped plugins': read with its revision
//! (`Runtime::plugin_settings`), a bad patch checked and refused with the field named
//! (`Runtime::check_plugin_settings`), a good one applied (`Runtime::configure_plugin`, which
//! writes `config/changed` to the session log), and a second patch based on the old revision
//! refused (of two settings pages saving at once, exactly one wins).
//!
//! The provider plays a script: turn 1 fails twice (two retries, recovered), turn 2 fails twice
//! (`llm-retry` would retry both; the budget of 3 lets one through and stops the other), then
//! the cap is raised to 5 and a manual retry of turn 2 recovers. It prints:
//!
//! ```text
//! chain: session-budget → llm-retry → compaction → auto-retry
//! session-budget settings, revision 0: {"maxRetriesPerSession":3}
//! > Hello?
//!   attempt 1 failed with SERVER → llm-retry retries (1/2) in 104 ms
//!   attempt 2 failed with SERVER → llm-retry retries (2/2) in 196 ms
//! turn 1 completed: Hello! (the session spent 2 of 3 retries)
//! > Still there?
//!   attempt 1 failed with SERVER → llm-retry retries (1/2) in 97 ms
//!   attempt 2 failed with SERVER
//! turn 2 failed with SERVER: session-budget stopped it (the session spent 3 of 3 retries)
//! check {"maxRetriesPerSession":-1}: refused: maxRetriesPerSession: must be an integer within 0..=100, got -1
//! configure {"maxRetriesPerSession":5} at revision 0: now revision 1, changed maxRetriesPerSession
//! configure {"maxRetriesPerSession":9} at revision 0: refused: stale revision: the patch is based on revision 0, the settings are at 1
//! > (retry of the last turn)
//!   attempt 1 failed with SERVER → llm-retry retries (1/2) in 102 ms
//! turn 3 completed: Yes, still here. (the session spent 4 of 5 retries)
//!
//! custom-plugin: session custom-plugin · 3 turns, 3 retried or failed
//! ▸ turn 1 · Retried 2 times this turn · recovered
//! ▸ turn 2 · Retried 1 time this turn · finally failed with SERVER
//! ▸ turn 3 · Retried 1 time this turn · recovered
//! invariants: every rule holds
//! after shutdown: 0 actors, 0 tasks
//! ```

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{bail, ensure};
use rein::invariant::check_finished_log;
use rein::plugin::prelude::*;
use rein::plugins::settings::{FieldError, Patchable, Patched, Revisioned, patch};
use rein::prelude::*;
use rein::runtime::plural::count;
use rein::runtime::projection::Projection;
use rein::runtime::session::Answer;
use rein::runtime::session_log::{LogError, SessionLog};
use rein_scenario::scripted::{Scripted, ScriptedProvider};
use serde::Serialize;
use serde_json::{Value, json};

/// The plugin's name in the chain.
const NAME: &str = "session-budget";
/// Its one setting.
const MAX_RETRIES: &str = "maxRetriesPerSession";

/// `session-budget`'s settings: valid by construction (a patch is read strictly). They are shown
/// with the keys a patch uses.
#[derive(Debug, Clone, PartialEq, Serialize)]
struct BudgetSettings {
    #[serde(rename = "maxRetriesPerSession")]
    max_retries: u32,
}

impl Patchable for BudgetSettings {
    fn patched(&self, patch: &Value) -> Result<Patched<Self>, FieldError> {
        let mut settings = self.clone();
        let mut changed = Vec::new();
        for (key, value) in patch::fields(patch, &[MAX_RETRIES])? {
            if key == MAX_RETRIES {
                settings.max_retries = patch::integer(value, MAX_RETRIES, 0..=100)?;
                if settings.max_retries != self.max_retries {
                    changed.push(MAX_RETRIES);
                }
            }
        }
        Ok(Patched { settings, changed })
    }
}

/// The retries a session has spent: its `llm/retry` events, over all its turns.
struct RetriesSpent;

impl RetriesSpent {
    const KEY: &'static str = "session-budget/retries-spent";
}

impl Projection for RetriesSpent {
    type State = u32;

    fn key(&self) -> &'static str {
        Self::KEY
    }

    fn fold(&self, spent: &mut u32, event: &Envelope) {
        if let Event::LlmRetry(_) = &event.event {
            *spent += 1;
        }
    }
}

/// The retries `log`'s session has spent. The projection is registered the first time a
/// recovery of the awake session asks (registering folds the log so far).
async fn retries_spent(log: &SessionLog) -> Result<u32, LogError> {
    match log.read::<RetriesSpent>(RetriesSpent::KEY).await {
        Err(LogError::UnknownProjection(_)) => {
            match log.register(RetriesSpent).await {
                // Another recovery of the session registered it first: as good.
                Ok(()) | Err(LogError::DuplicateProjection(_)) => {}
                Err(error) => return Err(error),
            }
            log.read::<RetriesSpent>(RetriesSpent::KEY).await
        }
        read => read,
    }
}

/// `session-budget`: stops every failure of a session that spent its retries.
struct SessionBudget {
    settings: Revisioned<BudgetSettings>,
    /// The failures it stopped (for the example to show).
    stopped: AtomicU64,
}

impl SessionBudget {
    fn new(max_retries: u32) -> Self {
        Self {
            settings: Revisioned::new(BudgetSettings { max_retries }),
            stopped: AtomicU64::new(0),
        }
    }
}

impl Plugin for SessionBudget {
    fn name(&self) -> &str {
        NAME
    }

    fn recover(self: Arc<Self>, recovery: Recovery) -> BoxFuture<'static, Verdict> {
        Box::pin(async move {
            let cap = self.settings.settings().max_retries;
            match retries_spent(&recovery.payload.log).await {
                Ok(spent) if spent >= cap => {
                    self.stopped.fetch_add(1, Ordering::SeqCst);
                    Verdict::Stop
                }
                Ok(_) => Verdict::Next,
                // The session's log is closing: nothing to count, let the chain decide.
                Err(_) => Verdict::Next,
            }
        })
    }

    /// Shown, staged, committed and restored by `Revisioned`, once for every settings type.
    fn settings(&self) -> Option<&dyn Settings> {
        Some(&self.settings)
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    run(Arc::new(WallClock), &mut anstream::stdout()).await
}

/// Runs the demo; its log's timestamps come from `clock` (the tests run on paused time with a
/// virtual clock).
async fn run(clock: Arc<dyn Clock>, out: &mut impl Write) -> anyhow::Result<()> {
    let server_error = || {
        Scripted::fail(
            Failure::new("SERVER", "busy").and_then(|f| f.with_status(503)).expect("valid"),
        )
    };
    let model = ScriptedProvider::new(
        [
            [server_error(), server_error(), Scripted::reply("Hello!")].as_slice(), // turn 1
            &[server_error(), server_error()],                                      // turn 2
            &[server_error(), Scripted::reply("Yes, still here.")],                 // its retry
        ]
        .concat(),
    );
    let budget = Arc::new(SessionBudget::new(3));
    let llm_retry = LlmRetry::from_config(&json!({"initialDelayMs": 100, "maxDelayMs": 1000}))?;
    let runtime = Runtime::builder()
        .clock(clock)
        .route(Route::new("scripted", Arc::new(model)).model("scripted-1"))
        .plugin(budget.clone())
        .plugin(llm_retry) // its policy: the routes' default
        .plugin(Compaction::default())
        .plugin(AutoRetry::default())
        .build()
        .await?;
    writeln!(out, "chain: {}", runtime.plugins().join(" → "))?;
    let settings = runtime.plugin_settings(NAME)?;
    writeln!(out, "{NAME} settings, revision {}: {}", settings.revision, settings.settings)?;

    let session = runtime.session("custom-plugin").await?;
    let cap =
        |runtime: &Runtime| runtime.plugin_settings(NAME).map(|s| s.settings[MAX_RETRIES].clone());

    // Turn 1: two failures, two retries, recovered.
    writeln!(out, "> Hello?")?;
    let (outcome, answer) = play(session.prompt("Hello?")?, out).await?;
    let spent = spent_in(&session).await?;
    writeln!(
        out,
        "turn {} {}: {answer} (the session spent {spent} of {} retries)",
        outcome.turn,
        ending(&outcome.reason),
        cap(&runtime)?
    )?;

    // Turn 2: llm-retry would retry both failures; the session has one retry left.
    writeln!(out, "> Still there?")?;
    let stopped_before = budget.stopped.load(Ordering::SeqCst);
    let (outcome, _) = play(session.prompt("Still there?")?, out).await?;
    let stopped = budget.stopped.load(Ordering::SeqCst) - stopped_before;
    let spent = spent_in(&session).await?;
    let by = if stopped > 0 { format!(": {NAME} stopped it") } else { String::new() };
    writeln!(
        out,
        "turn {} {}{by} (the session spent {spent} of {} retries)",
        outcome.turn,
        ending(&outcome.reason),
        cap(&runtime)?
    )?;

    // The operator raises the cap, as a settings page would.
    let revision = runtime.plugin_settings(NAME)?.revision;
    let bad = json!({MAX_RETRIES: -1});
    match runtime.check_plugin_settings(NAME, &bad, revision) {
        Ok(changed) => bail!("a negative cap was accepted (would change {changed:?})"),
        Err(error) => writeln!(out, "check {bad}: refused: {error}")?,
    }
    let raise = json!({MAX_RETRIES: 5});
    let applied = runtime.configure_plugin(NAME, raise.clone(), revision).await?;
    writeln!(
        out,
        "configure {raise} at revision {revision}: now revision {}, changed {}",
        applied.revision,
        applied.changed.join(", ")
    )?;
    let late = json!({MAX_RETRIES: 9});
    match runtime.configure_plugin(NAME, late.clone(), revision).await {
        Ok(_) => bail!("a patch based on an old revision was accepted"),
        Err(error) => writeln!(out, "configure {late} at revision {revision}: refused: {error}")?,
    }

    // A manual retry of turn 2 now has two retries to spend.
    writeln!(out, "> (retry of the last turn)")?;
    let (outcome, answer) = play(session.retry().await?, out).await?;
    let spent = spent_in(&session).await?;
    writeln!(
        out,
        "turn {} {}: {answer} (the session spent {spent} of {} retries)",
        outcome.turn,
        ending(&outcome.reason),
        cap(&runtime)?
    )?;

    let events = session.events().await?;
    writeln!(out)?;
    write!(out, "{}", rein::show::render("custom-plugin", &events, false))?;
    let violations = check_finished_log(&events);
    for violation in &violations {
        writeln!(out, "  violation: {violation}")?;
    }
    match violations.len() {
        0 => writeln!(out, "invariants: every rule holds")?,
        n => writeln!(out, "invariants: {}", count(n, "violation", "violations"))?,
    }
    runtime.shutdown().await;
    let (actors, tasks) = (runtime.census().actors(), runtime.census().tasks());
    writeln!(out, "after shutdown: {actors} actors, {tasks} tasks")?;
    ensure!(outcome.reason == TurnEndReason::Completed, "the retried turn did not complete");
    ensure!(violations.is_empty() && actors == 0 && tasks == 0, "the run broke a guarantee");
    Ok(())
}

/// Prints a turn's failures and retries as they happen, a line per failed attempt; returns the
/// turn's outcome and its answer.
async fn play(mut turn: TurnHandle, out: &mut impl Write) -> anyhow::Result<(TurnOutcome, String)> {
    let (mut answer, mut line) = (Answer::new(), String::new());
    while let Some(event) = turn.next_event().await {
        answer.on(&event.event);
        match &event.event {
            Event::RequestError(error) => {
                line = format!("  attempt {} failed with {}", error.attempt, error.failure.code());
            }
            Event::LlmRetry(retry) => {
                let budget = retry.max_retries.map(|m| format!("/{m}")).unwrap_or_default();
                line += &format!(
                    " → {} retries ({}{budget}) in {:.0} ms",
                    retry.plugin, retry.retry, retry.delay_ms
                );
            }
            _ => {}
        }
        if matches!(&event.event, Event::LlmRetryStarted(_) | Event::TurnEnd(_)) && !line.is_empty()
        {
            writeln!(out, "{line}")?;
            line.clear();
        }
    }
    Ok((turn.await?, answer.text().to_owned()))
}

/// The retries the session has spent, as `session-budget` counts them (from its log).
async fn spent_in(session: &Session) -> anyhow::Result<u32> {
    let events = session.events().await?;
    let mut spent = 0;
    for event in &events {
        RetriesSpent.fold(&mut spent, event);
    }
    Ok(spent)
}

/// How a turn ended, in a few words.
fn ending(reason: &TurnEndReason) -> String {
    match reason {
        TurnEndReason::Completed => "completed".into(),
        TurnEndReason::Error { failure } => format!("failed with {}", failure.code()),
        other => format!("ended {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_budget_stops_a_turn_llm_retry_would_retry_and_a_raised_cap_lets_the_retry_recover()
    {
        let mut out = Vec::new();
        let ran = run(Arc::new(VirtualClock::start()), &mut out).await;
        let out = anstream::adapter::strip_str(&String::from_utf8(out).unwrap()).to_string();
        ran.unwrap_or_else(|e| panic!("{e}\n{out}"));
        let want = [
            "chain: session-budget → llm-retry → compaction → auto-retry",
            r#"session-budget settings, revision 0: {"maxRetriesPerSession":3}"#,
            "> Hello?",
        ];
        assert_eq!(out.lines().take(3).collect::<Vec<_>>(), want, "{out}");
        let retried: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with("  attempt "))
            .map(|l| l.split(" in ").next().unwrap())
            .collect();
        assert_eq!(
            retried,
            [
                "  attempt 1 failed with SERVER → llm-retry retries (1/2)",
                "  attempt 2 failed with SERVER → llm-retry retries (2/2)",
                "  attempt 1 failed with SERVER → llm-retry retries (1/2)",
                "  attempt 2 failed with SERVER",
                "  attempt 1 failed with SERVER → llm-retry retries (1/2)",
            ],
            "{out}"
        );
        assert!(
            out.contains("turn 1 completed: Hello! (the session spent 2 of 3 retries)"),
            "{out}"
        );
        assert!(out.contains("\n  attempt 2 failed with SERVER\nturn 2 failed with SERVER: session-budget stopped it (the session spent 3 of 3 retries)\n"), "{out}");
        assert!(out.contains(r#"check {"maxRetriesPerSession":-1}: refused: maxRetriesPerSession: must be an integer within 0..=100, got -1"#), "{out}");
        assert!(out.contains(r#"configure {"maxRetriesPerSession":5} at revision 0: now revision 1, changed maxRetriesPerSession"#), "{out}");
        assert!(
            out.contains(
                r#"configure {"maxRetriesPerSession":9} at revision 0: refused: stale revision"#
            ),
            "{out}"
        );
        assert!(
            out.contains("turn 3 completed: Yes, still here. (the session spent 4 of 5 retries)"),
            "{out}"
        );
        assert!(
            out.contains("▸ turn 2 · Retried 1 time this turn · finally failed with SERVER"),
            "{out}"
        );
        assert!(
            out.ends_with("invariants: every rule holds\nafter shutdown: 0 actors, 0 tasks\n"),
            "{out}"
        );
    }

    #[test]
    fn a_patch_is_read_strictly_and_names_the_field() {
        let settings = BudgetSettings { max_retries: 3 };
        let cases = [
            (json!({MAX_RETRIES: 5}), Ok(vec![MAX_RETRIES])),
            (json!({MAX_RETRIES: 3}), Ok(vec![])),
            (
                json!({MAX_RETRIES: 101}),
                Err("maxRetriesPerSession: must be an integer within 0..=100, got 101"),
            ),
            (
                json!({MAX_RETRIES: "5"}),
                Err("maxRetriesPerSession: must be an integer within 0..=100, got \"5\""),
            ),
            (
                json!({"maxRetries": 5}),
                Err("maxRetries: unknown key (expected one of: maxRetriesPerSession)"),
            ),
        ];
        for (patch, want) in cases {
            let got = settings.patched(&patch).map(|p| p.changed).map_err(|e| e.to_string());
            assert_eq!(got, want.map_err(str::to_owned), "{patch}");
        }
    }
}
