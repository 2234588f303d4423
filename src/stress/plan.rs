//! What a stress run does, decided from its seed: pure functions of the flags and a seeded RNG.
//!
//! - [`Rates`]: the per-turn probabilities of the flags, checked.
//! - [`turn`], [`cancel_window`]: one agent's turn — whether it is cancelled and when, whether it sets off a
//!   plugin disposal or a settings change.
//! - [`fault_model`]: how `--fault-rate` splits over the simulated provider's fault kinds.
//! - [`patch`]: a run-time settings patch for a plugin, valid for the plugins whose settings are
//!   known (`auto-retry`, `compaction`), empty for any other.
//! - [`crashes`]: whether the `flaky` plugin panics on a failure, a function of the seed and
//!   the attempt (so a replay crashes on the same attempts, whatever the scheduling).
//! - [`think`]: how long an agent thinks before a turn (`--think-ms`), a function of the seed,
//!   the agent and the turn.
//! - [`agent_rng`], [`chaos_rng`]: the RNGs, one per agent and one for the plugin chaos, all
//!   derived from the seed, so an agent's choices do not depend on how the others are scheduled.

use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};

/// The RNG of the run's random choices.
pub type StressRng = ChaCha8Rng;

/// The ChaCha8 stream an agent's choices are drawn from (stream 0 is the chaos controller's).
pub fn agent_rng(seed: u64, agent: usize) -> StressRng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(agent as u64 + 1);
    rng
}

/// The RNG of the plugin chaos (disposals, registrations, settings changes).
pub fn chaos_rng(seed: u64) -> StressRng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(0);
    rng
}

/// The per-turn probabilities given on the command line.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rates {
    /// A turn is cancelled (`session.cancel`).
    pub cancel: f64,
    /// A turn sets off the disposal of a plugin (brought back later).
    pub dispose: f64,
    /// A turn sets off a run-time settings change.
    pub config: f64,
    /// A provider attempt fails.
    pub fault: f64,
    /// A plugin recovery of the `flaky` plugin panics.
    pub crash: f64,
    /// A turn's answer calls the `pause` tool (the simulated provider's tool-call rate).
    pub tool: f64,
}

impl Rates {
    /// Checks every rate is a probability; the error names the flag.
    pub fn check(&self) -> Result<(), String> {
        let rates = [
            ("--cancel-rate", self.cancel),
            ("--dispose-rate", self.dispose),
            ("--config-rate", self.config),
            ("--fault-rate", self.fault),
            ("--crash-rate", self.crash),
            ("--tool-rate", self.tool),
        ];
        for (flag, rate) in rates {
            if !(0.0..=1.0).contains(&rate) {
                return Err(format!("{flag}: must be within [0, 1], got {rate}"));
            }
        }
        Ok(())
    }
}

/// What one turn of an agent does besides its prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnPlan {
    /// Cancel the turn this long after its prompt was sent.
    pub cancel_after: Option<Duration>,
    /// Ask for a plugin to be disposed (and registered again later).
    pub dispose: bool,
    /// Ask for a settings change.
    pub configure: bool,
}

/// The window a cancellation lands in, from the prompt: two first-word latencies and four
/// backoffs (before the first word, mid-stream, or during a retry's wait), at least 1 ms.
pub fn cancel_window(latency: Duration, backoff: Duration) -> Duration {
    (latency * 2 + backoff * 4).max(Duration::from_millis(1))
}

/// Draws one turn's plan. A cancellation lands uniformly within `cancel_window` of the prompt:
/// before the first word, mid-stream, or during a retry's wait. Always draws the same number of
/// samples, so one agent's later turns do not depend on what an earlier one drew.
pub fn turn(rng: &mut impl Rng, rates: &Rates, cancel_window: Duration) -> TurnPlan {
    let cancel = rng.random::<f64>() < rates.cancel;
    let at = rng.random::<f64>();
    let dispose = rng.random::<f64>() < rates.dispose;
    let configure = rng.random::<f64>() < rates.config;
    TurnPlan { cancel_after: cancel.then(|| cancel_window.mul_f64(at)), dispose, configure }
}

/// The simulated provider's rates for a total fault rate: 40 % rate limits, 30 % server errors,
/// 20 % dropped connections, 10 % stalls.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultModel {
    /// 429s with a `Retry-After`.
    pub rate_limit: f64,
    /// 5xx.
    pub server_error: f64,
    /// Connections dropped mid-answer.
    pub drop: f64,
    /// Streams that stall until the watchdog ends them.
    pub stall: f64,
}

/// Splits `fault_rate` over the fault kinds.
pub fn fault_model(fault_rate: f64) -> FaultModel {
    FaultModel {
        rate_limit: fault_rate * 0.4,
        server_error: fault_rate * 0.3,
        drop: fault_rate * 0.2,
        stall: fault_rate * 0.1,
    }
}

/// Whether the `flaky` plugin crashes on the failure of (`session`, `turn`, `step`, `attempt`):
/// a draw keyed by the seed and the attempt (FNV-1a into ChaCha8), below `rate`.
pub fn crashes(seed: u64, session: &str, turn: u32, step: u32, attempt: u32, rate: f64) -> bool {
    let key = fnv1a(
        seed,
        &[
            session.as_bytes(),
            &[0xff],
            &turn.to_le_bytes(),
            &step.to_le_bytes(),
            &attempt.to_le_bytes(),
        ],
    );
    ChaCha8Rng::seed_from_u64(key).random::<f64>() < rate
}

/// How long agent `agent` thinks before its turn `turn` (`--think-ms`, the mean `think_ms`): a
/// time drawn within `[think_ms / 2, 3 × think_ms / 2]`, keyed by the seed, the agent and the
/// turn (its own draw: the turn plans and the other draws stay what they are without it), so
/// the agents' turns spread out instead of coming in waves. Zero when `think_ms` is.
pub fn think(seed: u64, agent: usize, turn: u32, think_ms: u64) -> Duration {
    if think_ms == 0 {
        return Duration::ZERO;
    }
    let key = fnv1a(seed ^ THINK_KEY, &[&(agent as u64).to_le_bytes(), &turn.to_le_bytes()]);
    let ms = think_ms as f64 * (0.5 + ChaCha8Rng::seed_from_u64(key).random::<f64>());
    Duration::from_secs_f64(ms / 1000.0)
}

/// Mixed into the seed of [`think`]'s draws.
const THINK_KEY: u64 = 0x7417_7417_7417_7417;

/// FNV-1a over `parts`, from a basis mixed with `seed`.
fn fnv1a(seed: u64, parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for b in parts.iter().flat_map(|part| part.iter()) {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// A run-time settings patch for the plugin named `plugin`: one field, a valid value, for the
/// plugins whose settings are known; `{}` for any other (an empty patch that a plugin with
/// run-time settings accepts, bumping its revision). Delays stay near `backoff_ms` so a run
/// keeps its pace.
pub fn patch(plugin: &str, backoff_ms: u64, rng: &mut impl Rng) -> Value {
    match plugin {
        "auto-retry" => match rng.random_range(0..6) {
            0 => json!({"enabled": rng.random_bool(0.5)}),
            1 => json!({"extraRetries": rng.random_range(0..=4)}),
            2 => json!({"initialDelayMs": rng.random_range(backoff_ms..=backoff_ms * 4)}),
            3 => json!({"maxDelayMs": rng.random_range(backoff_ms * 4..=backoff_ms * 20)}),
            4 => json!({"jitterRatio": f64::from(rng.random_range(0..=10u8)) / 10.0}),
            _ => {
                let all = ["RATE_LIMIT", "SERVER", "TIMEOUT", "TRANSPORT", "EMPTY_RESPONSE"];
                let keep = rng.random_range(1..=all.len());
                json!({"retryableCodes": all[..keep]})
            }
        },
        "compaction" => match rng.random_range(0..2) {
            0 => json!({"maxOverflowRetries": rng.random_range(0..=2)}),
            _ => json!({"keepRecentMessages": rng.random_range(1..=10)}),
        },
        _ => json!({}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rates(cancel: f64, dispose: f64, config: f64) -> Rates {
        Rates { cancel, dispose, config, fault: 0.0, crash: 0.0, tool: 0.0 }
    }

    #[test]
    fn rates_must_be_probabilities() {
        let ok =
            Rates { cancel: 0.0, dispose: 1.0, config: 0.5, fault: 0.2, crash: 0.0, tool: 0.5 };
        let cases = [
            (ok, None),
            (Rates { cancel: 1.5, ..ok }, Some("--cancel-rate: must be within [0, 1], got 1.5")),
            (Rates { dispose: -0.1, ..ok }, Some("--dispose-rate: must be within")),
            (Rates { config: f64::NAN, ..ok }, Some("--config-rate: must be within")),
            (Rates { fault: 2.0, ..ok }, Some("--fault-rate: must be within")),
            (Rates { crash: -1.0, ..ok }, Some("--crash-rate: must be within")),
        ];
        for (rates, want) in cases {
            match (rates.check(), want) {
                (Ok(()), None) => {}
                (Err(e), Some(want)) => assert!(e.starts_with(want), "{e}"),
                (got, want) => panic!("{rates:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn a_turn_plan_follows_its_rates() {
        let window = Duration::from_millis(100);
        // (rates, cancelled, disposes, configures) over 1,000 turns.
        let cases = [
            (rates(0.0, 0.0, 0.0), 0, 0, 0),
            (rates(1.0, 1.0, 1.0), 1000, 1000, 1000),
            (rates(1.0, 0.0, 0.0), 1000, 0, 0),
        ];
        for (rates, cancelled, disposes, configures) in cases {
            let mut rng = agent_rng(7, 0);
            let plans: Vec<TurnPlan> = (0..1000).map(|_| turn(&mut rng, &rates, window)).collect();
            let count = |f: fn(&TurnPlan) -> bool| plans.iter().filter(|p| f(p)).count();
            assert_eq!(count(|p| p.cancel_after.is_some()), cancelled, "{rates:?}");
            assert_eq!(count(|p| p.dispose), disposes, "{rates:?}");
            assert_eq!(count(|p| p.configure), configures, "{rates:?}");
            assert!(plans.iter().filter_map(|p| p.cancel_after).all(|d| d <= window));
        }
        // A rate in between lands near its share.
        let mut rng = agent_rng(7, 0);
        let half = rates(0.5, 0.1, 0.0);
        let plans: Vec<TurnPlan> = (0..10_000).map(|_| turn(&mut rng, &half, window)).collect();
        let cancelled = plans.iter().filter(|p| p.cancel_after.is_some()).count();
        let disposes = plans.iter().filter(|p| p.dispose).count();
        assert!((4700..=5300).contains(&cancelled), "{cancelled}");
        assert!((800..=1200).contains(&disposes), "{disposes}");
    }

    #[test]
    fn the_seed_decides_and_agents_draw_apart() {
        let all = rates(0.5, 0.5, 0.5);
        let window = Duration::from_millis(100);
        let draw = |seed, agent| {
            let mut rng = agent_rng(seed, agent);
            (0..20).map(|_| turn(&mut rng, &all, window)).collect::<Vec<_>>()
        };
        assert_eq!(draw(1, 3), draw(1, 3), "same seed, same agent: same plan");
        assert_ne!(draw(1, 3), draw(1, 4), "agents draw from streams of their own");
        assert_ne!(draw(1, 3), draw(2, 3), "another seed, another plan");
    }

    #[test]
    fn the_fault_rate_splits_over_the_kinds() {
        let cases = [
            (0.0, [0.0, 0.0, 0.0, 0.0]),
            (1.0, [0.4, 0.3, 0.2, 0.1]),
            (0.5, [0.2, 0.15, 0.1, 0.05]),
        ];
        for (rate, [rate_limit, server_error, drop, stall]) in cases {
            let m = fault_model(rate);
            let got = [m.rate_limit, m.server_error, m.drop, m.stall];
            for (g, w) in got.iter().zip([rate_limit, server_error, drop, stall]) {
                assert!((g - w).abs() < 1e-12, "{rate}: {got:?}");
            }
            assert!((got.iter().sum::<f64>() - rate).abs() < 1e-12);
        }
    }

    #[test]
    fn crashes_follow_the_rate_and_replay() {
        let count = |rate: f64, seed: u64| {
            (1..=2000u32)
                .filter(|attempt| crashes(seed, "agent-00001", 1, 1, *attempt, rate))
                .count()
        };
        assert_eq!(count(0.0, 1), 0);
        assert_eq!(count(1.0, 1), 2000);
        let tenth = count(0.1, 1);
        assert!((140..=260).contains(&tenth), "{tenth}");
        assert_eq!(count(0.1, 1), tenth, "the same seed crashes on the same attempts");
        let differs = (1..=200u32).any(|a| {
            crashes(1, "agent-00001", 1, 1, a, 0.5) != crashes(1, "agent-00002", 1, 1, a, 0.5)
        });
        assert!(differs, "the session is part of the key");
    }

    #[test]
    fn thinking_times_spread_around_their_mean_and_replay() {
        assert_eq!(think(1, 0, 1, 0), Duration::ZERO, "no think time");
        let times: Vec<Duration> = (0..1000).map(|agent| think(1, agent, 1, 1000)).collect();
        let (low, high) = (Duration::from_millis(500), Duration::from_millis(1500));
        assert!(times.iter().all(|t| (low..=high).contains(t)), "within [MS/2, 3MS/2]");
        let mean = times.iter().sum::<Duration>() / 1000;
        assert!((950..=1050).contains(&mean.as_millis()), "{mean:?}");
        let early = times.iter().filter(|t| **t < Duration::from_millis(750)).count();
        assert!((200..=300).contains(&early), "uniform: a quarter in the first quarter, {early}");
        assert_eq!(think(1, 7, 3, 1000), think(1, 7, 3, 1000), "the same draw replays");
        assert_ne!(think(1, 7, 3, 1000), think(1, 7, 4, 1000), "each turn draws its own");
        assert_ne!(think(1, 7, 3, 1000), think(2, 7, 3, 1000), "another seed, another time");
    }

    #[test]
    fn patches_change_one_known_field_or_nothing() {
        let mut rng = chaos_rng(3);
        let auto = [
            "enabled",
            "extraRetries",
            "initialDelayMs",
            "maxDelayMs",
            "jitterRatio",
            "retryableCodes",
        ];
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..500 {
            let patch = patch("auto-retry", 5, &mut rng);
            let fields: Vec<&String> = patch.as_object().unwrap().keys().collect();
            assert_eq!(fields.len(), 1, "{patch}");
            assert!(auto.contains(&fields[0].as_str()), "{patch}");
            seen.insert(fields[0].clone());
            match fields[0].as_str() {
                "extraRetries" => assert!(patch["extraRetries"].as_u64().unwrap() <= 4),
                "initialDelayMs" => {
                    assert!((5..=20).contains(&patch["initialDelayMs"].as_u64().unwrap()))
                }
                "maxDelayMs" => {
                    assert!((20..=100).contains(&patch["maxDelayMs"].as_u64().unwrap()))
                }
                "jitterRatio" => {
                    assert!((0.0..=1.0).contains(&patch["jitterRatio"].as_f64().unwrap()))
                }
                "retryableCodes" => {
                    assert!(!patch["retryableCodes"].as_array().unwrap().is_empty())
                }
                _ => {}
            }
        }
        assert_eq!(seen.len(), auto.len(), "every field gets changed: {seen:?}");
        for _ in 0..50 {
            let patch = patch("compaction", 5, &mut rng);
            let key = patch.as_object().unwrap().keys().next().unwrap().clone();
            assert!(["maxOverflowRetries", "keepRecentMessages"].contains(&key.as_str()));
        }
        assert_eq!(patch("llm-retry", 5, &mut rng), json!({}));
        assert_eq!(patch("my-plugin", 5, &mut rng), json!({}));
    }
}
