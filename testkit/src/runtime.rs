//! The runtime most end-to-end tests build: a `MemoryStore` they can read back, the virtual
//! clock, the invariant crate's live validator on every session log, one scripted route named
//! `mock` and the `echo` tool; and its shutdown, after which nothing may be left running.

use std::sync::Arc;

use rein_runtime::clock::VirtualClock;
use rein_runtime::provider::Adapter;
use rein_runtime::runtime::{Route, Runtime, RuntimeBuilder};
use rein_runtime::session::Session;
use rein_runtime::store::memory::MemoryStore;
use rein_runtime::tool::echo::EchoTool;

/// A builder over `store` with `adapter` on the route `mock` serving `model`.
pub fn builder(store: &MemoryStore, adapter: Arc<dyn Adapter>, model: &str) -> RuntimeBuilder {
    Runtime::builder()
        .validator(crate::log::live_invariant)
        .store(Arc::new(store.clone()))
        .clock(Arc::new(VirtualClock::start()))
        .route(Route::new("mock", adapter).model(model))
        .tool(Arc::new(EchoTool))
}

/// Builds the runtime and opens its session `s`.
pub async fn start(builder: RuntimeBuilder) -> (Runtime, Session) {
    let runtime = builder.build().await.expect("the runtime builds");
    let session = runtime.session("s").await.expect("the session opens");
    (runtime, session)
}

/// Shuts `runtime` down and checks nothing is left running: no actor, no task.
pub async fn shut_down(runtime: &Runtime) {
    runtime.shutdown().await;
    assert_eq!(runtime.census().actors(), 0, "no actor outlives shutdown");
    assert_eq!(runtime.census().tasks(), 0, "no task outlives shutdown");
}
