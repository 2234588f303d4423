//! The baseline of the waterfall hop: ractor `call` round trips — a message to an actor whose
//! handler replies at once, and the reply — measured on the same tokio runtime (multi-threaded,
//! one worker per core) and from the same kind of task as the metric it is the baseline of.

use std::time::{Duration, Instant};

use ractor::rpc::CallResult;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

/// An actor that answers every call at once.
struct Echo;

impl Actor for Echo {
    type Msg = RpcReplyPort<()>;
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<Self::Msg>, (): ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }

    async fn handle(
        &self,
        _: ActorRef<Self::Msg>,
        reply: Self::Msg,
        (): &mut (),
    ) -> Result<(), ActorProcessingErr> {
        let _ = reply.send(());
        Ok(())
    }
}

/// A running echo actor.
pub(crate) struct RoundTrip {
    echo: ActorRef<RpcReplyPort<()>>,
}

impl RoundTrip {
    /// Spawns the echo actor and warms it up.
    pub(crate) async fn start() -> anyhow::Result<Self> {
        let (echo, _) = Actor::spawn(None, Echo, ()).await?;
        let trip = Self { echo };
        trip.calls(1_000).await?;
        Ok(trip)
    }

    /// The mean time of one round trip over `n` calls in a row.
    pub(crate) async fn calls(&self, n: u32) -> anyhow::Result<Duration> {
        let start = Instant::now();
        for _ in 0..n {
            match self.echo.call(|reply| reply, None).await? {
                CallResult::Success(()) => {}
                other => anyhow::bail!("the echo actor did not answer: {other:?}"),
            }
        }
        Ok(start.elapsed() / n)
    }

    /// The mean time of one round trip over `n` calls in a row, each to the next of `trips`
    /// (round robin): the shape of a walk, whose every hop is a different actor.
    pub(crate) async fn calls_across(trips: &[RoundTrip], n: u32) -> anyhow::Result<Duration> {
        let start = Instant::now();
        for trip in trips.iter().cycle().take(n as usize) {
            trip.calls(1).await?;
        }
        Ok(start.elapsed() / n)
    }

    /// Stops the echo actor.
    pub(crate) async fn stop(self) {
        let _ = self.echo.stop_and_wait(None, None).await;
    }
}
