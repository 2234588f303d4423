//! The CLI on a PostgreSQL store, against a throwaway cluster (`rein-testkit`): `rein stress
//! --store postgres --url URL` runs clean and its logs pass `rein check --finished --postgres
//! URL`; the password (in the URL or in `PGPASSWORD`) never appears in any output; a database
//! that cannot be reached is a clear error. Without PostgreSQL installed the tests say how to
//! install it and pass; with `CI=true` they fail.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use rein_testkit::PgCluster;
use rein_testkit::postgres::PASSWORD;
use serde_json::Value;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn rein(args: &[&str], pgpassword: Option<&str>) -> Run {
    // In the test's own directory, without the variables that would reach a real model.
    let mut command = rein_testkit::cli::command(Path::new("."), args, &[]);
    command.env_remove("PGPASSWORD").stdin(std::process::Stdio::null());
    if let Some(password) = pgpassword {
        command.env("PGPASSWORD", password);
    }
    let out = command.output().expect("rein runs");
    let run = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    };
    assert!(
        !run.stdout.contains(PASSWORD) && !run.stderr.contains(PASSWORD),
        "the password was printed: {}{}",
        run.stdout,
        run.stderr
    );
    run
}

#[test]
fn stress_on_postgres_runs_clean_and_its_logs_check_clean() {
    let Some(cluster) = PgCluster::start() else { return };
    let url = cluster.create_database("stress");
    let shown = format!("postgres://rein@127.0.0.1:{}/stress", cluster.port());
    let stress = |turns: &str, url: &str, env: Option<&str>| {
        let args =
            ["stress", "--agents", "12", "--turns", turns, "--store", "postgres", "--url", url];
        rein(
            &[&args[..], &["--durability", "disk", "--dispose-rate", "0.2", "--json"]].concat(),
            env,
        )
    };
    let run = stress("3", &url, None);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let summary: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(summary["ok"], true, "{summary:#}");
    assert_eq!(summary["store"], "postgres");
    assert_eq!(summary["logs"], shown.as_str(), "named without the password");
    assert_eq!(summary["tally"]["logs"], 12);

    // A second run, the password from PGPASSWORD, continues the sessions.
    let again = stress("1", &cluster.url_without_password("stress"), Some(PASSWORD));
    assert_eq!(again.code, 0, "{}{}", again.stdout, again.stderr);
    let summary: Value = serde_json::from_str(again.stdout.trim()).unwrap();
    let ended: u64 =
        summary["tally"]["turns"].as_object().unwrap().values().map(|n| n.as_u64().unwrap()).sum();
    assert_eq!(ended, 12 * 4, "the logs hold both runs' turns");

    // The invariant check of every log the runs left.
    let checked = rein(&["check", "--finished", "--postgres", &url], None);
    assert_eq!(checked.code, 0, "{}{}", checked.stdout, checked.stderr);
    assert!(checked.stdout.starts_with("ok: 12 logs, "), "{}", checked.stdout);
    let one = rein(&["check", "--finished", "--postgres", &url, "--session", "agent-00003"], None);
    assert_eq!(one.code, 0, "{}{}", one.stdout, one.stderr);
    assert!(one.stdout.starts_with("ok: 1 log, "), "{}", one.stdout);
    let unknown = rein(&["check", "--postgres", &url, "--session", "nobody"], None);
    assert_eq!(unknown.code, 2, "{}{}", unknown.stdout, unknown.stderr);
    assert!(
        unknown.stderr.contains(&format!("error: {shown}#nobody: cannot be read: no such session")),
        "{}",
        unknown.stderr
    );
}

#[test]
fn a_database_that_cannot_be_reached_is_a_clear_error_without_the_password() {
    let Some(cluster) = PgCluster::start() else { return };
    let url = cluster.create_database("gone");
    let port = cluster.port();
    let wrong = url.replace(PASSWORD, "not-the-password");
    let run = rein(&["stress", "--agents", "1", "--store", "postgres", "--url", &wrong], None);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("password authentication failed"), "{}", run.stderr);
    assert!(!run.stderr.contains("not-the-password"), "{}", run.stderr);
    drop(cluster);

    let run = rein(&["stress", "--agents", "1", "--store", "postgres", "--url", &url], None);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    let want = format!("error: --url: postgres: postgres://rein@127.0.0.1:{port}/gone: ");
    assert!(run.stderr.starts_with(&want), "{}", run.stderr);
    let checked = rein(&["check", "--postgres", &url], None);
    assert_eq!(checked.code, 2, "{}{}", checked.stdout, checked.stderr);
    assert!(
        checked.stderr.contains(&format!("postgres://rein@127.0.0.1:{port}/gone: cannot be read")),
        "{}",
        checked.stderr
    );

    for (args, want) in [
        (&["stress", "--store", "postgres"][..], "error: --store postgres needs --url URL"),
        (&["stress", "--url", "postgres://u@h/d"][..], "error: --url: only for the postgres store"),
        (
            &["check", "--session", "s", "x.jsonl"][..],
            "error: --session: only with --sqlite DB or --postgres URL",
        ),
    ] {
        let run = rein(args, None);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.starts_with(want), "{args:?}: {}", run.stderr);
    }
}

#[test]
fn demo_writes_its_log_to_postgres_as_a_new_session_that_checks_clean() {
    let Some(cluster) = PgCluster::start() else { return };
    let url = cluster.create_database("demo");
    let shown = format!("postgres://rein@127.0.0.1:{}/demo", cluster.port());
    let run = rein(&["demo", "--store", &url], None);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let line = run.stdout.lines().last().unwrap();
    let id = line
        .strip_prefix("session log: ")
        .and_then(|rest| {
            rest.strip_suffix(&format!(
                " in {shown} (check it: rein check --postgres {shown} --session {})",
                &rest[..17]
            ))
        })
        .unwrap_or_else(|| panic!("{line}"));
    assert!(id.starts_with("demo-") && id.len() == 17, "{id}");
    let checked = rein(&["check", "--finished", "--postgres", &url, "--session", id], None);
    assert_eq!(checked.code, 0, "{}{}", checked.stdout, checked.stderr);
    assert!(checked.stdout.starts_with("ok: 1 log, "), "{}", checked.stdout);
}

#[test]
fn chat_keeps_its_session_in_postgres_and_resumes_it() {
    let Some(cluster) = PgCluster::start() else { return };
    let url = cluster.create_database("chat");
    let shown = format!("postgres://rein@127.0.0.1:{}/chat", cluster.port());
    let first = rein(&["chat", "--seed", "1", "--store", &url, "--session", "s1", "hello"], None);
    assert_eq!(first.code, 0, "{}{}", first.stdout, first.stderr);
    assert!(
        first.stderr.contains(&format!("session s1 (new) · log {shown}#s1")),
        "{}",
        first.stderr
    );
    assert!(
        first.stderr.contains(&format!("continue it: rein chat --store {shown} --session s1")),
        "{}",
        first.stderr
    );
    let again = rein(
        &[
            "chat",
            "--seed",
            "1",
            "--store",
            &cluster.url_without_password("chat"),
            "--session",
            "s1",
            "again",
        ],
        Some(PASSWORD),
    );
    assert_eq!(again.code, 0, "{}{}", again.stdout, again.stderr);
    assert!(again.stderr.contains("session s1 (resumed, 1 turn)"), "{}", again.stderr);
    let checked = rein(&["check", "--finished", "--postgres", &url, "--session", "s1"], None);
    assert_eq!(checked.code, 0, "{}{}", checked.stdout, checked.stderr);
}
