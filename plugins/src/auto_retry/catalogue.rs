//! The failure codes `auto-retry` knows, in three groups, as data a settings page or a CLI
//! renders (see `docs/runtime-semantics.md`, "auto-retry").
//!
//! - **On by default** ([`CodeGroup::Default`]): the default `retryableCodes` — the official
//!   executor's transient codes (taking them over extends its budget), the two adapter
//!   catch-alls (`PROVIDER_ERROR`, `PI_AI_ERROR`) and `STREAM_CLOSED`. The last is a deliberate
//!   divergence from seed 001's seven codes: the official executor leaves a stream that ended
//!   before its end marker terminal, and a one-off truncation (seen on real servers) then loses
//!   the turn, though it is as transient as a dropped connection.
//! - **Opt in** ([`CodeGroup::OptIn`]): as likely permanent as transient (a quota, a relay's 400,
//!   an untyped error); retried only when a deployment lists them.
//! - **Never retried** ([`CodeGroup::Never`]): the hard floor
//!   ([`rein_runtime::failure::HARD_FLOOR`]) — checked before the allowlist, so listing one of
//!   them has no effect. A page shows them as switches that cannot be turned on: that says both
//!   that the codes exist and that they are not a preference.
//!
//! A code outside the catalogue (one an adapter invented, `HTTP_418`) may still be listed in
//! `retryableCodes` ("other codes"): [`CodeGroup::of`] answers `None` for it.
//!
//! The catalogue serializes as
//! `{"groups": [{"group": "default", "title": "On by default", "retried": "byDefault",
//! "codes": [{"code": "EMPTY_RESPONSE", "description": "…"}, …]}, …]}`.

use rein_runtime::failure;
use serde::Serialize;

/// One code of the catalogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CodeInfo {
    /// The failure code.
    pub code: &'static str,
    /// What it means, in a few words.
    pub description: &'static str,
}

/// The three groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum CodeGroup {
    /// In the default `retryableCodes`.
    Default,
    /// Retried only when listed.
    OptIn,
    /// The hard floor: never retried, whatever is listed.
    Never,
}

/// Whether (and when) the codes of a group are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Retried {
    /// Unless removed from `retryableCodes`.
    ByDefault,
    /// When added to `retryableCodes`.
    WhenListed,
    /// Never (a switch that cannot be turned on).
    Never,
}

/// One group of the catalogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Group {
    /// Which group.
    pub group: CodeGroup,
    /// Its heading.
    pub title: &'static str,
    /// Whether its codes are retried.
    pub retried: Retried,
    /// Its codes, in display order.
    pub codes: &'static [CodeInfo],
}

/// The catalogue: the three groups, in display order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Catalogue {
    /// On by default, opt in, never retried.
    pub groups: [Group; 3],
}

const fn info(code: &'static str, description: &'static str) -> CodeInfo {
    CodeInfo { code, description }
}

/// The code `@deepseek-ai/dsh-llm-pi-ai`'s adapter uses for everything it does not classify.
pub const PI_AI_ERROR: &str = "PI_AI_ERROR";

const DEFAULT: &[CodeInfo] = &[
    info(failure::EMPTY_RESPONSE, "the provider answered with no content"),
    info(failure::RATE_LIMIT, "the provider is throttling requests (HTTP 429)"),
    info(failure::SERVER, "the provider failed on its side (HTTP 5xx)"),
    info(failure::TIMEOUT, "the request took too long"),
    info(failure::TRANSPORT, "the connection failed or dropped"),
    info(failure::PROVIDER_ERROR, "an adapter's catch-all for provider errors"),
    info(PI_AI_ERROR, "the pi-ai adapter's catch-all"),
    info(failure::STREAM_CLOSED, "the stream ended before its end marker"),
];

const OPT_IN: &[CodeInfo] = &[
    info(failure::QUOTA, "a usage quota is used up (it may refill, or not)"),
    info(failure::ACCOUNT_QUOTA, "the account's quota or balance is used up"),
    info(failure::INVALID_REQUEST, "the provider rejected the request (HTTP 400)"),
    info(failure::UNKNOWN, "an error the adapter did not classify"),
];

const NEVER: &[CodeInfo] = &[
    info(failure::AUTH, "authentication failed"),
    info(failure::MISSING_CREDENTIAL, "no credential is configured"),
    info(failure::INVALID_CREDENTIAL, "the credential was rejected"),
    info(failure::NO_ADAPTER, "no adapter serves the route"),
    info(failure::INVALID_MODEL, "the model does not exist or is not available"),
    info(failure::INVALID_CONFIG, "the route's configuration is invalid"),
    info(
        failure::CONTEXT_WINDOW_EXCEEDED,
        "the request exceeds the context window (compaction's job)",
    ),
    info(failure::IMAGE_OFFLOAD_REQUIRED, "images must be offloaded first"),
    info(failure::ABORTED, "the request was cancelled"),
    info(failure::CIRCUIT_OPEN, "the route's circuit breaker is open (no request was sent)"),
];

/// The catalogue.
pub const CATALOGUE: Catalogue = Catalogue {
    groups: [
        Group {
            group: CodeGroup::Default,
            title: "On by default",
            retried: Retried::ByDefault,
            codes: DEFAULT,
        },
        Group {
            group: CodeGroup::OptIn,
            title: "Opt in",
            retried: Retried::WhenListed,
            codes: OPT_IN,
        },
        Group {
            group: CodeGroup::Never,
            title: "Never retried",
            retried: Retried::Never,
            codes: NEVER,
        },
    ],
};

/// The default `retryableCodes`: the codes of the "on by default" group.
pub const DEFAULT_CODES: [&str; 8] = [
    failure::EMPTY_RESPONSE,
    failure::RATE_LIMIT,
    failure::SERVER,
    failure::TIMEOUT,
    failure::TRANSPORT,
    failure::PROVIDER_ERROR,
    PI_AI_ERROR,
    failure::STREAM_CLOSED,
];

impl CodeGroup {
    /// The group `code` is in; `None` for a code outside the catalogue ("other codes").
    pub fn of(code: &str) -> Option<CodeGroup> {
        CATALOGUE
            .groups
            .iter()
            .find(|group| group.codes.iter().any(|c| c.code == code))
            .map(|group| group.group)
    }
}

/// Whether `code` is in the hard floor (never retried, whatever is listed).
pub fn is_hard_floor(code: &str) -> bool {
    failure::HARD_FLOOR.contains(&code)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn codes(group: CodeGroup) -> Vec<&'static str> {
        let group = CATALOGUE.groups.iter().find(|g| g.group == group).unwrap();
        group.codes.iter().map(|c| c.code).collect()
    }

    #[test]
    fn the_groups_are_the_seeds_and_stream_closed() {
        assert_eq!(
            codes(CodeGroup::Default),
            [
                "EMPTY_RESPONSE",
                "RATE_LIMIT",
                "SERVER",
                "TIMEOUT",
                "TRANSPORT",
                "PROVIDER_ERROR",
                "PI_AI_ERROR",
                "STREAM_CLOSED"
            ]
        );
        assert_eq!(codes(CodeGroup::Default), DEFAULT_CODES);
        assert_eq!(
            codes(CodeGroup::OptIn),
            ["QUOTA", "ACCOUNT_QUOTA", "INVALID_REQUEST", "UNKNOWN"]
        );
        assert_eq!(
            codes(CodeGroup::Never),
            [
                "AUTH",
                "MISSING_CREDENTIAL",
                "INVALID_CREDENTIAL",
                "NO_ADAPTER",
                "INVALID_MODEL",
                "INVALID_CONFIG",
                "CONTEXT_WINDOW_EXCEEDED",
                "IMAGE_OFFLOAD_REQUIRED",
                "ABORTED",
                "CIRCUIT_OPEN"
            ]
        );
        assert_eq!(codes(CodeGroup::Never), failure::HARD_FLOOR, "the invariant's hard floor");
    }

    #[test]
    fn every_code_is_in_one_group_with_a_description() {
        let all: Vec<&CodeInfo> = CATALOGUE.groups.iter().flat_map(|g| g.codes).collect();
        for info in &all {
            assert!(!info.description.is_empty(), "{}", info.code);
            assert_eq!(all.iter().filter(|i| i.code == info.code).count(), 1, "{}", info.code);
        }
        let cases = [
            ("SERVER", Some(CodeGroup::Default)),
            ("PI_AI_ERROR", Some(CodeGroup::Default)),
            ("QUOTA", Some(CodeGroup::OptIn)),
            ("ABORTED", Some(CodeGroup::Never)),
            ("CIRCUIT_OPEN", Some(CodeGroup::Never)),
            ("STREAM_CLOSED", Some(CodeGroup::Default)),
            ("HTTP_418", None),
            ("server", None),
        ];
        for (code, group) in cases {
            assert_eq!(CodeGroup::of(code), group, "{code}");
            assert_eq!(is_hard_floor(code), group == Some(CodeGroup::Never), "{code}");
        }
    }

    #[test]
    fn the_catalogue_serializes_for_a_settings_page() {
        let value = serde_json::to_value(CATALOGUE).unwrap();
        let groups = value["groups"].as_array().unwrap();
        let heads: Vec<(&str, &str, &str)> = groups
            .iter()
            .map(|g| {
                (
                    g["group"].as_str().unwrap(),
                    g["title"].as_str().unwrap(),
                    g["retried"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            heads,
            [
                ("default", "On by default", "byDefault"),
                ("optIn", "Opt in", "whenListed"),
                ("never", "Never retried", "never"),
            ]
        );
        assert_eq!(
            groups[1]["codes"][0],
            json!({"code": "QUOTA", "description": "a usage quota is used up (it may refill, or not)"})
        );
    }
}
