//! What a response's headers tell a failure: the provider's request id and its suggested delay.
//!
//! Pure functions of the headers (and, for an HTTP date, of "now"), so they are table-tested.

use std::time::SystemTime;

use http::header::HeaderMap;

/// The headers a request id is read from, in order.
const REQUEST_ID_HEADERS: [&str; 2] = ["x-request-id", "x-deepseek-request-id"];

/// The provider's request id of an OpenAI-compatible server: `x-request-id`, else
/// `x-deepseek-request-id` ([`request_id_of`] those).
pub fn request_id(headers: &HeaderMap) -> Option<String> {
    request_id_of(headers, &REQUEST_ID_HEADERS)
}

/// The value of the first of `names` that is present, readable and non-empty (trimmed).
pub fn request_id_of(headers: &HeaderMap, names: &[&str]) -> Option<String> {
    names.iter().find_map(|name| text(headers, name).map(str::to_owned))
}

/// The server-suggested delay in milliseconds: `retry-after-ms`, else `retry-after` as seconds,
/// else `retry-after` as an HTTP date measured from `now`. A value that does not parse, is not
/// finite or is not > 0 is ignored (the next source is tried), so a delay is always valid for
/// `Failure::with_retry_after_ms`.
pub fn retry_after_ms(headers: &HeaderMap, now: SystemTime) -> Option<f64> {
    let positive = |ms: f64| (ms.is_finite() && ms > 0.0).then_some(ms);
    if let Some(ms) = text(headers, "retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && let Some(ms) = positive(ms)
    {
        return Some(ms);
    }
    let value = text(headers, "retry-after")?;
    if let Ok(seconds) = value.parse::<f64>() {
        return positive(seconds * 1000.0);
    }
    let date = httpdate::parse_http_date(value).ok()?;
    let ahead = date.duration_since(now).ok()?;
    positive(ahead.as_secs_f64() * 1000.0)
}

/// A header's trimmed, non-empty text value.
fn text<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let value = headers.get(name)?.to_str().ok()?.trim();
    (!value.is_empty()).then_some(value)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http::header::{HeaderName, HeaderValue};

    use super::*;

    /// Headers as (name, value) pairs.
    type Pairs<'a> = &'a [(&'a str, &'a str)];

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    /// 2015-10-21T07:28:00Z, the date of RFC 9110's example.
    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480)
    }

    #[test]
    fn retry_after_sources_in_order() {
        let cases: [(Pairs, Option<f64>); 14] = [
            (&[], None),
            (&[("retry-after-ms", "1500")], Some(1500.0)),
            (&[("retry-after-ms", "0.5")], Some(0.5)),
            (&[("retry-after-ms", "250"), ("retry-after", "9")], Some(250.0)),
            (&[("retry-after", "2")], Some(2000.0)),
            (&[("retry-after", " 1.5 ")], Some(1500.0)),
            // An unusable retry-after-ms falls back to retry-after.
            (&[("retry-after-ms", "0"), ("retry-after", "3")], Some(3000.0)),
            (&[("retry-after-ms", "soon"), ("retry-after", "3")], Some(3000.0)),
            (&[("retry-after-ms", "-5")], None),
            (&[("retry-after", "0")], None),
            (&[("retry-after", "-1")], None),
            (&[("retry-after", "Wed, 21 Oct 2015 07:28:07 GMT")], Some(7000.0)),
            // A date in the past (or now) is no delay.
            (&[("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")], None),
            (&[("retry-after", "next tuesday")], None),
        ];
        for (pairs, expected) in cases {
            assert_eq!(retry_after_ms(&headers(pairs), now()), expected, "{pairs:?}");
        }
    }

    #[test]
    fn request_id_prefers_x_request_id() {
        let cases: [(Pairs, Option<&str>); 5] = [
            (&[], None),
            (&[("x-request-id", "r-1")], Some("r-1")),
            (&[("x-deepseek-request-id", "d-1")], Some("d-1")),
            (&[("x-deepseek-request-id", "d-1"), ("x-request-id", "r-1")], Some("r-1")),
            (&[("x-request-id", " "), ("x-deepseek-request-id", "d-1")], Some("d-1")),
        ];
        for (pairs, expected) in cases {
            assert_eq!(request_id(&headers(pairs)).as_deref(), expected, "{pairs:?}");
        }
    }
}
