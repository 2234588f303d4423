//! The breakers of the chat's routes: each change of a route's circuit breaker (it opened, it
//! closed), as the runtime publishes it (`Runtime::route_health_changes`), for the chat's status
//! line. Only the routes with route health (`rein.toml`'s `health`) are watched; with none, the
//! chat waits on nothing.

use futures::future::select_all;
use rein_runtime::route_health::HealthSnapshot;
use rein_runtime::runtime::Runtime;
use tokio::sync::watch;

/// The watched routes. See the module docs.
pub(crate) struct Breakers {
    watched: Vec<(String, watch::Receiver<HealthSnapshot>)>,
}

impl Breakers {
    /// Watches every route of `runtime` that has route health, from now on.
    pub(crate) fn of(runtime: &Runtime) -> Self {
        let watched = runtime
            .health_routes()
            .into_iter()
            .filter_map(|route| {
                let changes = runtime.route_health_changes(&route)?;
                Some((route, changes))
            })
            .collect();
        Self { watched }
    }

    /// The next change: the route and its snapshot at the change. Never resolves when no route
    /// is watched (a route whose runtime is gone stops being watched).
    pub(crate) async fn changed(&mut self) -> (String, HealthSnapshot) {
        loop {
            if self.watched.is_empty() {
                return std::future::pending().await;
            }
            let waits = self
                .watched
                .iter_mut()
                .enumerate()
                .map(|(i, (_, changes))| Box::pin(async move { (i, changes.changed().await) }));
            let ((i, changed), _, others) = select_all(waits).await;
            drop(others);
            if changed.is_err() {
                self.watched.remove(i);
                continue;
            }
            let (route, changes) = &mut self.watched[i];
            return (route.clone(), changes.borrow_and_update().clone());
        }
    }

    /// The changes not shown yet, at once (a change that came as the turn ended).
    pub(crate) fn unseen(&mut self) -> Vec<(String, HealthSnapshot)> {
        self.watched
            .iter_mut()
            .filter(|(_, changes)| changes.has_changed().unwrap_or(false))
            .map(|(route, changes)| (route.clone(), changes.borrow_and_update().clone()))
            .collect()
    }
}
