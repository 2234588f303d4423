//! The writer's decisions, as pure functions: which requests of a batch continue their logs, and
//! how long to wait before reconnecting.

use std::collections::HashMap;
use std::time::Duration;

use crate::store::StoreError;

/// Which requests of a batch continue their session's log. `requests` are `(session, first seq,
/// number of events)` in queue order; `next` holds the next `seq` of every session they name (the
/// writer fills it from its cache and one query). Returns one outcome per request, and advances
/// `next` past the accepted ones (a later request of the same session in the batch continues an
/// earlier one).
pub(super) fn accept(
    requests: &[(&str, u64, usize)],
    next: &mut HashMap<String, u64>,
) -> Vec<Result<(), StoreError>> {
    requests
        .iter()
        .map(|&(session, first, len)| {
            let expected = next.get(session).copied().unwrap_or(0);
            if first != expected {
                return Err(StoreError::OutOfOrder {
                    session: session.to_owned(),
                    expected,
                    found: first,
                });
            }
            next.insert(session.to_owned(), expected + len as u64);
            Ok(())
        })
        .collect()
}

/// The first wait before reconnecting.
const FIRST_WAIT: Duration = Duration::from_millis(50);

/// The longest wait between two connection attempts.
pub(super) const MAX_WAIT: Duration = Duration::from_secs(2);

/// How long to wait before connection attempt `failed + 1`, after `failed` failed in a row:
/// 50 ms, doubling, at most [`MAX_WAIT`].
pub(crate) fn backoff(failed: u32) -> Duration {
    FIRST_WAIT.saturating_mul(1u32.checked_shl(failed.min(16)).unwrap_or(u32::MAX)).min(MAX_WAIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_request_must_continue_its_log_as_the_batch_left_it() {
        let mut next = HashMap::from([("a".to_owned(), 3)]);
        let got =
            accept(&[("a", 3, 2), ("b", 0, 1), ("a", 5, 1), ("a", 5, 1), ("b", 2, 1)], &mut next);
        let got: Vec<Option<(u64, u64)>> = got
            .into_iter()
            .map(|r| match r {
                Ok(()) => None,
                Err(StoreError::OutOfOrder { expected, found, .. }) => Some((expected, found)),
                Err(e) => panic!("{e}"),
            })
            .collect();
        assert_eq!(got, [None, None, None, Some((6, 5)), Some((1, 2))]);
        assert_eq!((next["a"], next["b"]), (6, 1), "refused requests advance nothing");
    }

    #[test]
    fn reconnecting_backs_off_doubling_up_to_two_seconds() {
        let ms = |failed| backoff(failed).as_millis();
        let got: Vec<u128> = [0, 1, 2, 3, 5, 6, 40, u32::MAX].into_iter().map(ms).collect();
        assert_eq!(got, [50, 100, 200, 400, 1600, 2000, 2000, 2000]);
    }
}
