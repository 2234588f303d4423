//! Test fixtures shared by rein's crates (not published; a path dev-dependency).
//!
//! - [`postgres`]: a throwaway PostgreSQL cluster in a temporary directory ([`PgCluster`]).

pub mod postgres;

pub use postgres::PgCluster;
