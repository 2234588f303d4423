//! One log line: an [`Envelope`] as one line of JSON.
//!
//! Both durable stores hold the same text: the JSONL store writes each line followed by `\n`,
//! the SQLite store keeps it in the `line` column. Decoding checks the `seq` a line must have, so
//! "not contiguous from 0" is reported at the line that breaks it, like any other corruption.

use crate::event::Envelope;

/// The JSON of one envelope, without a newline.
pub fn encode(envelope: &Envelope) -> Result<String, serde_json::Error> {
    serde_json::to_string(envelope)
}

/// The JSONL text of an append: each envelope's JSON followed by `\n`, in one buffer so that the
/// whole append can be written with a single `write`.
pub fn encode_lines(events: &[Envelope]) -> Result<Vec<u8>, serde_json::Error> {
    let mut buf = Vec::with_capacity(events.len() * 160);
    for event in events {
        serde_json::to_writer(&mut buf, event)?;
        buf.push(b'\n');
    }
    Ok(buf)
}

/// Decodes one line (without its newline) that must hold `seq` = `expected`. The error says why,
/// for a [`StoreError::Corrupt`](super::StoreError::Corrupt) message.
pub fn decode(line: &[u8], expected: u64) -> Result<Envelope, String> {
    let envelope: Envelope = serde_json::from_slice(line).map_err(|e| e.to_string())?;
    if envelope.seq != expected {
        return Err(format!("seq {} where seq {expected} was expected", envelope.seq));
    }
    Ok(envelope)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Event, UserMessage};

    fn message(seq: u64, text: &str) -> Envelope {
        Envelope { seq, time: 7, event: Event::UserMessage(UserMessage { text: text.into() }) }
    }

    #[test]
    fn lines_are_one_json_object_each_even_when_text_has_newlines() {
        let events = [message(0, "a\nb"), message(1, "c")];
        let text = String::from_utf8(encode_lines(&events).unwrap()).unwrap();
        assert_eq!(
            text,
            "{\"seq\":0,\"time\":7,\"type\":\"user/message\",\"data\":{\"text\":\"a\\nb\"}}\n\
             {\"seq\":1,\"time\":7,\"type\":\"user/message\",\"data\":{\"text\":\"c\"}}\n"
        );
        for (line, event) in text.lines().zip(&events) {
            assert_eq!(line, encode(event).unwrap());
            assert_eq!(&decode(line.as_bytes(), event.seq).unwrap(), event);
        }
    }

    #[test]
    fn decoding_names_what_is_wrong() {
        let cases: [(&str, u64, &str); 4] = [
            (
                r#"{"seq":3,"time":7,"type":"user/message","data":{"text":"x"}}"#,
                2,
                "seq 3 where seq 2",
            ),
            (r#"{"seq":0,"time":7,"type":"user/message","data":{"text":"#, 0, "EOF"),
            (r#"{"seq":0,"time":7,"type":"no/such","data":{}}"#, 0, "no/such"),
            ("", 0, "EOF"),
        ];
        for (line, expected, needle) in cases {
            let err = decode(line.as_bytes(), expected).unwrap_err();
            assert!(err.contains(needle), "{line}: {err}");
        }
    }
}
