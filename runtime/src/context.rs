//! What every actor of a runtime shares: its store, clock, routes, plugin chain, tools and
//! limits ([`Shared`]), and a provider route as the runtime holds it ([`Route`]).
//!
//! # Why a module of its own
//!
//! The session, turn and step actors all read the same configuration, and the runtime builds
//! it. Kept here — depending on the pieces it holds, never on an actor — it lets the actors
//! depend on it without depending on one another or on the runtime that spawns them.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ractor::ActorRef;

use crate::census::Census;
use crate::clock::Clock;
use crate::fault::Faults;
use crate::plugin_host::PluginChain;
use crate::provider::Generation;
use crate::provider::message::ProviderMsg;
use crate::resume::Resume;
use crate::retry_policy::RetryPolicy;
use crate::route_health::HealthReport;
use crate::route_health::cell::HealthCell;
use crate::store::SessionStore;
use crate::tool::Toolbox;
use crate::validator::Validator;

/// Makes a fresh validator for each session log (a live invariant checker, for example).
pub type ValidatorFactory = Arc<dyn Fn() -> Box<dyn Validator> + Send + Sync>;

/// A provider route, as the runtime holds it.
pub(crate) struct ServedRoute {
    pub(crate) name: String,
    pub(crate) model: String,
    pub(crate) generation: Generation,
    pub(crate) policy: Option<RetryPolicy>,
    /// Its retry budget and circuit breaker (`None`: route health is off).
    pub(crate) health: Option<Arc<HealthCell>>,
    pub(crate) actor: ActorRef<ProviderMsg>,
}

/// A route as a turn or a step uses it: the name it was asked by (a prompt, a retry, a
/// `route/switched`), and the route registered under that name, if any (none: its attempts fail
/// `NO_ADAPTER`).
#[derive(Clone)]
pub(crate) struct RouteUse {
    pub(crate) name: String,
    pub(crate) served: Option<Arc<ServedRoute>>,
}

impl RouteUse {
    /// The model its requests ask (empty when no route serves the name).
    pub(crate) fn model(&self) -> String {
        self.served.as_ref().map(|route| route.model.clone()).unwrap_or_default()
    }

    /// `prompt`'s generation settings over the route's (the prompt's alone when no route serves
    /// the name).
    pub(crate) fn generation(&self, prompt: &Generation) -> Generation {
        match &self.served {
            Some(route) => prompt.or(&route.generation),
            None => prompt.clone(),
        }
    }
}

/// What every actor of a runtime shares.
pub(crate) struct Shared {
    pub(crate) store: Arc<dyn SessionStore>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) routes: HashMap<String, Arc<ServedRoute>>,
    pub(crate) default_route: Option<String>,
    pub(crate) chain: Arc<PluginChain>,
    pub(crate) tools: Toolbox,
    pub(crate) max_steps: u32,
    pub(crate) default_policy: Option<RetryPolicy>,
    pub(crate) validators: Vec<ValidatorFactory>,
    pub(crate) census: Census,
    /// How long an idle session stays awake before it hibernates.
    pub(crate) idle_grace: Duration,
    /// Crashes to inject into the runtime's own actors (tests).
    pub(crate) faults: Faults,
    /// Whether a reopened session continues the turn a crash left open.
    pub(crate) resume: Resume,
}

impl Shared {
    /// The route named `name`, as a turn or a step uses it.
    pub(crate) fn route(&self, name: &str) -> RouteUse {
        RouteUse { name: name.to_owned(), served: self.routes.get(name).cloned() }
    }

    /// Every route's health now (the routes with health settings).
    pub(crate) fn health_report(&self) -> HealthReport {
        self.routes.iter().fold(HealthReport::new(), |report, (name, route)| match &route.health {
            Some(cell) => report.with(name.clone(), cell.snapshot()),
            None => report,
        })
    }
}
