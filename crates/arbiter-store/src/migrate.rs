//! Embedded, numbered migrations. Each backend has its own SQL files numbered in lock-step,
//! applied in order inside a transaction and recorded in `schema_migrations`.

use sqlx::{Database, Decode, Encode, Executor, Row, Type};

use crate::db::{OrStore, database_error};
use crate::sql;
use crate::{StoreError, rows};

/// A value the migration bookkeeping binds.
pub trait Param<'q, DB: Database>: 'q + Encode<'q, DB> + Type<DB> + Send {}
impl<'q, DB: Database, T: 'q + Encode<'q, DB> + Type<DB> + Send> Param<'q, DB> for T {}

/// Applies the migrations newer than the recorded version, on a connection inside the
/// caller's transaction (which holds the store's own lock: `BEGIN IMMEDIATE` on SQLite, an
/// advisory lock on Postgres). `schema_migrations` must exist.
pub(crate) async fn apply<DB>(conn: &mut DB::Connection, migrations: &[Migration]) -> Result<(), StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: sqlx::IntoArguments<DB>,
    for<'q> i64: Param<'q, DB>,
    for<'q> &'q str: Param<'q, DB>,
    i64: for<'r> Decode<'r, DB> + Type<DB>,
    usize: sqlx::ColumnIndex<DB::Row>,
{
    let current: i64 =
        sqlx::query(sql::CURRENT_VERSION).fetch_one(&mut *conn).await.or_store()?.try_get(0usize).or_store()?;
    let known = migrations.last().map_or(0, |m| m.version);
    if current > known {
        return Err(StoreError::TooNew { found: current, known });
    }
    for m in migrations.iter().filter(|m| m.version > current) {
        sqlx::raw_sql(sqlx::AssertSqlSafe(m.sql)).execute(&mut *conn).await.map_err(|e| StoreError::Migration {
            version: m.version,
            name: m.name,
            source: database_error(e),
        })?;
        sqlx::query(sql::RECORD_MIGRATION)
            .bind(m.version)
            .bind(m.name)
            .bind(rows::now_micros())
            .execute(&mut *conn)
            .await
            .or_store()?;
    }
    Ok(())
}

/// One migration step.
pub struct Migration {
    pub version: i64,
    pub name: &'static str,
    pub sql: &'static str,
}

/// SQLite migrations, in order.
pub const SQLITE: &[Migration] = &[
    Migration { version: 1, name: "runs", sql: include_str!("../migrations/sqlite/0001_runs.sql") },
    Migration { version: 2, name: "plans", sql: include_str!("../migrations/sqlite/0002_plans.sql") },
    Migration { version: 3, name: "plan_branches", sql: include_str!("../migrations/sqlite/0003_plan_branches.sql") },
    Migration { version: 4, name: "workers", sql: include_str!("../migrations/sqlite/0004_workers.sql") },
    Migration { version: 5, name: "plan_units", sql: include_str!("../migrations/sqlite/0005_plan_units.sql") },
    Migration { version: 6, name: "finish_plans", sql: include_str!("../migrations/sqlite/0006_finish_plans.sql") },
    Migration { version: 7, name: "report_plans", sql: include_str!("../migrations/sqlite/0007_report_plans.sql") },
    Migration { version: 8, name: "plan_sources", sql: include_str!("../migrations/sqlite/0008_plan_sources.sql") },
    Migration { version: 9, name: "access_tokens", sql: include_str!("../migrations/sqlite/0009_access_tokens.sql") },
    Migration {
        version: 10,
        name: "batched_reports",
        sql: include_str!("../migrations/sqlite/0010_batched_reports.sql"),
    },
    Migration { version: 11, name: "unit_refusals", sql: include_str!("../migrations/sqlite/0011_unit_refusals.sql") },
    Migration {
        version: 12,
        name: "attempt_settings",
        sql: include_str!("../migrations/sqlite/0012_attempt_settings.sql"),
    },
];

/// Postgres migrations, numbered in lock-step with [`SQLITE`].
pub const POSTGRES: &[Migration] = &[
    Migration { version: 1, name: "runs", sql: include_str!("../migrations/postgres/0001_runs.sql") },
    Migration { version: 2, name: "plans", sql: include_str!("../migrations/postgres/0002_plans.sql") },
    Migration { version: 3, name: "plan_branches", sql: include_str!("../migrations/postgres/0003_plan_branches.sql") },
    Migration { version: 4, name: "workers", sql: include_str!("../migrations/postgres/0004_workers.sql") },
    Migration { version: 5, name: "plan_units", sql: include_str!("../migrations/postgres/0005_plan_units.sql") },
    Migration { version: 6, name: "finish_plans", sql: include_str!("../migrations/postgres/0006_finish_plans.sql") },
    Migration { version: 7, name: "report_plans", sql: include_str!("../migrations/postgres/0007_report_plans.sql") },
    Migration { version: 8, name: "plan_sources", sql: include_str!("../migrations/postgres/0008_plan_sources.sql") },
    Migration { version: 9, name: "access_tokens", sql: include_str!("../migrations/postgres/0009_access_tokens.sql") },
    Migration {
        version: 10,
        name: "batched_reports",
        sql: include_str!("../migrations/postgres/0010_batched_reports.sql"),
    },
    Migration {
        version: 11,
        name: "unit_refusals",
        sql: include_str!("../migrations/postgres/0011_unit_refusals.sql"),
    },
    Migration {
        version: 12,
        name: "attempt_settings",
        sql: include_str!("../migrations/postgres/0012_attempt_settings.sql"),
    },
];
