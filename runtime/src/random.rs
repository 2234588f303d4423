//! Injectable randomness: jitter samples and retry ids.
//!
//! Plugins draw jitter samples in `[0, 1]` and the `retryId`s of new retry chains from a
//! [`Jitter`] the runtime hands them, never from a global RNG, so a test or scenario fixes every
//! delay and every id:
//! - [`Samples`]: an explicit sequence consumed in order, then a seeded RNG continues — exactly a
//!   scenario's `random` and `seed`; retry ids are derived from the seed and the chain's place;
//! - [`SeededJitter`]: a seeded RNG alone (a scenario without `random`, `rein chat --seed`), with
//!   the same derived retry ids; seeded from entropy in production, where the ids are fresh;
//! - [`Constant`]: always the same sample (tests, or a deliberately jitter-free deployment); its
//!   retry ids are fresh UUID v4s from the operating system.
//!
//! # Why a seeded retry id is derived from the chain's place
//!
//! Two runs of one scenario must write the same log, `retryId`s included, so a seeded run's ids
//! must come from its seed. But a retry id must also be unique in a log and across sessions (the
//! invariant `retry-id-owned-by-one-chain`; a report that joins logs by id): ids drawn in order
//! from the seed's own stream repeat in every run of that seed — `rein chat --seed 1` twice on one
//! session wrote one id for two chains, and every other session of seed 1 held it too. So a seeded
//! id is a pure function of the seed and the chain's place, [`derived_retry_id`]: (seed,
//! session, turn, step, attempt, provider, policy key) — a place no other chain of any session
//! has — hashed (a name-based UUID, SHA-1) into 16 bytes that get the version and variant bits of
//! a UUID v4. A replay asks the same places, so it writes the same ids; and it does not depend on
//! the order in which plugins draw, nor move the jitter samples a scenario's delays pin.
//!
//! # Why one shared, locked source
//!
//! A scenario's samples are "consumed in order by every plugin": `llm-retry` and `auto-retry` draw
//! from the same sequence, interleaved as their retries happen. So one source is shared (behind
//! an `Arc`) and its position is interior state under a `Mutex`. The lock is held for one
//! `VecDeque::pop_front` or one RNG step, never across an `await`, so it cannot stall an actor.
//!
//! # Why ChaCha8 and not `StdRng`
//!
//! `rand` does not promise that `StdRng` keeps its algorithm across versions, but a scenario file
//! with `"seed": 7` must reproduce the same delays — and so the same log — after any dependency
//! upgrade. `ChaCha8Rng` is a fixed, portable algorithm; a test pins its first samples.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Where a new retry chain opens: the failed attempt that opens it and the chain's key (see the
/// module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainPlace<'a> {
    /// The session.
    pub session: &'a str,
    /// The turn.
    pub turn: u32,
    /// The step.
    pub step: u32,
    /// The attempt whose failure opens the chain.
    pub attempt: u32,
    /// The provider route.
    pub provider: &'a str,
    /// The chain's `policyKey`.
    pub policy_key: &'a str,
}

/// A source of jitter samples and retry ids, shared by every plugin of a runtime.
pub trait Jitter: Send + Sync + 'static {
    /// The next sample, in `[0, 1]`.
    fn sample(&self) -> f64;

    /// The `retryId` of the new retry chain opening at `chain`: a UUID v4 in its lowercase
    /// hyphenated form. By default a fresh one from the operating system's randomness; seeded
    /// sources derive it from their seed and `chain` ([`derived_retry_id`]), so a seeded run
    /// repeats its ids and no two chains share one.
    fn retry_id(&self, chain: &ChainPlace<'_>) -> String {
        let _ = chain;
        uuid::Uuid::new_v4().to_string()
    }
}

/// The UUID v4 made of 16 random bytes (version and variant bits set), hyphenated, lowercase.
pub fn uuid_v4(bytes: [u8; 16]) -> String {
    uuid::Builder::from_random_bytes(bytes).into_uuid().to_string()
}

/// The namespace of [`derived_retry_id`]'s name-based UUIDs (fixed: a change would change every
/// seeded log).
const RETRY_ID_NAMESPACE: uuid::Uuid = uuid::uuid!("5c1e0d7a-3f52-4b8e-9a61-2d4c8e7f0b93");

/// The retry id of the chain opening at `chain` in a run of `seed`: a UUID v4 made of the bytes
/// of the name-based UUID (v5, SHA-1) of `[seed, session, turn, step, attempt, provider,
/// policyKey]` as JSON. Equal inputs, equal ids; any other input, another id.
pub fn derived_retry_id(seed: u64, chain: &ChainPlace<'_>) -> String {
    let name = serde_json::json!([
        seed,
        chain.session,
        chain.turn,
        chain.step,
        chain.attempt,
        chain.provider,
        chain.policy_key
    ])
    .to_string();
    uuid_v4(uuid::Uuid::new_v5(&RETRY_ID_NAMESPACE, name.as_bytes()).into_bytes())
}

/// A sample outside `[0, 1]` in an explicit sequence.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SampleError {
    /// The sample at `index` is not a finite number in `[0, 1]`.
    #[error("random[{index}]: must be a finite number within [0, 1], got {value}")]
    OutOfRange {
        /// Its position in the sequence.
        index: usize,
        /// The value.
        value: f64,
    },
}

/// A seeded, portable RNG drawing uniform samples in `[0, 1)`, with retry ids derived from the
/// same seed.
#[derive(Debug)]
pub struct SeededJitter {
    rng: Mutex<ChaCha8Rng>,
    /// The seed ids are derived from; `None` (from entropy): fresh ids.
    seed: Option<u64>,
}

impl SeededJitter {
    /// The RNG for `seed`; equal seeds give equal samples, and equal ids at equal places.
    pub fn new(seed: u64) -> Self {
        Self { rng: Mutex::new(ChaCha8Rng::seed_from_u64(seed)), seed: Some(seed) }
    }

    /// A generator seeded from the operating system, with fresh retry ids (production: not
    /// reproducible on purpose).
    pub fn from_entropy() -> Self {
        Self { rng: Mutex::new(ChaCha8Rng::from_os_rng()), seed: None }
    }
}

impl Jitter for SeededJitter {
    fn sample(&self) -> f64 {
        lock(&self.rng).random::<f64>()
    }

    fn retry_id(&self, chain: &ChainPlace<'_>) -> String {
        match self.seed {
            Some(seed) => derived_retry_id(seed, chain),
            None => uuid::Uuid::new_v4().to_string(),
        }
    }
}

/// An explicit sample sequence consumed in order; when it is used up, a [`SeededJitter`] with
/// the given seed continues (a scenario's `random` + `seed`). Retry ids are derived from the
/// seed, whatever the explicit samples.
#[derive(Debug)]
pub struct Samples {
    state: Mutex<SamplesState>,
    seed: u64,
}

#[derive(Debug)]
struct SamplesState {
    pending: VecDeque<f64>,
    rng: ChaCha8Rng,
}

impl Samples {
    /// The sequence `samples`, then the RNG of `seed`. Every sample must be finite and in
    /// `[0, 1]`.
    pub fn new(samples: impl IntoIterator<Item = f64>, seed: u64) -> Result<Self, SampleError> {
        let pending: VecDeque<f64> = samples.into_iter().collect();
        if let Some((index, &value)) =
            pending.iter().enumerate().find(|(_, v)| !(v.is_finite() && (0.0..=1.0).contains(*v)))
        {
            return Err(SampleError::OutOfRange { index, value });
        }
        let rng = ChaCha8Rng::seed_from_u64(seed);
        Ok(Self { state: Mutex::new(SamplesState { pending, rng }), seed })
    }

    /// How many explicit samples are still to come before the RNG takes over.
    pub fn pending(&self) -> usize {
        lock(&self.state).pending.len()
    }
}

impl Jitter for Samples {
    fn sample(&self) -> f64 {
        let mut state = lock(&self.state);
        match state.pending.pop_front() {
            Some(sample) => sample,
            None => state.rng.random::<f64>(),
        }
    }

    fn retry_id(&self, chain: &ChainPlace<'_>) -> String {
        derived_retry_id(self.seed, chain)
    }
}

/// Always the same sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Constant(f64);

impl Constant {
    /// The constant `sample`, which must be finite and in `[0, 1]`.
    pub fn new(sample: f64) -> Result<Self, SampleError> {
        if sample.is_finite() && (0.0..=1.0).contains(&sample) {
            Ok(Self(sample))
        } else {
            Err(SampleError::OutOfRange { index: 0, value: sample })
        }
    }
}

impl Jitter for Constant {
    fn sample(&self) -> f64 {
        self.0
    }
}

/// The lock, even if a panicking thread poisoned it: the guarded state (a queue position, an RNG
/// state) is valid after any partial operation, so poisoning carries no meaning here.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn draw(jitter: &dyn Jitter, n: usize) -> Vec<f64> {
        (0..n).map(|_| jitter.sample()).collect()
    }

    #[test]
    fn explicit_samples_come_first_then_the_seeded_rng_continues() {
        let cases: [(&[f64], u64); 4] =
            [(&[0.5, 0.0, 1.0], 7), (&[], 7), (&[0.25], 0), (&[1.0, 1.0], u64::MAX)];
        for (explicit, seed) in cases {
            let samples = Samples::new(explicit.iter().copied(), seed).unwrap();
            assert_eq!(samples.pending(), explicit.len());
            let drawn = draw(&samples, explicit.len() + 3);
            assert_eq!(&drawn[..explicit.len()], explicit, "explicit first, in order");
            assert_eq!(samples.pending(), 0);
            let continued = draw(&SeededJitter::new(seed), 3);
            assert_eq!(&drawn[explicit.len()..], continued, "then the RNG of seed {seed}");
        }
    }

    #[test]
    fn seeds_are_reproducible_and_portable() {
        // Pinned: a change of algorithm would change every seeded scenario's log.
        let first = draw(&SeededJitter::new(0), 2);
        assert_eq!(first, draw(&SeededJitter::new(0), 2));
        assert_eq!(first, [PINNED_SEED_0[0], PINNED_SEED_0[1]]);
        assert_ne!(draw(&SeededJitter::new(1), 2), first);
        let many = draw(&SeededJitter::new(42), 1000);
        assert!(many.iter().all(|r| (0.0..1.0).contains(r)));
    }

    const PINNED_SEED_0: [f64; 2] = [0.7090754154265618, 0.46592172228961015];

    fn is_v4(id: &str) -> bool {
        uuid::Uuid::parse_str(id).is_ok_and(|u| {
            u.get_version_num() == 4
                && u.get_variant() == uuid::Variant::RFC4122
                && u.hyphenated().to_string() == id
        })
    }

    #[test]
    fn retry_ids_are_uuid_v4s_from_random_bytes() {
        let cases = [
            ([0u8; 16], "00000000-0000-4000-8000-000000000000"),
            ([0xff; 16], "ffffffff-ffff-4fff-bfff-ffffffffffff"),
        ];
        for (bytes, id) in cases {
            assert_eq!(uuid_v4(bytes), id);
            assert!(is_v4(id), "{id}");
        }
    }

    fn place<'a>(
        session: &'a str,
        turn: u32,
        step: u32,
        attempt: u32,
        key: &'a str,
    ) -> ChainPlace<'a> {
        ChainPlace { session, turn, step, attempt, provider: "p", policy_key: key }
    }

    #[test]
    fn derived_retry_ids_are_pinned_uuid_v4s_unique_to_the_seed_and_the_place() {
        let base = place("s", 1, 1, 1, "k");
        // Pinned: a change of derivation would change every seeded scenario's log.
        assert_eq!(derived_retry_id(1, &base), PINNED_ID);
        let places = [
            base,
            place("t", 1, 1, 1, "k"),
            place("s", 2, 1, 1, "k"),
            place("s", 1, 2, 1, "k"),
            place("s", 1, 1, 2, "k"),
            place("s", 1, 1, 1, "l"),
            ChainPlace { provider: "q", ..base },
            // Fields that would run together in a plain concatenation stay apart in JSON.
            place("s\",1,1,1,\"k", 1, 1, 1, "k"),
        ];
        let mut ids: Vec<String> = places.iter().map(|p| derived_retry_id(1, p)).collect();
        ids.push(derived_retry_id(2, &base));
        assert!(ids.iter().all(|id| is_v4(id)), "{ids:?}");
        let mut unique = ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), ids.len(), "every place and seed its own id: {ids:?}");
        assert_eq!(derived_retry_id(1, &base), derived_retry_id(1, &base.clone()));
    }

    const PINNED_ID: &str = "67eda5c2-a5bb-4740-b424-fab20a897ea7";

    #[test]
    fn seeded_sources_derive_their_ids_and_leave_the_samples_alone() {
        let at = place("s", 3, 1, 2, "k");
        for jitter in [&SeededJitter::new(7) as &dyn Jitter, &Samples::new([0.5], 7).unwrap()] {
            assert_eq!(jitter.retry_id(&at), derived_retry_id(7, &at));
            assert_eq!(jitter.retry_id(&at), jitter.retry_id(&at), "a place, one id");
        }
        // Drawing ids between samples changes no sample: the pinned sequence is intact.
        let seeded = SeededJitter::new(0);
        let a = seeded.sample();
        seeded.retry_id(&at);
        assert_eq!([a, seeded.sample()], PINNED_SEED_0);
        let samples = Samples::new([], 0).unwrap();
        samples.retry_id(&at);
        assert_eq!(draw(&samples, 2), PINNED_SEED_0);
    }

    #[test]
    fn unseeded_sources_hand_out_fresh_ids() {
        let at = place("s", 1, 1, 1, "k");
        for jitter in [&Constant::new(0.5).unwrap() as &dyn Jitter, &SeededJitter::from_entropy()] {
            let (a, b) = (jitter.retry_id(&at), jitter.retry_id(&at));
            assert!(is_v4(&a) && is_v4(&b), "{a} {b}");
            assert_ne!(a, b);
        }
    }

    #[test]
    fn samples_outside_the_unit_interval_are_rejected_with_their_index() {
        let cases: [(&[f64], usize, &str); 4] = [
            (&[0.5, 1.5], 1, "random[1]: must be a finite number within [0, 1], got 1.5"),
            (&[-0.1], 0, "random[0]: must be a finite number within [0, 1], got -0.1"),
            (&[0.0, 1.0, f64::NAN], 2, "random[2]: must be a finite number within [0, 1], got NaN"),
            (&[f64::INFINITY], 0, "random[0]: must be a finite number within [0, 1], got inf"),
        ];
        for (explicit, index, message) in cases {
            let err = Samples::new(explicit.iter().copied(), 0).unwrap_err();
            assert!(matches!(err, SampleError::OutOfRange { index: i, .. } if i == index));
            assert_eq!(err.to_string(), message);
        }
        assert!(Constant::new(1.01).is_err());
        assert_eq!(Constant::new(1.0).unwrap().sample(), 1.0);
    }

    #[test]
    fn a_shared_sequence_hands_each_sample_to_exactly_one_caller() {
        let explicit: Vec<f64> = (0..=1000).map(|i| f64::from(i) / 1000.0).collect();
        let samples = Arc::new(Samples::new(explicit.clone(), 0).unwrap());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let samples = Arc::clone(&samples);
                std::thread::spawn(move || draw(samples.as_ref(), 250))
            })
            .collect();
        let mut seen: Vec<f64> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
        seen.sort_by(f64::total_cmp);
        assert_eq!(seen, explicit[..1000]);
        assert_eq!(samples.sample(), 1.0, "the last explicit sample is still next");
    }
}
