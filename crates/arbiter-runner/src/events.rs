//! The event log of one run: each event gets the next sequence number and goes, in order,
//! to `runtime_events.jsonl`, to the store, and to whoever watches progress. A candidate
//! unit keeps a log of its own (in its candidate directory, not in the store), which the
//! evaluation [`replay`](EventLog::replay)s into the run's.

use std::sync::{Arc, Mutex};

use arbiter_core::Clock;
use arbiter_core::event::{Event, EventData};
use arbiter_core::ids::{CandidateId, RunId};
use arbiter_store::Store;
use tokio::sync::mpsc::UnboundedSender;

use crate::rundir::JsonLines;

struct Inner {
    next_seq: u64,
    file: JsonLines,
    store_error_reported: bool,
}

/// Appends events for one run.
#[derive(Clone)]
pub struct EventLog {
    run_id: RunId,
    inner: Arc<Mutex<Inner>>,
    store: Option<Arc<dyn Store>>,
    clock: Arc<dyn Clock>,
    observer: Option<UnboundedSender<Event>>,
}

impl EventLog {
    pub fn new(
        run_id: RunId,
        file: JsonLines,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        observer: Option<UnboundedSender<Event>>,
    ) -> Self {
        EventLog {
            run_id,
            inner: Arc::new(Mutex::new(Inner { next_seq: 1, file, store_error_reported: false })),
            store: Some(store),
            clock,
            observer,
        }
    }

    /// A log written to `file` only (a candidate unit's).
    pub fn file_only(
        run_id: RunId,
        file: JsonLines,
        clock: Arc<dyn Clock>,
        observer: Option<UnboundedSender<Event>>,
    ) -> Self {
        EventLog {
            run_id,
            inner: Arc::new(Mutex::new(Inner { next_seq: 1, file, store_error_reported: false })),
            store: None,
            clock,
            observer,
        }
    }

    /// Numbers the next event after `last_seq` (a resumed run continues its log).
    pub fn continuing_after(self, last_seq: u64) -> Self {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).next_seq = last_seq + 1;
        self
    }

    /// Records an event, its payload typed (see [`EventData`]: one shape per kind, the one
    /// its readers read). Failing to write the log never stops a run: the first failure is
    /// reported (through `tracing`) and the run goes on (the run directory stays
    /// authoritative).
    pub async fn emit<T: EventData>(&self, candidate: Option<&CandidateId>, data: &T) {
        let at = self.clock.now();
        let data = serde_json::to_value(data).unwrap_or_default();
        let event =
            Event { seq: 0, run_id: self.run_id.clone(), at, kind: T::KIND, candidate: candidate.cloned(), data };
        self.record(event).await;
    }

    /// Records an event another log recorded first (a candidate unit's): as it happened,
    /// numbered in this log.
    pub async fn replay(&self, event: Event) {
        self.record(Event { run_id: self.run_id.clone(), ..event }).await;
    }

    async fn record(&self, event: Event) {
        let event = {
            let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            let event = Event { seq: inner.next_seq, ..event };
            inner.next_seq += 1;
            if let Err(e) = inner.file.append(&event)
                && !inner.store_error_reported
            {
                tracing::warn!("cannot append to runtime_events.jsonl: {e}");
                inner.store_error_reported = true;
            }
            event
        };
        if let Some(store) = &self.store
            && let Err(e) = store.append_event(&event).await
        {
            let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            if !inner.store_error_reported {
                tracing::warn!("cannot record events in the database: {e}");
                inner.store_error_reported = true;
            }
        }
        if let Some(tx) = &self.observer {
            let _ = tx.send(event);
        }
    }
}
