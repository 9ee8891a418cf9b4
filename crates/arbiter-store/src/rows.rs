//! Rows to records, once for both stores: the decoding is generic over the database, so
//! SQLite and Postgres rows map to the same types through the same code.

use crate::db::{Db, Decodes, Rec};
use crate::{CandidateRecord, RunRecord, StoreError};
use arbiter_core::event::{Event, EventKind};
use arbiter_core::ids::{CandidateId, RunId};
use arbiter_core::status::{CandidateStatus, RunStatus};
use arbiter_core::time::Timestamp;

pub(crate) fn get<D: Db, T>(row: &Rec<D>, column: &str) -> Result<T, StoreError>
where
    D: Decodes<T>,
{
    Ok(row.try_get(column)?)
}

pub fn run<D: Db>(row: &Rec<D>) -> Result<RunRecord, StoreError> {
    let id: String = get(row, "id")?;
    let status: String = get(row, "status")?;
    let winner: Option<String> = get(row, "winner")?;
    Ok(RunRecord {
        id: RunId::parse(&id).map_err(|_| StoreError::Corrupt { column: "runs.id", value: id.clone() })?,
        repo: get(row, "repo")?,
        task_title: get(row, "task_title")?,
        status: RunStatus::parse(&status).ok_or(StoreError::Corrupt { column: "runs.status", value: status })?,
        base_commit: get(row, "base_commit")?,
        run_dir: get(row, "run_dir")?,
        candidates: get::<_, i64>(row, "candidates")? as u32,
        winner: winner.and_then(|w| CandidateId::parse(&w)),
        started_at: Timestamp(get(row, "started_at")?),
        finished_at: get::<_, Option<i64>>(row, "finished_at")?.map(Timestamp),
    })
}

pub fn candidate<D: Db>(run: &RunId, row: &Rec<D>) -> Result<CandidateRecord, StoreError> {
    let id: String = get(row, "id")?;
    let status: String = get(row, "status")?;
    Ok(CandidateRecord {
        run_id: run.clone(),
        id: CandidateId::parse(&id).ok_or(StoreError::Corrupt { column: "candidates.id", value: id })?,
        index: get::<_, i64>(row, "idx")? as usize,
        runner: get(row, "runner")?,
        status: serde_json::from_value::<CandidateStatus>(serde_json::Value::String(status.clone()))
            .map_err(|_| StoreError::Corrupt { column: "candidates.status", value: status })?,
        exit_code: get(row, "exit_code")?,
        normalized_hash: get(row, "normalized_hash")?,
        eligible: get(row, "eligible")?,
        rank: get::<_, Option<i64>>(row, "rank")?.map(|r| r as usize),
    })
}

pub fn event<D: Db>(run: &RunId, row: &Rec<D>) -> Result<Event, StoreError> {
    let kind: String = get(row, "kind")?;
    let data: String = get(row, "data")?;
    let candidate: Option<String> = get(row, "candidate")?;
    Ok(Event {
        seq: get::<_, i64>(row, "seq")? as u64,
        run_id: run.clone(),
        at: Timestamp(get(row, "at")?),
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
