//! The ground floor: the one future type the runtime's traits (stores, adapters, plugins, tools)
//! return. It names nothing of the crate, so every module can use it without reaching up.

/// A boxed, sendable future: what the runtime's traits (stores, adapters, plugins, tools) return.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;
