//! The simulated provider's answer: a few plausible sentences about the prompt, chosen by a
//! seeded RNG, and the words they stream as.

use rand::Rng;
use rand::seq::SliceRandom;

const OPENINGS: &[&str] = &[
    "Good question about “{topic}”.",
    "Here is a short answer on “{topic}”.",
    "Let me think about “{topic}” for a moment.",
    "You asked about “{topic}”, so here goes.",
];

const BODY: &[&str] = &[
    "This reply comes from rein's simulated provider: no model and no network were involved.",
    "Each word arrived as its own chunk, a few milliseconds apart, the way a real model streams.",
    "Some attempts before this one may have failed on purpose, with a rate limit, a server error or a dropped connection.",
    "When an attempt fails with a retryable code, llm-retry waits, either the server's Retry-After or an exponential backoff, and asks again.",
    "Only the attempt that succeeds becomes the assistant's message; the chunks of a failed attempt stay in the log as diagnostics.",
    "A stream that stalls is ended by the dead-air watchdog, or by cancelling the turn.",
    "The same seed always gives the same faults and the same words, so a run can be replayed exactly.",
    "To talk to a real model, set DEEPSEEK_API_KEY or OPENAI_API_KEY and run again.",
    "Every event of this conversation is in the session log, and rein check can verify that log.",
    "A retried request is built from the durable history, so the model sees exactly what it saw the first time.",
];

const CLOSINGS: &[&str] = &[
    "I hope that helps.",
    "Anything else you would like to try?",
    "Ask again and the answer will change with the turn.",
];

/// The longest topic quoted back, in words.
const TOPIC_WORDS: usize = 8;

/// The answer to `prompt`: an opening that quotes it, two to four sentences, a closing.
pub(crate) fn answer(prompt: &str, rng: &mut impl Rng) -> String {
    let words: Vec<&str> = prompt.split_whitespace().collect();
    let topic = match words.len() {
        0 => "your message".to_owned(),
        n if n <= TOPIC_WORDS => words.join(" "),
        _ => format!("{}…", words[..TOPIC_WORDS].join(" ")),
    };
    let opening = OPENINGS[rng.random_range(0..OPENINGS.len())].replace("{topic}", &topic);
    let mut body: Vec<&str> = BODY.to_vec();
    body.shuffle(rng);
    let count = rng.random_range(2..=4);
    let closing = CLOSINGS[rng.random_range(0..CLOSINGS.len())];
    let mut sentences = vec![opening.as_str()];
    sentences.extend(&body[..count]);
    sentences.push(closing);
    sentences.join(" ")
}

/// The chunks `text` streams as: one per word, each but the last with its following space, so
/// they concatenate back to `text` (whose words are separated by single spaces).
pub(crate) fn words(text: &str) -> Vec<String> {
    let mut chunks: Vec<String> = text.split(' ').map(|w| format!("{w} ")).collect();
    if let Some(last) = chunks.last_mut() {
        last.pop();
    }
    chunks
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::*;

    #[test]
    fn the_answer_quotes_the_prompt_and_streams_back_to_itself() {
        let cases = [
            ("what is a retry?", "“what is a retry?”"),
            ("  spaced\n  out  ", "“spaced out”"),
            ("", "“your message”"),
            (
                "one two three four five six seven eight nine ten",
                "“one two three four five six seven eight…”",
            ),
        ];
        for (prompt, quoted) in cases {
            let text = answer(prompt, &mut ChaCha8Rng::seed_from_u64(1));
            assert!(text.contains(quoted), "{text}");
            assert_eq!(words(&text).concat(), text);
            assert!(words(&text).len() > 20);
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_answer() {
        let one = answer("hi", &mut ChaCha8Rng::seed_from_u64(7));
        assert_eq!(answer("hi", &mut ChaCha8Rng::seed_from_u64(7)), one);
        let others: Vec<String> =
            (0..8).map(|s| answer("hi", &mut ChaCha8Rng::seed_from_u64(s))).collect();
        assert!(others.iter().any(|o| *o != one), "seeds vary the answer");
    }
}
