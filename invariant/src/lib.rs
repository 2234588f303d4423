//! rein-invariant: the rules of the session-log contract as pure functions.
