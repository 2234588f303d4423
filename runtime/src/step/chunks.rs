//! [`PendingChunks`]: the chunks of an attempt that reached its step and are not written yet.
//!
//! An adapter often streams several chunks at once (a network read holds many SSE events; a
//! simulated or cached answer holds them all). Sent to the step one message each, every chunk
//! would be one handler run and one log append. Instead the attempt's sink pushes each chunk
//! here and sends the step a message only when the buffer was empty; the handler of that
//! message takes every chunk pushed meanwhile and writes them as one batch. Order holds: the
//! message of a chunk is queued before anything the adapter does after pushing it (its
//! outcome), and a handler takes the chunks in the order they were pushed.

use std::sync::{Arc, Mutex, PoisonError};

/// One attempt's pending chunks, shared by its sink and its step.
#[derive(Debug, Clone, Default)]
pub(crate) struct PendingChunks(Arc<Mutex<Vec<String>>>);

impl PendingChunks {
    /// Adds a chunk; `true` when the buffer was empty, so the step must be told.
    pub(crate) fn push(&self, chunk: String) -> bool {
        let mut pending = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        pending.push(chunk);
        pending.len() == 1
    }

    /// Every chunk pushed so far, in order, leaving the buffer empty.
    pub(crate) fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_step_is_told_once_per_batch_and_takes_the_chunks_in_order() {
        let pending = PendingChunks::default();
        // (pushed, whether that push must tell the step) then what a take finds.
        assert!(pending.push("a".into()), "the first chunk tells the step");
        assert!(!pending.push("b".into()), "a chunk behind an untaken one rides along");
        assert!(!pending.push("c".into()));
        assert_eq!(pending.take(), ["a", "b", "c"]);
        assert_eq!(pending.take(), Vec::<String>::new(), "taken chunks are gone");
        assert!(pending.push("d".into()), "after a take, the next chunk tells the step again");
        let sink_side = pending.clone();
        assert!(!sink_side.push("e".into()), "clones share the buffer");
        assert_eq!(pending.take(), ["d", "e"]);
    }
}
