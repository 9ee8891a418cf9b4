//! The sweeper of a plan queue: every so often it takes back the leases of tasks and of units
//! that ran out (their workers stopped renewing them, or died), so that others can claim
//! them. `plan run` and `arbiter serve` each run one.

use std::time::Duration;

use arbiter_core::time::Timestamp;
use arbiter_store::plans::Reclaimed;
use arbiter_store::units::{ReclaimedUnit, UnitQueue};
use tokio_util::sync::CancellationToken;

/// What one sweep took back.
#[derive(Debug, Default)]
pub struct Swept {
    pub tasks: Vec<Reclaimed>,
    pub units: Vec<ReclaimedUnit>,
}

impl Swept {
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty() && self.units.is_empty()
    }

    pub fn len(&self) -> usize {
        self.tasks.len() + self.units.len()
    }
}

/// Sweeps `queue` every `every` (at the time `now` says) until `stop`, and hands what each
/// sweep took back, when it took something, to `took`. A sweep that fails is logged and the
/// next one tries again.
pub async fn sweep_until(
    queue: &dyn UnitQueue,
    every: Duration,
    stop: &CancellationToken,
    now: impl Fn() -> Timestamp,
    mut took: impl FnMut(Swept),
) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        let mut swept = Swept::default();
        match queue.sweep_expired(now()).await {
            Ok(tasks) => swept.tasks = tasks,
            Err(e) => tracing::warn!(error = %e, "sweeping expired leases failed"),
        }
        match queue.sweep_expired_units(now()).await {
            Ok(units) => swept.units = units,
            Err(e) => tracing::warn!(error = %e, "sweeping expired unit leases failed"),
        }
        if !swept.is_empty() {
            took(swept);
        }
    }
}
