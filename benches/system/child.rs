//! Runs of the bench in a process of their own: `system --child KIND AGENTS TURNS` runs one
//! side of the stress or the realistic workload ([`Kind`]) and prints its [`Run`] as one JSON
//! line on stdout.
//!
//! # Why a process of its own
//!
//! Peak RSS (`VmHWM`) is the process's high-water mark since it started: in the bench's own
//! process it would be the peak of whatever metric ran before (100,000 parked turns), and the
//! heap those metrics freed would be reused without raising it. A fresh process reads the peak
//! of one run and nothing else, and gives rein and its floor the same clean start.

use std::process::{Command, ExitCode};

use serde::{Deserialize, Serialize};

/// Which side of the stress workload a child runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `rein_cli::stress::run` on a memory store.
    Rein,
    /// The hand-rolled tokio + backon loop (`hand_rolled_stress`).
    HandRolled,
    /// The stress workload through bare actors of rein's shape (`bare_stress`).
    StressBare,
    /// The realistic streaming load through rein (`realistic`).
    RealisticRein,
    /// The same load as a hand-rolled tokio loop (`realistic`).
    RealisticHandRolled,
    /// The same load through bare actors of rein's shape (`bare_stress`).
    RealisticBare,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Rein => "stress-rein",
            Kind::HandRolled => "stress-hand-rolled",
            Kind::StressBare => "stress-bare",
            Kind::RealisticRein => "realistic-rein",
            Kind::RealisticHandRolled => "realistic-hand-rolled",
            Kind::RealisticBare => "realistic-bare",
        }
    }

    fn parse(word: &str) -> Option<Self> {
        [
            Kind::Rein,
            Kind::HandRolled,
            Kind::StressBare,
            Kind::RealisticRein,
            Kind::RealisticHandRolled,
            Kind::RealisticBare,
        ]
        .into_iter()
        .find(|kind| kind.word() == word)
    }
}

/// What one run measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Run {
    /// Turns that ended.
    pub(crate) turns: u64,
    /// Turns by how they ended (`completed`, `error`, `aborted`, ...).
    pub(crate) ends: std::collections::BTreeMap<String, u64>,
    /// Events in the logs.
    pub(crate) events: u64,
    /// From the first agent's start to the last turn's end, in seconds.
    pub(crate) elapsed_s: f64,
    /// CPU time of the process over the same stretch, in seconds.
    pub(crate) cpu_s: f64,
    /// Cancellations measured (landed and ended the turn aborted), and their latency from the
    /// cancel to the turn's end being in the log, in ms.
    pub(crate) cancels: u64,
    pub(crate) cancel_p50_ms: f64,
    pub(crate) cancel_p99_ms: f64,
    /// Allocations over the same stretch (0: not counted).
    #[serde(default)]
    pub(crate) allocations: u64,
    /// Resident set size before the agents started, and its peak during the run, in KiB.
    pub(crate) rss_before_kib: u64,
    pub(crate) peak_rss_kib: u64,
    /// Why the run failed its own checks (empty: it did not).
    pub(crate) failures: Vec<String>,
}

impl Run {
    /// Turns per second.
    pub(crate) fn turns_per_s(&self) -> f64 {
        self.turns as f64 / self.elapsed_s
    }

    /// CPU time per ended turn, in µs.
    pub(crate) fn cpu_per_turn_us(&self) -> f64 {
        self.cpu_s * 1e6 / self.turns as f64
    }

    /// Peak RSS above the start, per agent, in KiB.
    pub(crate) fn rss_per_agent_kib(&self, agents: usize) -> f64 {
        self.peak_rss_kib.saturating_sub(self.rss_before_kib) as f64 / agents as f64
    }
}

/// The child's arguments, when this process is one (`--child KIND AGENTS TURNS`).
pub(crate) fn parse(args: &[String]) -> Option<(Kind, usize, u32)> {
    let at = args.iter().position(|a| a == "--child")?;
    let kind = Kind::parse(args.get(at + 1)?)?;
    let agents = args.get(at + 2)?.parse().ok()?;
    let turns = args.get(at + 3)?.parse().ok()?;
    Some((kind, agents, turns))
}

/// Runs `kind` with `agents` agents of `turns` turns in a child process; what it measured.
pub(crate) fn spawn(kind: Kind, agents: usize, turns: u32) -> anyhow::Result<Run> {
    use anyhow::Context as _;
    let exe = std::env::current_exe().context("the bench's own executable")?;
    let output = Command::new(exe)
        .args(["--child", kind.word(), &agents.to_string(), &turns.to_string()])
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("running a child")?;
    anyhow::ensure!(output.status.success(), "the {} child failed: {}", kind.word(), output.status);
    let line = String::from_utf8_lossy(&output.stdout);
    let run: Run = serde_json::from_str(line.trim()).context("the child's report")?;
    anyhow::ensure!(run.failures.is_empty(), "the {} run failed: {:?}", kind.word(), run.failures);
    Ok(run)
}

/// Runs the child of `kind` (`--child KIND AGENTS TURNS`).
pub(crate) fn run(kind: Kind, agents: usize, turns: u32) -> ExitCode {
    match kind {
        Kind::Rein | Kind::HandRolled | Kind::StressBare => {
            crate::stress::child(kind, agents, turns)
        }
        Kind::RealisticRein | Kind::RealisticHandRolled | Kind::RealisticBare => {
            crate::realistic::child(kind, agents, turns)
        }
    }
}

/// Prints what a child measured as one JSON line (its exit status says whether it did).
pub(crate) fn print(measured: anyhow::Result<Run>) -> ExitCode {
    match measured.and_then(|run| Ok(serde_json::to_string(&run)?)) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("child: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// The process's resident set size now and its peak so far, in KiB (`VmRSS`, `VmHWM`).
pub(crate) fn rss_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}
