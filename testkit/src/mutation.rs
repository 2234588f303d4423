//! Mutations of valid inputs for bad-input property tests: bytes flipped, cut, inserted or
//! removed.

use proptest::prelude::*;

/// One change to a byte string; positions are taken modulo its length.
#[derive(Debug, Clone)]
pub enum Mutation {
    /// XOR one byte with a non-zero mask.
    Flip(usize, u8),
    /// Keep only the first `n` bytes.
    Truncate(usize),
    /// Insert bytes at a position.
    Insert(usize, Vec<u8>),
    /// Remove up to `n` bytes at a position.
    Remove(usize, usize),
}

/// `bytes` with `mutations` applied in order.
pub fn mutate(mut bytes: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for mutation in mutations {
        let len = bytes.len();
        match mutation {
            Mutation::Flip(at, mask) if len > 0 => bytes[at % len] ^= mask,
            Mutation::Flip(..) => {}
            Mutation::Truncate(n) => bytes.truncate(n % (len + 1)),
            Mutation::Insert(at, more) => {
                let at = at % (len + 1);
                bytes.splice(at..at, more.iter().copied());
            }
            Mutation::Remove(at, n) if len > 0 => {
                let at = at % len;
                bytes.drain(at..(at + n).min(len));
            }
            Mutation::Remove(..) => {}
        }
    }
    bytes
}

/// One to three mutations; inserted bytes are drawn from `telling` (the bytes that matter to the
/// input's syntax: digits and signs for numbers, brackets, quotes, newlines) as often as from
/// all bytes.
pub fn mutations(telling: &'static [u8]) -> impl Strategy<Value = Vec<Mutation>> {
    let byte = prop_oneof![any::<u8>(), prop::sample::select(telling.to_vec())];
    let mutation = prop_oneof![
        3 => (any::<usize>(), 1..=255u8).prop_map(|(at, mask)| Mutation::Flip(at, mask)),
        1 => any::<usize>().prop_map(Mutation::Truncate),
        3 => (any::<usize>(), prop::collection::vec(byte, 1..8))
            .prop_map(|(at, bytes)| Mutation::Insert(at, bytes)),
        1 => (any::<usize>(), 1..16usize).prop_map(|(at, n)| Mutation::Remove(at, n)),
    ];
    prop::collection::vec(mutation, 1..4)
}
