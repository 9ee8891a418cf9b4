//! The run's spending limit (`--budget-usd`), shared by its candidates and judges.
//!
//! Every model call is charged the moment its cost is known. The charge that reaches the
//! limit records one `budget_exceeded` event and cancels the budget's stop token, which every
//! candidate's agent runs under: running agents stop (their patch so far is still evaluated),
//! candidates not started yet are skipped, and judges make no further calls. Calls without a
//! known cost cannot be charged; they are counted and reported. Each charge is passed on to
//! the run's [`SpendingSink`] too, when it has one (a plan's budget, for a plan's task).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arbiter_core::budget::{Budget, Charge};
use arbiter_core::cost::CallRecord;
use arbiter_core::money::Usd;
use tokio_util::sync::CancellationToken;

use crate::events::EventLog;

/// Where a run's costs are passed on the moment they are charged.
#[async_trait::async_trait]
pub trait SpendingSink: Send + Sync {
    async fn spent(&self, amount: Usd);
}

/// One run's budget.
pub struct RunBudget {
    state: Mutex<Budget>,
    stop: CancellationToken,
    uncharged: AtomicU64,
    events: EventLog,
    sink: Option<Arc<dyn SpendingSink>>,
}

impl RunBudget {
    /// A budget whose stop token is cancelled with `run_cancel` too.
    pub fn new(
        limit: Option<Usd>,
        run_cancel: &CancellationToken,
        events: EventLog,
        sink: Option<Arc<dyn SpendingSink>>,
    ) -> Self {
        RunBudget {
            state: Mutex::new(Budget::new(limit)),
            stop: run_cancel.child_token(),
            uncharged: AtomicU64::new(0),
            events,
            sink,
        }
    }

    /// Charges one call; the charge that reaches the limit records the crossing and stops
    /// the run's agents.
    pub async fn charge(&self, call: &CallRecord) {
        self.count(call, true).await;
    }

    /// Counts a call already paid for and passed on where it ran (a candidate kept by a
    /// resume, or run by a unit of its own): against the limit, not passed on again.
    pub async fn recount(&self, call: &CallRecord) {
        self.count(call, false).await;
    }

    async fn count(&self, call: &CallRecord, pass_on: bool) {
        let Some(cost) = call.cost else {
            self.uncharged.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let (charge, state) = {
            let mut b = self.state.lock().unwrap_or_else(|p| p.into_inner());
            (b.charge(cost), *b)
        };
        if let Some(sink) = self.sink.as_ref().filter(|_| pass_on) {
            sink.spent(cost).await;
        }
        if charge == Charge::Crossed {
            self.events
                .emit(
                    call.candidate.as_ref(),
                    &arbiter_core::event::BudgetExceeded {
                        limit: state.limit,
                        spent: state.spent,
                        role: call.role.clone(),
                        message: format!(
                            "the run's budget of {} is spent ({} so far); running agents stop, no new candidate starts, judging stops",
                            state.limit.unwrap_or_default(),
                            state.spent
                        ),
                    },
                )
                .await;
            self.stop.cancel();
        }
    }

    /// The limit is reached.
    pub fn exhausted(&self) -> bool {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).exhausted()
    }

    /// Cancelled when the run is interrupted or the budget is spent: agents run under it.
    pub fn stop_token(&self) -> CancellationToken {
        self.stop.clone()
    }

    pub fn snapshot(&self) -> Budget {
        *self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Calls whose cost was unknown, and so could not be charged.
    pub fn uncharged_calls(&self) -> u64 {
        self.uncharged.load(Ordering::Relaxed)
    }

    /// `the run's budget ($2.50) was reached`.
    pub fn reached_reason(&self) -> String {
        format!("the run's budget ({}) was reached", self.snapshot().limit.unwrap_or_default())
    }
}
