//! Who may talk to the console: only pages it served itself, and programs on this machine.
//!
//! The console listens on 127.0.0.1 only and asks for no login, so the one way another party
//! could reach it is through a browser on this machine: a page from another site sending
//! requests to `http://127.0.0.1:PORT` (cross-site request forgery), or a name of the attacker's
//! that resolves to 127.0.0.1 (DNS rebinding). [`check`] refuses both:
//!
//! - the `Host` header must name the console itself (`127.0.0.1:PORT` or `localhost:PORT`): a
//!   rebound name arrives with the attacker's host name;
//! - an `Origin` header, when present, must be the console's own origin
//!   (`http://127.0.0.1:PORT` or `http://localhost:PORT`; `null` is refused): browsers send it
//!   on every cross-origin request and on every write;
//! - a write (any method but `GET`, `HEAD`, `OPTIONS`) whose `Sec-Fetch-Site` says it comes from
//!   another site is refused even without an `Origin`;
//! - a write must carry a JSON body ([`json_body`]): an HTML form of another site can only send
//!   `application/x-www-form-urlencoded`, `multipart/form-data` or `text/plain`, and a script
//!   of another site cannot send JSON without a CORS preflight, which the console never grants.
//!
//! A program (curl, a test) sends neither `Origin` nor `Sec-Fetch-Site`, and is let through once
//! its `Host` is right. Everything here is pure; the middleware in `server.rs` only reads the
//! headers and answers a refusal with 403 (or 415).

/// The console's own address, for the checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Own {
    /// The port it listens on (127.0.0.1 only).
    pub(crate) port: u16,
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The `Host` header is missing or names something else.
    Host(Option<String>),
    /// The `Origin` header names another origin.
    Origin(String),
    /// A write that `Sec-Fetch-Site` says comes from another site.
    CrossSite(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Host(None) => write!(f, "refused: the request has no Host header"),
            Refusal::Host(Some(host)) => {
                write!(f, "refused: Host {host:?} is not this console's (127.0.0.1 only)")
            }
            Refusal::Origin(origin) => {
                write!(f, "refused: Origin {origin:?} is not this console's")
            }
            Refusal::CrossSite(site) => {
                write!(f, "refused: a write from another site (Sec-Fetch-Site: {site})")
            }
        }
    }
}

/// Whether `method` may change something.
pub(crate) fn is_write(method: &str) -> bool {
    !matches!(method, "GET" | "HEAD" | "OPTIONS")
}

/// Checks a request's `Host`, `Origin` and `Sec-Fetch-Site` headers (as received; `None` when
/// absent or not text) against the console's own address.
pub(crate) fn check(
    own: Own,
    method: &str,
    host: Option<&str>,
    origin: Option<&str>,
    fetch_site: Option<&str>,
) -> Result<(), Refusal> {
    let Some(host) = host else { return Err(Refusal::Host(None)) };
    let ours = |name: &str| {
        name.eq_ignore_ascii_case(&format!("127.0.0.1:{}", own.port))
            || name.eq_ignore_ascii_case(&format!("localhost:{}", own.port))
    };
    if !ours(host) {
        return Err(Refusal::Host(Some(host.to_owned())));
    }
    if let Some(origin) = origin {
        let own_origin = origin
            .get(..7)
            .filter(|scheme| scheme.eq_ignore_ascii_case("http://"))
            .is_some_and(|_| ours(&origin[7..]));
        if !own_origin {
            return Err(Refusal::Origin(origin.to_owned()));
        }
    }
    if let Some(site) = fetch_site {
        let same = site.eq_ignore_ascii_case("same-origin") || site.eq_ignore_ascii_case("none");
        if is_write(method) && !same {
            return Err(Refusal::CrossSite(site.to_owned()));
        }
    }
    Ok(())
}

/// Whether a `Content-Type` header is JSON (`application/json`, with any parameters).
pub(crate) fn json_body(content_type: Option<&str>) -> bool {
    content_type
        .and_then(|value| value.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWN: Own = Own { port: 4180 };

    #[test]
    fn only_the_consoles_own_host_and_origin_pass() {
        type Case = (
            &'static str,
            Option<&'static str>,
            Option<&'static str>,
            Option<&'static str>,
            Result<(), Refusal>,
        );
        let host = |h: &str| Err(Refusal::Host(Some(h.to_owned())));
        let origin = |o: &str| Err(Refusal::Origin(o.to_owned()));
        let cases: Vec<Case> = vec![
            // A program: no Origin, no Sec-Fetch-Site.
            ("GET", Some("127.0.0.1:4180"), None, None, Ok(())),
            ("POST", Some("localhost:4180"), None, None, Ok(())),
            ("GET", Some("LOCALHOST:4180"), None, None, Ok(())),
            // The console's own pages.
            (
                "POST",
                Some("127.0.0.1:4180"),
                Some("http://127.0.0.1:4180"),
                Some("same-origin"),
                Ok(()),
            ),
            ("GET", Some("127.0.0.1:4180"), None, Some("none"), Ok(())),
            // A link from another site to a page: a read, let through.
            ("GET", Some("127.0.0.1:4180"), None, Some("cross-site"), Ok(())),
            // DNS rebinding, another port, no Host at all.
            ("GET", Some("evil.example:4180"), None, None, host("evil.example:4180")),
            ("GET", Some("127.0.0.1:4181"), None, None, host("127.0.0.1:4181")),
            ("GET", Some("127.0.0.1"), None, None, host("127.0.0.1")),
            ("GET", Some("[::1]:4180"), None, None, host("[::1]:4180")),
            ("GET", None, None, None, Err(Refusal::Host(None))),
            // Another page's script or form.
            (
                "POST",
                Some("127.0.0.1:4180"),
                Some("http://evil.example"),
                Some("cross-site"),
                origin("http://evil.example"),
            ),
            (
                "GET",
                Some("127.0.0.1:4180"),
                Some("http://evil.example"),
                None,
                origin("http://evil.example"),
            ),
            ("POST", Some("127.0.0.1:4180"), Some("null"), None, origin("null")),
            (
                "POST",
                Some("127.0.0.1:4180"),
                Some("https://127.0.0.1:4180"),
                None,
                origin("https://127.0.0.1:4180"),
            ),
            (
                "POST",
                Some("127.0.0.1:4180"),
                Some("http://127.0.0.1:4181"),
                None,
                origin("http://127.0.0.1:4181"),
            ),
            (
                "POST",
                Some("127.0.0.1:4180"),
                Some("http://127.0.0.1:4180.evil.example"),
                None,
                origin("http://127.0.0.1:4180.evil.example"),
            ),
            // A write from another site without an Origin (an old browser, a stripped header).
            (
                "PATCH",
                Some("127.0.0.1:4180"),
                None,
                Some("cross-site"),
                Err(Refusal::CrossSite("cross-site".into())),
            ),
            (
                "POST",
                Some("127.0.0.1:4180"),
                None,
                Some("same-site"),
                Err(Refusal::CrossSite("same-site".into())),
            ),
        ];
        for (method, host, origin, site, want) in cases {
            assert_eq!(
                check(OWN, method, host, origin, site),
                want,
                "{method} {host:?} {origin:?} {site:?}"
            );
        }
    }

    #[test]
    fn refusals_say_what_was_refused() {
        let cases = [
            (Refusal::Host(None), "refused: the request has no Host header"),
            (
                Refusal::Host(Some("evil.example".into())),
                "refused: Host \"evil.example\" is not this console's (127.0.0.1 only)",
            ),
            (
                Refusal::Origin("http://evil.example".into()),
                "refused: Origin \"http://evil.example\" is not this console's",
            ),
        ];
        for (refusal, want) in cases {
            assert_eq!(refusal.to_string(), want);
        }
    }

    #[test]
    fn writes_carry_json() {
        let cases = [
            (Some("application/json"), true),
            (Some("application/json; charset=utf-8"), true),
            (Some("Application/JSON"), true),
            (Some("text/plain"), false),
            (Some("application/x-www-form-urlencoded"), false),
            (Some("multipart/form-data; boundary=x"), false),
            (Some("application/jsonp"), false),
            (None, false),
        ];
        for (content_type, want) in cases {
            assert_eq!(json_body(content_type), want, "{content_type:?}");
        }
        assert!(is_write("POST") && is_write("PATCH") && is_write("DELETE"));
        assert!(!is_write("GET") && !is_write("HEAD") && !is_write("OPTIONS"));
    }
}
