//! Embedded, numbered migrations. Each backend has its own SQL files numbered in lock-step,
//! applied in order inside a transaction and recorded in `schema_migrations`.

/// One migration step.
pub struct Migration {
    pub version: i64,
    pub name: &'static str,
    pub sql: &'static str,
}

/// SQLite migrations, in order.
pub const SQLITE: &[Migration] =
    &[Migration { version: 1, name: "runs", sql: include_str!("../migrations/sqlite/0001_runs.sql") }];

/// Postgres migrations, numbered in lock-step with [`SQLITE`].
pub const POSTGRES: &[Migration] =
    &[Migration { version: 1, name: "runs", sql: include_str!("../migrations/postgres/0001_runs.sql") }];
