//! Generators of the store's records for property tests (`--features arbitrary`): what
//! `#[derive(Arbitrary)]` cannot make, here and only here (the values themselves come from
//! `crate::arbitrary`).

use proptest::prelude::*;

use crate::queue::plans::{PlanRecord, PlanView, TaskRecord};

impl Arbitrary for PlanView {
    type Parameters = ();
    type Strategy = BoxedStrategy<PlanView>;

    /// Through [`PlanView::new`], which indexes the tasks (as reading one back does).
    fn arbitrary_with((): ()) -> Self::Strategy {
        (any::<PlanRecord>(), proptest::collection::vec(any::<TaskRecord>(), 0..4))
            .prop_map(|(plan, tasks)| PlanView::new(plan, tasks))
            .boxed()
    }
}
