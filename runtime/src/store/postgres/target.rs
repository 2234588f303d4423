//! Where a [`PostgresStore`](super::PostgresStore) connects: a `postgres://` URL, its password
//! kept out of every message.
//!
//! The password comes from the URL (`postgres://USER:PASSWORD@HOST/DB`) or, when the URL has
//! none, from `PGPASSWORD`. It lives only in the [`tokio_postgres::Config`] handed to the
//! driver: what is shown — in errors, in `Debug`, in the CLI's output — is
//! [`Target::shown`], the URL without it (`postgres://USER@HOST:PORT/DB`).

use std::str::FromStr;

/// A parsed `postgres://` URL.
#[derive(Clone)]
pub struct Target {
    pub(super) config: tokio_postgres::Config,
    shown: String,
}

impl Target {
    /// Parses `url` (`postgres://` or `postgresql://`), taking the password from `PGPASSWORD`
    /// when the URL has none. The error names the URL without its password.
    pub fn parse(url: &str) -> Result<Self, String> {
        Self::parse_with(url, std::env::var("PGPASSWORD").ok())
    }

    /// [`Target::parse`] with `pgpassword` standing for `PGPASSWORD`.
    pub fn parse_with(url: &str, pgpassword: Option<String>) -> Result<Self, String> {
        let redacted = redact(url);
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(format!("{redacted}: not a PostgreSQL URL (postgres://USER@HOST/DB)"));
        }
        let mut config = tokio_postgres::Config::from_str(url)
            // The driver's message names the option at fault, never its value.
            .map_err(|e| format!("{redacted}: not a valid PostgreSQL URL: {e}"))?;
        if config.get_user().is_none_or(str::is_empty) {
            return Err(format!("{redacted}: the URL names no user (postgres://USER@HOST/DB)"));
        }
        if config.get_password().is_none()
            && let Some(password) = pgpassword.filter(|p| !p.is_empty())
        {
            config.password(password);
        }
        let shown = show(&config);
        Ok(Self { config, shown })
    }

    /// The driver's configuration, password included (its `Debug` does not show it): for a
    /// reader of its own, such as `rein check --postgres`.
    pub fn config(&self) -> &tokio_postgres::Config {
        &self.config
    }

    /// The URL without its password: `postgres://USER@HOST:PORT/DB`.
    pub fn shown(&self) -> &str {
        &self.shown
    }
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

/// `postgres://USER@HOST:PORT/DB` from a config.
fn show(config: &tokio_postgres::Config) -> String {
    use tokio_postgres::config::Host;
    let user = config.get_user().unwrap_or("");
    let ports = config.get_ports();
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let name = match host {
                Host::Tcp(name) => name.clone(),
                Host::Unix(path) => path.display().to_string(),
            };
            let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
            format!("{name}:{port}")
        })
        .collect();
    let db = config.get_dbname().unwrap_or(user);
    format!("postgres://{user}@{}/{db}", hosts.join(","))
}

/// `url` with the password of its authority (`USER:PASSWORD@`) removed, and any query
/// (`?password=…` and the like) cut: for messages about a URL that may not even parse.
pub fn redact(url: &str) -> String {
    let url = url.split('?').next().unwrap_or("");
    let Some((scheme, rest)) = url.split_once("://") else {
        return "the URL".to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{user}@{host}")
        }
        None => authority.to_owned(),
    };
    format!("{scheme}://{authority}{path}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_shown_without_its_password() {
        let cases = [
            ("postgres://u:secret@127.0.0.1:5433/db", None, "postgres://u@127.0.0.1:5433/db", true),
            ("postgresql://u@localhost/db", None, "postgres://u@localhost:5432/db", false),
            ("postgres://u@h/db", Some("fromenv"), "postgres://u@h:5432/db", true),
            ("postgres://u:inurl@h/db", Some("fromenv"), "postgres://u@h:5432/db", true),
            ("postgres://u@h", None, "postgres://u@h:5432/u", false),
        ];
        for (url, env, shown, has_password) in cases {
            let target = Target::parse_with(url, env.map(str::to_owned)).unwrap();
            assert_eq!(target.shown(), shown, "{url}");
            assert_eq!(format!("{target:?}"), shown);
            assert_eq!(target.config.get_password().is_some(), has_password, "{url}");
        }
        let target = Target::parse_with("postgres://u:inurl@h/db", Some("env".into())).unwrap();
        assert_eq!(target.config.get_password(), Some(&b"inurl"[..]), "the URL's wins");
    }

    #[test]
    fn a_bad_url_is_refused_naming_it_without_its_password() {
        let cases = [
            ("mysql://u:secret@h/db", "mysql://u@h/db: not a PostgreSQL URL"),
            ("postgres://u:secret@h:notaport/db", "postgres://u@h:notaport/db: not a valid"),
            ("postgres://:secret@h/db", "postgres://@h/db: the URL names no user"),
            ("postgres://u@h/db?password=secret&x=1", "postgres://u@h/db: not a valid"),
            ("nonsense secret", "the URL: not a PostgreSQL URL"),
        ];
        for (url, want) in cases {
            let err = Target::parse_with(url, None).unwrap_err();
            assert!(err.starts_with(want), "{url}: {err}");
            assert!(!err.contains("secret"), "{url}: {err}");
        }
    }

    #[test]
    fn redaction_keeps_user_host_and_path() {
        let cases = [
            ("postgres://u:p@h:1/d", "postgres://u@h:1/d"),
            ("postgres://u:p:q@h/d", "postgres://u@h/d"),
            ("postgres://h/d?password=p", "postgres://h/d"),
            ("postgres://u:p@h", "postgres://u@h"),
        ];
        for (url, want) in cases {
            assert_eq!(redact(url), want, "{url}");
        }
    }
}
