//! Turns parked in a retry wait: the set-up of the mass-cancel metric.
//!
//! A runtime whose only route fails every attempt ([`Down`]) and whose only plugin is
//! [`Parking`]: each prompt's first attempt fails, `request/error` is written, the waterfall
//! offers the failure to the plugin, and the plugin's recovery waits an hour for its retry. The
//! session, its log, the turn and the step stay alive meanwhile: "a turn parked in a retry wait"
//! (`docs/performance.md`, "The system benchmark").

use std::sync::Arc;

use rein::runtime::runtime::{Route, Runtime};
use rein::runtime::session::Session;
use rein::runtime::session::TurnHandle;
use rein::runtime::store::SessionStore;

use crate::doubles::{Down, Parking};

/// A runtime whose turns park.
pub(crate) struct ParkingRuntime {
    pub(crate) agents: Runtime,
    pub(crate) parking: Arc<Parking>,
    parked: usize,
}

/// A parked turn and its session (as a caller holds them).
pub(crate) struct Parked {
    pub(crate) session: Session,
    pub(crate) turn: TurnHandle,
}

impl ParkingRuntime {
    /// A runtime over `store`.
    pub(crate) async fn new(store: Arc<dyn SessionStore>) -> anyhow::Result<Self> {
        let parking = Parking::new();
        let agents = Runtime::builder()
            .store(store)
            .route(Route::new("down", Down::new()?).model("down-1"))
            .plugin(parking.clone())
            .build()
            .await?;
        Ok(Self { agents, parking, parked: 0 })
    }

    /// Opens sessions `{prefix}-0` … `{prefix}-{n-1}`, prompts each once, and resolves when all
    /// `n` turns are parked in the plugin's wait.
    pub(crate) async fn park(&mut self, prefix: &str, n: usize) -> anyhow::Result<Vec<Parked>> {
        let mut parked = Vec::with_capacity(n);
        for i in 0..n {
            let session = self.agents.session(&format!("{prefix}-{i}")).await?;
            let turn = session.prompt("hi")?;
            parked.push(Parked { session, turn });
        }
        self.parked += n;
        self.parking.parked(self.parked).await;
        Ok(parked)
    }
}
