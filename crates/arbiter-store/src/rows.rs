//! Rows to records, once for both stores: the decoding is generic over the database, so
//! SQLite and Postgres rows map to the same types through the same code.

use crate::db::{Db, Rec};
use crate::{CandidateRecord, RunRecord, StoreError};
use arbiter_core::event::{Event, EventKind};
use arbiter_core::ids::{CandidateId, RunId};
use arbiter_core::status::{CandidateStatus, RunStatus};
use arbiter_core::time::Timestamp;

pub fn run<D: Db>(row: &Rec<D>) -> Result<RunRecord, StoreError> {
    let id: String = row.try_get("id")?;
    let status: String = row.try_get("status")?;
    let winner: Option<String> = row.try_get("winner")?;
    Ok(RunRecord {
        id: RunId::parse(&id).map_err(|_| StoreError::Corrupt { column: "runs.id", value: id.clone() })?,
        repo: row.try_get("repo")?,
        task_title: row.try_get("task_title")?,
        status: RunStatus::parse(&status).ok_or(StoreError::Corrupt { column: "runs.status", value: status })?,
        base_commit: row.try_get("base_commit")?,
        run_dir: row.try_get("run_dir")?,
        candidates: row.try_get::<i64, _>("candidates")? as u32,
        winner: winner.and_then(|w| CandidateId::parse(&w)),
        started_at: Timestamp(row.try_get("started_at")?),
        finished_at: row.try_get::<Option<i64>, _>("finished_at")?.map(Timestamp),
    })
}

pub fn candidate<D: Db>(run: &RunId, row: &Rec<D>) -> Result<CandidateRecord, StoreError> {
    let id: String = row.try_get("id")?;
    let status: String = row.try_get("status")?;
    Ok(CandidateRecord {
        run_id: run.clone(),
        id: CandidateId::parse(&id).ok_or(StoreError::Corrupt { column: "candidates.id", value: id })?,
        index: row.try_get::<i64, _>("idx")? as usize,
        runner: row.try_get("runner")?,
        status: serde_json::from_value::<CandidateStatus>(serde_json::Value::String(status.clone()))
            .map_err(|_| StoreError::Corrupt { column: "candidates.status", value: status })?,
        exit_code: row.try_get("exit_code")?,
        normalized_hash: row.try_get("normalized_hash")?,
        eligible: row.try_get("eligible")?,
        rank: row.try_get::<Option<i64>, _>("rank")?.map(|r| r as usize),
    })
}

pub fn event<D: Db>(run: &RunId, row: &Rec<D>) -> Result<Event, StoreError> {
    let kind: String = row.try_get("kind")?;
    let data: String = row.try_get("data")?;
    let candidate: Option<String> = row.try_get("candidate")?;
    Ok(Event {
        seq: row.try_get::<i64, _>("seq")? as u64,
        run_id: run.clone(),
        at: Timestamp(row.try_get("at")?),
        kind: serde_json::from_value::<EventKind>(serde_json::Value::String(kind.clone()))
            .map_err(|_| StoreError::Corrupt { column: "events.kind", value: kind })?,
        candidate: candidate.and_then(|c| CandidateId::parse(&c)),
        data: serde_json::from_str(&data).map_err(|_| StoreError::Corrupt { column: "events.data", value: data })?,
    })
}

/// Microseconds since the epoch, for `schema_migrations.applied_at`.
pub fn now_micros() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0)
}
