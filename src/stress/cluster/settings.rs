//! Plugin settings across the cluster: the changes the agents ask for, made through the API of a
//! random node ([`chaos`]), and the check that every node ends up showing the same settings
//! ([`converged`]) — a patch saved on one node is in force on all, a stale one refused on any.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hyper::Method;
use rand::Rng;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::http::{Failed, Http};
use super::members::Members;
use crate::stress::chaos::Request;
use crate::stress::plan::{self, StressRng};
use crate::stress::summary::PluginChaos;

/// How long the nodes get to show the same settings at the end.
const CONVERGE_WITHIN: Duration = Duration::from_secs(10);

/// Serves the agents' requests until they are all gone: each settings change goes to a random
/// node up, to a random plugin it shows as editable, one in ten on a revision one ahead of the
/// current one (to be refused as stale). Disposals are not made: a node's plugins cannot be
/// disposed through its API (counted as asked).
pub(crate) async fn chaos(
    http: Http,
    members: Arc<Members>,
    mut rng: StressRng,
    backoff_ms: u64,
    mut requests: mpsc::UnboundedReceiver<Request>,
) -> PluginChaos {
    let mut report = PluginChaos::default();
    while let Some(request) = requests.recv().await {
        match request {
            Request::Dispose => report.dispose_requests += 1,
            Request::Configure => {
                report.config_requests += 1;
                let kind = configure(&http, &members, &mut rng, backoff_ms).await;
                *report.config.entry(kind.to_owned()).or_default() += 1;
            }
        }
    }
    report
}

async fn configure(
    http: &Http,
    members: &Members,
    rng: &mut StressRng,
    backoff_ms: u64,
) -> &'static str {
    let up = members.up();
    let Some(node) = super::choice::victim(rng, &up) else { return "unreachable" };
    let Some(addr) = members.addr(node) else { return "unreachable" };
    let plugins = match http.json(Method::GET, &format!("{addr}/api/plugins"), None).await {
        Ok(listed) => listed["plugins"].as_array().cloned().unwrap_or_default(),
        Err(_) => return "unreachable",
    };
    let editable: Vec<&Value> = plugins.iter().filter(|p| p["editable"] == true).collect();
    if editable.is_empty() {
        return "none";
    }
    let plugin = editable[rng.random_range(0..editable.len())];
    let (Some(name), Some(revision)) = (plugin["name"].as_str(), plugin["revision"].as_u64())
    else {
        return "none";
    };
    let stale = rng.random_bool(0.1);
    let patch = plan::patch(name, backoff_ms, rng);
    let base = if stale { revision + 1 } else { revision };
    let body = json!({"revision": base, "patch": patch});
    let url = format!("{addr}/api/plugins/{name}");
    match http.json(Method::PATCH, &url, Some(&body)).await {
        Ok(_) => "accepted",
        Err(Failed::Refused { kind, .. }) => match kind.as_str() {
            "stale" => "stale",
            "invalid" => "invalid",
            "readOnly" => "read-only",
            "notFound" => "gone",
            "notSaved" => "not-saved",
            _ => "refused",
        },
        Err(Failed::Unreachable(_)) => "unreachable",
    }
}

/// The settings a node shows: plugin → (revision, settings).
type Shown = BTreeMap<String, (u64, Value)>;

/// Whether every node up shows the same settings, waiting up to [`CONVERGE_WITHIN`] for them
/// to; what differs when they do not.
pub(crate) async fn converged(http: &Http, members: &Members) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + CONVERGE_WITHIN;
    loop {
        let difference = difference(http, members).await;
        match difference {
            None => return Ok(()),
            Some(what) if tokio::time::Instant::now() >= deadline => return Err(what),
            Some(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// What differs between the nodes' settings now (`None`: nothing).
async fn difference(http: &Http, members: &Members) -> Option<String> {
    let mut first: Option<(String, Shown)> = None;
    for node in members.up() {
        let addr = members.addr(node)?;
        let id = members.id(node).to_owned();
        let shown = match http.json(Method::GET, &format!("{addr}/api/plugins"), None).await {
            Ok(listed) => shown(&listed),
            Err(e) => return Some(format!("node {id} did not show its settings: {e}")),
        };
        match &first {
            None => first = Some((id, shown)),
            Some((first_id, first_shown)) if *first_shown != shown => {
                let plugin = first_shown
                    .iter()
                    .find(|(name, value)| shown.get(*name) != Some(value))
                    .map(|(name, _)| name.clone())
                    .or_else(|| shown.keys().find(|n| !first_shown.contains_key(*n)).cloned())
                    .unwrap_or_default();
                let at =
                    |s: &Shown| s.get(&plugin).map_or("none".to_owned(), |(r, _)| r.to_string());
                return Some(format!(
                    "{plugin}: revision {} on {first_id}, {} on {id}",
                    at(first_shown),
                    at(&shown)
                ));
            }
            Some(_) => {}
        }
    }
    None
}

fn shown(listed: &Value) -> Shown {
    listed["plugins"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let name = p["name"].as_str()?.to_owned();
            Some((name, (p["revision"].as_u64().unwrap_or(0), p["settings"].clone())))
        })
        .collect()
}
