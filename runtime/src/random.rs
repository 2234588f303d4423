//! Injectable randomness for jitter (SPEC §5.2, §10).
//!
//! Plugins draw jitter samples in `[0, 1]` from a [`Jitter`] the runtime hands them, never from a
//! global RNG, so a test or scenario fixes every delay:
//! - [`Samples`]: an explicit sequence consumed in order, then a seeded RNG continues — exactly a
//!   scenario's `random` and `seed` (SPEC §10);
//! - [`SeededJitter`]: a seeded RNG alone (a scenario without `random`; a seed from entropy in
//!   production);
//! - [`Constant`]: always the same sample (tests, or a deliberately jitter-free deployment).
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

/// A source of jitter samples, shared by every plugin of a runtime.
pub trait Jitter: Send + Sync + 'static {
    /// The next sample, in `[0, 1]`.
    fn sample(&self) -> f64;
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

/// A seeded, portable RNG drawing uniform samples in `[0, 1)`.
#[derive(Debug)]
pub struct SeededJitter {
    rng: Mutex<ChaCha8Rng>,
}

impl SeededJitter {
    /// The RNG for `seed`; equal seeds give equal sequences.
    pub fn new(seed: u64) -> Self {
        Self { rng: Mutex::new(ChaCha8Rng::seed_from_u64(seed)) }
    }

    /// A generator seeded from the operating system (production: not reproducible on purpose).
    pub fn from_entropy() -> Self {
        Self { rng: Mutex::new(ChaCha8Rng::from_os_rng()) }
    }
}

impl Jitter for SeededJitter {
    fn sample(&self) -> f64 {
        lock(&self.rng).random::<f64>()
    }
}

/// An explicit sample sequence consumed in order; when it is used up, a [`SeededJitter`] with
/// the given seed continues (SPEC §10 `random` + `seed`).
#[derive(Debug)]
pub struct Samples {
    state: Mutex<SamplesState>,
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
        Ok(Self { state: Mutex::new(SamplesState { pending, rng }) })
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
