//! Reading a session's rows back: each row's line decoded and its `seq` checked, so a gap or a
//! bad line is [`StoreError::Corrupt`] at `<url>#<session>`, line `seq + 1`, as in the SQLite
//! store.

use crate::event::Envelope;
use crate::store::{StoreError, line};

/// Decodes `rows` (`seq`, `line`), which must run `first, first + 1, …`.
pub(super) fn decode<'r>(
    shown: &str,
    session: &str,
    first: u64,
    rows: impl IntoIterator<Item = (i64, &'r str)>,
) -> Result<Vec<Envelope>, StoreError> {
    let mut events: Vec<Envelope> = Vec::new();
    for (seq, text) in rows {
        let expected = first + events.len() as u64;
        let corrupt = |message: String| StoreError::Corrupt {
            path: format!("{shown}#{session}"),
            line: expected + 1,
            message,
        };
        if u64::try_from(seq).ok() != Some(expected) {
            return Err(corrupt(format!(
                "row seq {seq} where seq {expected} was expected (a gap in the log)"
            )));
        }
        if text.len() > line::MAX_LINE_BYTES {
            let limit = line::MAX_LINE_BYTES;
            return Err(corrupt(format!("the line is over the limit of {limit} bytes")));
        }
        events.push(line::decode(text.as_bytes(), expected).map_err(corrupt)?);
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_must_run_from_the_first_seq_and_hold_their_events() {
        let line =
            |seq: u64| format!(r#"{{"seq":{seq},"time":1,"type":"agent/idle","data":{{}}}}"#);
        let (l0, l1, l2) = (line(0), line(1), line(2));
        let ok = decode("pg", "s", 0, [(0, l0.as_str()), (1, l1.as_str())]).unwrap();
        assert_eq!(ok.len(), 2);
        assert_eq!(decode("pg", "s", 1, [(1, l1.as_str())]).unwrap()[0].seq, 1);
        /// (rows, the line at fault, what the message says)
        type Case<'a> = (Vec<(i64, &'a str)>, u64, &'a str);
        let cases: [Case<'_>; 3] = [
            (vec![(0, &l0), (2, &l2)], 2, "row seq 2 where seq 1 was expected (a gap"),
            (vec![(0, "nope")], 1, "expected"),
            (vec![(0, &l1)], 1, "seq 1 where seq 0 was expected"),
        ];
        for (rows, at, needle) in cases {
            match decode("pg", "s", 0, rows) {
                Err(StoreError::Corrupt { path, line, message }) => {
                    assert_eq!((path.as_str(), line), ("pg#s", at));
                    assert!(message.contains(needle), "{message}");
                }
                other => panic!("{other:?}"),
            }
        }
    }
}
