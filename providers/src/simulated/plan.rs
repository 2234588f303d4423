//! What one simulated attempt does, decided before it starts: a pure function of the
//! configuration and the request.
//!
//! Two seeded RNGs (ChaCha8): one keyed by (seed, session, turn, step) writes the answer, so
//! every attempt of a step streams the same words however many faults came first; one keyed by
//! (seed, session, turn, step, attempt) draws the fault and the latencies. Nothing depends on
//! the order in which sessions run, so a seed replays exactly. With
//! [`SimulatedConfig::per_session`] off, the session is left out of both keys.
//!
//! An attempt reads its history from the newest message back to the last user message, no
//! further (`read_history`): the answer quotes that prompt, and `usage.input_tokens` counts the
//! words the request adds since the model's last answer (the prompt, or the tool results), like
//! a provider's uncached input. So an attempt of turn 2,000 costs what one of turn 1 did — a
//! count over the whole history made every attempt of a long simulated session (`rein stress`,
//! a long `rein chat`) cost more than the one before.
//!
//! With [`SimulatedConfig::tool_call_rate`], the answer to a prompt (the step whose newest
//! message is the user's) calls the first tool the request offers, on that share of the steps
//! (drawn from the step's key, so every attempt of the step makes the same call); the step after
//! the tool's result answers in words.
//!
//! HTTP faults are built by the real classification ([`classify::http_failure`]) from the status,
//! headers and body a server would send, so they carry what the adapter's failures carry.

use std::time::{Duration, SystemTime};

use http::header::{HeaderMap, HeaderValue};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rein_runtime::event::{ToolCall, Usage};
use rein_runtime::failure::{self, Failure};
use rein_runtime::provider::{Message, Request};

use super::SimulatedConfig;
use super::answer;
use crate::classify;

/// How the simulated provider names itself in messages.
pub(crate) const LABEL: &str = "Simulated";

/// One attempt's script.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plan {
    /// The chunks, each after its delay.
    pub(crate) chunks: Vec<(Duration, String)>,
    /// What happens after the last chunk.
    pub(crate) outcome: Outcome,
}

/// How an attempt ends.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    /// The answer is complete, calling these tools.
    Reply(Usage, Vec<ToolCall>),
    /// The attempt fails after this delay.
    Fail(Duration, Failure),
    /// Nothing more arrives (until the watchdog, if any, or a cancellation).
    Stall,
}

/// The plan of `request`'s attempt under `config`.
pub(crate) fn plan(config: &SimulatedConfig, request: &Request) -> Plan {
    let read = read_history(request.messages.iter());
    let step_key = key(config, request, None);
    let text = answer::answer(read.prompt, &mut rng(step_key));
    let words = answer::words(&text);
    let mut rng = rng(key(config, request, Some(request.attempt)));

    let first = Duration::from_millis(rng.random_range(config.first_chunk_latency_ms.clone()));
    let mut delays = vec![first];
    delays.extend(
        (1..words.len())
            .map(|_| Duration::from_millis(rng.random_range(config.chunk_latency_ms.clone()))),
    );
    let streamed = |n: usize| -> Vec<(Duration, String)> {
        delays.iter().copied().zip(words.iter().cloned()).take(n).collect()
    };

    let draw: f64 = rng.random();
    let mut band = config.rate_limit_rate;
    if draw < band {
        let wait = rng.random_range(config.retry_after_ms.clone());
        return Plan { chunks: vec![], outcome: Outcome::Fail(first, rate_limit(config, wait)) };
    }
    band += config.server_error_rate;
    if draw < band {
        let status = [500, 502, 503][rng.random_range(0..3)];
        return Plan { chunks: vec![], outcome: Outcome::Fail(first, server_error(status)) };
    }
    band += config.drop_rate;
    if draw < band {
        let cut = rng.random_range(1..words.len().max(2));
        let gap = delays.get(cut).copied().unwrap_or(first);
        let reset = classify::transport(LABEL, "connection reset by peer (simulated)");
        return Plan { chunks: streamed(cut), outcome: Outcome::Fail(gap, reset) };
    }
    band += config.stall_rate;
    if draw < band {
        let cut = rng.random_range(0..=words.len() / 2);
        return Plan { chunks: streamed(cut), outcome: Outcome::Stall };
    }
    let usage = Usage { input_tokens: read.new_words, output_tokens: words.len() as u64 };
    let calls = tool_calls(config, request, &read, step_key);
    Plan { chunks: streamed(words.len()), outcome: Outcome::Reply(usage, calls) }
}

/// The tools the answer of `request`'s step calls: the first tool offered, on
/// `tool_call_rate` of the steps that answer a prompt; none otherwise.
fn tool_calls(
    config: &SimulatedConfig,
    request: &Request,
    read: &Read,
    step_key: u64,
) -> Vec<ToolCall> {
    let Some(tool) = request.tools.first() else { return vec![] };
    if !read.prompt_is_newest || config.tool_call_rate <= 0.0 {
        return vec![];
    }
    // Its own stream of the step's key: the answer's words stay what they were without tools.
    let calls = rng(step_key ^ TOOL_KEY).random_bool(config.tool_call_rate.min(1.0));
    if !calls {
        return vec![];
    }
    let id = format!("call-{}-{}", request.turn, request.step);
    vec![ToolCall { id, name: tool.name.clone(), arguments: serde_json::json!({}) }]
}

/// Mixed into a step's key for its tool draw.
const TOOL_KEY: u64 = 0x7001_7001_7001_7001;

/// The failure of a stall that the watchdog ends.
pub(crate) fn stalled(silence: Duration) -> Failure {
    classify::dead_air(LABEL, silence)
}

fn rate_limit(config: &SimulatedConfig, wait_ms: u64) -> Failure {
    let mut headers = HeaderMap::new();
    headers.insert("retry-after-ms", HeaderValue::from(wait_ms));
    let body = serde_json::json!({"error": {
        "message": format!("Rate limit reached for {} (simulated): retry after {wait_ms} ms", config.model),
        "type": "rate_limit_error",
    }});
    classify::http_failure(LABEL, 429, &headers, &body.to_string(), SystemTime::UNIX_EPOCH)
}

fn server_error(status: u16) -> Failure {
    let message = match status {
        502 => "Bad gateway (simulated)",
        503 => "The server is overloaded, please try again later (simulated)",
        _ => "The server had an error while processing your request (simulated)",
    };
    let body = serde_json::json!({"error": {"message": message, "type": "server_error"}});
    let failure = classify::http_failure(
        LABEL,
        status,
        &HeaderMap::new(),
        &body.to_string(),
        SystemTime::UNIX_EPOCH,
    );
    debug_assert_eq!(failure.code(), failure::SERVER);
    failure
}

/// What an attempt reads of its history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Read<'a> {
    /// The text of the last user message (what the answer is about; empty when there is none).
    prompt: &'a str,
    /// The words of the messages after the model's last answer (the prompt, or the tool results
    /// it is to answer): the attempt's `input_tokens`.
    new_words: u64,
    /// Whether the newest message is that prompt (the step answers it, not a tool's result).
    prompt_is_newest: bool,
}

/// Reads `messages` (oldest first) from the newest back to the last user message, and no
/// further: the work is that of the current turn, whatever the length of the history before it.
fn read_history<'a>(messages: impl DoubleEndedIterator<Item = &'a Message>) -> Read<'a> {
    let mut read = Read { prompt: "", new_words: 0, prompt_is_newest: false };
    let mut answered = false;
    for (newest, message) in messages.rev().enumerate() {
        let text = match message {
            Message::User { text } => text,
            Message::Assistant { .. } => {
                answered = true;
                continue;
            }
            Message::Tool { output, .. } => output,
        };
        if !answered {
            read.new_words += text.split_whitespace().count() as u64;
        }
        if let Message::User { text } = message {
            read.prompt = text;
            read.prompt_is_newest = newest == 0;
            break;
        }
    }
    read
}

/// A stable 64-bit key (FNV-1a) of the seed and the attempt's place (the session left out unless
/// `per_session`); `attempt` is left out for the answer's key.
fn key(config: &SimulatedConfig, request: &Request, attempt: Option<u32>) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for byte in bytes {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    };
    eat(&config.seed.to_le_bytes());
    if config.per_session {
        eat(request.session.as_bytes());
    }
    eat(&[0xff]);
    eat(&request.turn.to_le_bytes());
    eat(&request.step.to_le_bytes());
    if let Some(attempt) = attempt {
        eat(&attempt.to_le_bytes());
    }
    hash
}

fn rng(key: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(session: &str, turn: u32, attempt: u32) -> Request {
        Request {
            session: session.into(),
            turn,
            step: 1,
            attempt,
            provider: "simulated".into(),
            model: "simulated-1".into(),
            messages: vec![Message::User { text: "tell me about retries".into() }].into(),
            tools: vec![],
            generation: Default::default(),
        }
    }

    fn kind(plan: &Plan) -> &'static str {
        match &plan.outcome {
            Outcome::Reply(..) => "reply",
            Outcome::Stall => "stall",
            Outcome::Fail(_, f) => match f.code() {
                "RATE_LIMIT" => "rate-limit",
                "SERVER" => "server",
                "TRANSPORT" => "drop",
                other => panic!("unexpected {other}"),
            },
        }
    }

    #[test]
    fn a_seed_replays_exactly_and_attempts_differ() {
        let config = SimulatedConfig::default();
        for attempt in 1..20 {
            let r = request("s", 1, attempt);
            assert_eq!(plan(&config, &r), plan(&config, &r));
        }
        let kinds: Vec<&str> = (1..40).map(|a| kind(&plan(&config, &request("s", 1, a)))).collect();
        assert!(kinds.contains(&"reply") && kinds.iter().any(|k| *k != "reply"), "{kinds:?}");
        let other = SimulatedConfig { seed: 99, ..SimulatedConfig::default() };
        let differs = (1..40)
            .any(|a| plan(&config, &request("s", 1, a)) != plan(&other, &request("s", 1, a)));
        assert!(differs, "another seed, other plans");
    }

    #[test]
    fn without_per_session_keys_every_session_of_a_seed_replays_the_same_attempts() {
        let shared = SimulatedConfig { per_session: false, ..SimulatedConfig::default() };
        let keyed = SimulatedConfig::default();
        let plans = |config: &SimulatedConfig, session: &str| -> Vec<Plan> {
            (1..20).map(|a| plan(config, &request(session, 1, a))).collect()
        };
        assert_eq!(plans(&shared, "a"), plans(&shared, "b"));
        assert_ne!(plans(&keyed, "a"), plans(&keyed, "b"));
        let other_seed = SimulatedConfig { seed: 1, ..shared.clone() };
        assert_ne!(plans(&shared, "a"), plans(&other_seed, "a"), "the seed still decides");
    }

    #[test]
    fn every_attempt_of_a_step_streams_the_same_answer() {
        let config = SimulatedConfig::faultless(3);
        let text = |attempt| -> String {
            plan(&config, &request("s", 1, attempt)).chunks.into_iter().map(|(_, c)| c).collect()
        };
        assert_eq!(text(1), text(2));
        assert!(text(1).contains("“tell me about retries”"), "{}", text(1));
        let other_turn: String =
            plan(&config, &request("s", 2, 1)).chunks.into_iter().map(|(_, c)| c).collect();
        assert!(!other_turn.is_empty());
    }

    #[test]
    fn rates_are_respected() {
        let config = SimulatedConfig {
            rate_limit_rate: 0.2,
            server_error_rate: 0.1,
            drop_rate: 0.1,
            stall_rate: 0.05,
            ..SimulatedConfig::default()
        };
        let n = 4000;
        let mut counts = std::collections::BTreeMap::new();
        for i in 0..n {
            *counts.entry(kind(&plan(&config, &request(&format!("s{i}"), 1, 1)))).or_insert(0) += 1;
        }
        let share = |k: &str| f64::from(counts.get(k).copied().unwrap_or(0)) / f64::from(n);
        for (k, rate) in
            [("rate-limit", 0.2), ("server", 0.1), ("drop", 0.1), ("stall", 0.05), ("reply", 0.55)]
        {
            assert!((share(k) - rate).abs() < 0.03, "{k}: {} vs {rate} ({counts:?})", share(k));
        }
    }

    #[test]
    fn faults_look_like_the_real_adapters() {
        let config = SimulatedConfig { rate_limit_rate: 1.0, ..SimulatedConfig::default() };
        let Outcome::Fail(_, failure) = plan(&config, &request("s", 1, 1)).outcome else {
            panic!("a rate limit")
        };
        assert_eq!((failure.code(), failure.status()), ("RATE_LIMIT", Some(429)));
        let after = failure.provider_retry_after_ms().unwrap();
        assert!(config.retry_after_ms.contains(&(after as u64)), "{after}");

        let config = SimulatedConfig { rate_limit_rate: 0.0, server_error_rate: 1.0, ..config };
        let Outcome::Fail(_, failure) = plan(&config, &request("s", 1, 1)).outcome else {
            panic!("a server error")
        };
        assert_eq!(failure.code(), "SERVER");
        assert!(matches!(failure.status(), Some(500 | 502 | 503)));

        let config = SimulatedConfig { server_error_rate: 0.0, drop_rate: 1.0, ..config };
        let dropped = plan(&config, &request("s", 1, 1));
        assert!(!dropped.chunks.is_empty(), "a drop happens mid-stream");
        assert!(matches!(&dropped.outcome, Outcome::Fail(_, f) if f.code() == "TRANSPORT"));
    }

    /// A history of `turns` earlier turns (a prompt and an answer each), then `tail`.
    fn history(turns: usize, tail: &[Message]) -> Vec<Message> {
        let mut messages = Vec::new();
        for n in 0..turns {
            messages.push(Message::User { text: format!("earlier prompt {n}") });
            messages
                .push(Message::Assistant { text: "an earlier answer".into(), tool_calls: vec![] });
        }
        messages.extend_from_slice(tail);
        messages
    }

    /// Iterates `messages`, counting every message it hands out.
    struct Counting<'a> {
        inner: std::slice::Iter<'a, Message>,
        visits: &'a std::cell::Cell<usize>,
    }

    impl<'a> Iterator for Counting<'a> {
        type Item = &'a Message;
        fn next(&mut self) -> Option<&'a Message> {
            self.visits.set(self.visits.get() + 1);
            self.inner.next()
        }
    }

    impl DoubleEndedIterator for Counting<'_> {
        fn next_back(&mut self) -> Option<Self::Item> {
            self.visits.set(self.visits.get() + 1);
            self.inner.next_back()
        }
    }

    #[test]
    fn an_attempt_reads_its_turn_not_its_history() {
        let prompt = || Message::User { text: "tell me about retries".into() };
        let call = || Message::Assistant { text: "let me look".into(), tool_calls: vec![] };
        let result = || Message::Tool {
            id: "c1".into(),
            output: "three words here".into(),
            is_error: false,
        };
        // (the messages after the history, the prompt read, its new words, messages visited)
        let cases: [(Vec<Message>, &str, u64, usize); 3] = [
            (vec![prompt()], "tell me about retries", 4, 1),
            // A later step of a tool turn: the tool's output is the new input.
            (vec![prompt(), call(), result()], "tell me about retries", 3, 3),
            // Nothing after the last answer (a retried turn that has no new message).
            (vec![prompt(), call()], "tell me about retries", 0, 2),
        ];
        for (tail, want_prompt, want_words, want_visits) in cases {
            for turns in [0, 10, 10_000] {
                let messages = history(turns, &tail);
                let visits = std::cell::Cell::new(0);
                let read = read_history(Counting { inner: messages.iter(), visits: &visits });
                assert_eq!((read.prompt, read.new_words), (want_prompt, want_words), "{tail:?}");
                assert_eq!(read.prompt_is_newest, tail.len() == 1, "{tail:?}");
                assert_eq!(visits.get(), want_visits, "{turns} earlier turns: {tail:?}");
            }
        }
        assert_eq!(
            read_history([].iter()),
            Read { prompt: "", new_words: 0, prompt_is_newest: false }
        );
    }

    #[test]
    fn an_answer_and_its_usage_do_not_depend_on_the_history_before_its_turn() {
        let config = SimulatedConfig::faultless(4);
        let at = |turns: usize| {
            let mut r = request("s", 7, 1);
            r.messages = history(turns, &[Message::User { text: "and now?".into() }]).into();
            plan(&config, &r)
        };
        let short = at(1);
        assert_eq!(at(5_000), short);
        let Outcome::Reply(usage, _) = short.outcome else { panic!("a faultless reply") };
        assert_eq!(usage.input_tokens, 2, "the words of the prompt");
        assert_eq!(usage.output_tokens, short.chunks.len() as u64);
    }

    #[test]
    fn latencies_stay_in_their_ranges() {
        let config = SimulatedConfig::faultless(5);
        let config = SimulatedConfig {
            first_chunk_latency_ms: 100..=200,
            chunk_latency_ms: 10..=20,
            ..config
        };
        let chunks = plan(&config, &request("s", 1, 1)).chunks;
        assert!((100..=200).contains(&(chunks[0].0.as_millis() as u64)));
        assert!(chunks[1..].iter().all(|(d, _)| (10..=20).contains(&(d.as_millis() as u64))));
    }

    #[test]
    fn a_prompt_calls_the_first_tool_offered_on_its_share_of_steps_and_every_attempt_alike() {
        let tool = rein_runtime::provider::ToolSpec {
            name: "pause".into(),
            description: "waits".into(),
            parameters: serde_json::json!({"type": "object"}),
        };
        let with_tools = |session: &str, attempt: u32, tail: Vec<Message>| {
            let mut r = request(session, 1, attempt);
            r.tools = vec![tool.clone()];
            r.messages = tail.into();
            r
        };
        let prompt = || Message::User { text: "look it up".into() };
        let calls = |config: &SimulatedConfig, r: &Request| match plan(config, r).outcome {
            Outcome::Reply(_, calls) => calls,
            other => panic!("a faultless reply, got {other:?}"),
        };
        // (rate, share of 2,000 sessions' prompts that call the tool)
        for rate in [0.0, 0.3, 1.0] {
            let config = SimulatedConfig { tool_call_rate: rate, ..SimulatedConfig::faultless(6) };
            let n = 2000;
            let called = (0..n)
                .filter(|i| {
                    !calls(&config, &with_tools(&format!("s{i}"), 1, vec![prompt()])).is_empty()
                })
                .count();
            let share = called as f64 / f64::from(n);
            assert!((share - rate).abs() < 0.04, "rate {rate}: {share}");
        }
        let config = SimulatedConfig { tool_call_rate: 1.0, ..SimulatedConfig::faultless(6) };
        let first = calls(&config, &with_tools("s", 1, vec![prompt()]));
        assert_eq!(first.len(), 1);
        assert_eq!((first[0].id.as_str(), first[0].name.as_str()), ("call-1-1", "pause"));
        assert_eq!(calls(&config, &with_tools("s", 2, vec![prompt()])), first, "every attempt");
        // The step after the tool's result answers in words; without tools offered, no call.
        let result =
            Message::Tool { id: "call-1-1".into(), output: "done".into(), is_error: false };
        let call = Message::Assistant { text: String::new(), tool_calls: first.clone() };
        assert!(calls(&config, &with_tools("s", 1, vec![prompt(), call, result])).is_empty());
        assert!(calls(&config, &request("s", 1, 1)).is_empty());
        // The words stay those of a run without tools.
        let words =
            |config: &SimulatedConfig| plan(config, &with_tools("s", 1, vec![prompt()])).chunks;
        assert_eq!(words(&config), words(&SimulatedConfig::faultless(6)));
    }
}
