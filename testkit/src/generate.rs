//! Valid session logs drawn from a byte string, for property tests: [`generate`] reads its
//! choices from the bytes (cycling; all zeros when empty), so every byte string is a log and a
//! shrunk string is a shorter, simpler one.

use rein_event::event::{CancelCause, Envelope, TurnEndReason};

use crate::history::{ALWAYS_KEY, AUTO_KEY, History, OFFICIAL_CODES, OFFICIAL_KEY, Retry};

const PROVIDERS: &[&str] = &["mock", "deepseek"];
const CODES: &[&str] = &[
    "RATE_LIMIT",
    "SERVER",
    "TIMEOUT",
    "EMPTY_RESPONSE",
    "QUOTA",
    "AUTH",
    "NO_ADAPTER",
    "CONTEXT_WINDOW_EXCEEDED",
];
const DELAYS: &[f64] = &[500.0, 0.0, 0.5, 1000.7, 2000.0, 10000.0];

/// Draws choices from a byte string (cycling; all zeros when empty).
struct Draw<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Draw<'_> {
    fn pick(&mut self, n: usize) -> usize {
        let byte = if self.bytes.is_empty() { 0 } else { self.bytes[self.at % self.bytes.len()] };
        self.at += 1;
        usize::from(byte) % n
    }
}

/// A step's retry chains, as the plugins count them.
#[derive(Default)]
struct Chains {
    chains: Vec<(String, &'static str, String, u64)>,
}

impl Chains {
    fn count(&self, provider: &str, key: &str) -> u64 {
        self.chains.iter().find(|c| c.0 == provider && c.1 == key).map_or(0, |c| c.3)
    }

    /// The next retry of the chain: (id, retry number).
    fn next(&mut self, provider: &str, key: &'static str, fresh: &mut u64) -> (String, u64) {
        if let Some(chain) = self.chains.iter_mut().find(|c| c.0 == provider && c.1 == key) {
            chain.3 += 1;
            return (chain.2.clone(), chain.3);
        }
        *fresh += 1;
        let id = format!("00000000-0000-4000-8000-{:012}", *fresh);
        self.chains.push((provider.to_owned(), key, id.clone(), 1));
        (id, 1)
    }
}

/// A valid log built from `choices`: turns of steps of attempts; failures recovered by the
/// official chain, auto-retry, always mode, compaction, an always-mode takeover after an aborted
/// auto-retry wait, or not at all (a stop, or a cancel during the wait); tool calls; diagnostics.
pub fn generate(choices: &[u8]) -> Vec<Envelope> {
    let mut d = Draw { bytes: choices, at: 0 };
    let mut h = History::new();
    let mut fresh = 0u64;
    let turns = 1 + d.pick(3);
    for _ in 0..turns {
        if d.pick(4) != 0 {
            h.wait(d.pick(5) as u64).user();
        }
        h.turn();
        let steps = 1 + d.pick(3);
        let mut ended = false;
        'steps: for step in 1..=steps {
            h.wait(d.pick(3) as u64).step();
            let mut chains = Chains::default();
            loop {
                let provider = PROVIDERS[d.pick(PROVIDERS.len())];
                h.wait(d.pick(3) as u64).request(provider);
                for _ in 0..d.pick(3) {
                    h.wait(d.pick(3) as u64).chunk();
                }
                match d.pick(10) {
                    0 => {
                        h.crashed();
                    }
                    1 => {
                        h.config_changed();
                    }
                    _ => {}
                }
                let fails = h.attempt < 8 && d.pick(5) < 2;
                if !fails {
                    let tools: Vec<String> = if step < steps {
                        (0..=d.pick(2)).map(|i| format!("call-{}-{step}-{i}", h.turn)).collect()
                    } else {
                        Vec::new()
                    };
                    let ids: Vec<&str> = tools.iter().map(String::as_str).collect();
                    h.wait(1).message(&ids);
                    for id in &ids {
                        h.tool_call(id);
                    }
                    for id in &ids {
                        h.wait(d.pick(4) as u64).tool_result(id);
                    }
                    h.step_end();
                    break;
                }
                let code = CODES[d.pick(CODES.len())];
                h.wait(1).error(code);
                let hard_floor = rein_event::failure::HARD_FLOOR.contains(&code);
                let official_ok =
                    OFFICIAL_CODES.contains(&code) && chains.count(provider, OFFICIAL_KEY) < 2;
                let auto_ok = !hard_floor && chains.count(provider, AUTO_KEY) < 3;
                let delay = DELAYS[d.pick(DELAYS.len())];
                let mut schedule = |h: &mut History, key: &'static str, start: bool| {
                    let (id, n) = chains.next(provider, key, &mut fresh);
                    let retry = match key {
                        OFFICIAL_KEY => Retry::official(&id, n),
                        AUTO_KEY => Retry::auto(&id, n),
                        _ => Retry::always(&id, n),
                    }
                    .delay(delay);
                    if start {
                        h.retried(retry);
                    } else {
                        h.retry(retry);
                    }
                };
                match d.pick(8) {
                    0 | 1 if official_ok => schedule(&mut h, OFFICIAL_KEY, true),
                    2 if auto_ok => schedule(&mut h, AUTO_KEY, true),
                    3 => schedule(&mut h, ALWAYS_KEY, true),
                    4 if code == "CONTEXT_WINDOW_EXCEEDED" => {
                        h.compacted();
                    }
                    5 if auto_ok => {
                        // auto-retry's wait is aborted (enabled = false); always mode takes over.
                        schedule(&mut h, AUTO_KEY, false);
                        h.wait(d.pick(5) as u64).config_changed();
                        schedule(&mut h, ALWAYS_KEY, true);
                    }
                    6 => {
                        // Cancelled during the wait: no llm/retry-started.
                        schedule(&mut h, ALWAYS_KEY, false);
                        h.wait(d.pick(50) as u64).step_end();
                        h.turn_end(TurnEndReason::Aborted { cause: CancelCause::User });
                        ended = true;
                        break 'steps;
                    }
                    _ => {
                        let failure = h.failure.clone().expect("a failure");
                        h.step_end().turn_end(TurnEndReason::Error { failure });
                        ended = true;
                        break 'steps;
                    }
                }
            }
        }
        if !ended {
            let reason =
                if d.pick(6) == 0 { TurnEndReason::MaxSteps } else { TurnEndReason::Completed };
            h.turn_end(reason);
        }
        if d.pick(2) == 0 {
            h.idle();
        }
    }
    h.build()
}
