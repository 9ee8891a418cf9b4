//! The event log of one run: each event gets the next sequence number and goes, in order,
//! to `runtime_events.jsonl`, to the store, and to whoever watches progress.

use std::sync::{Arc, Mutex};

use arbiter_core::Clock;
use arbiter_core::event::{Event, EventKind};
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
    store: Arc<dyn Store>,
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
            store,
            clock,
            observer,
        }
    }

    /// Numbers the next event after `last_seq` (a resumed run continues its log).
    pub fn continuing_after(self, last_seq: u64) -> Self {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).next_seq = last_seq + 1;
        self
    }

    /// Records an event. Failing to write the log never stops a run: the first failure is
    /// reported on stderr and the run goes on (the run directory stays authoritative).
    pub async fn emit(&self, kind: EventKind, candidate: Option<&CandidateId>, data: serde_json::Value) {
        let event = {
            let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            let event = Event {
                seq: inner.next_seq,
                run_id: self.run_id.clone(),
                at: self.clock.now(),
                kind,
                candidate: candidate.cloned(),
                data,
            };
            inner.next_seq += 1;
            if let Err(e) = inner.file.append(&event)
                && !inner.store_error_reported
            {
                eprintln!("arbiter: warning: cannot append to runtime_events.jsonl: {e}");
                inner.store_error_reported = true;
            }
            event
        };
        if let Err(e) = self.store.append_event(&event).await {
            let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            if !inner.store_error_reported {
                eprintln!("arbiter: warning: cannot record events in the database: {e}");
                inner.store_error_reported = true;
            }
        }
        if let Some(tx) = &self.observer {
            let _ = tx.send(event);
        }
    }
}
