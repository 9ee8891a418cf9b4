//! Budget arithmetic: a limit, what was spent, what is reserved, and the one moment the
//! limit is crossed.
//!
//! Every cost is charged when it is incurred. Work that is about to start may first reserve
//! an estimate, so that several workers starting at once cannot together overshoot the
//! limit by their whole cost; the reservation is released when the real cost is charged.
//! Crossing the limit is reported exactly once, by the charge that crossed it.

use serde::{Deserialize, Serialize};

use crate::money::Usd;

/// A budget's state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct Budget {
    /// `None`: no limit.
    pub limit: Option<Usd>,
    pub spent: Usd,
    pub reserved: Usd,
    /// The crossing was already reported.
    pub crossed: bool,
}

/// What one charge did to the budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Charge {
    /// Still within the limit (or no limit).
    Within,
    /// This charge reached or passed the limit: report it.
    Crossed,
    /// The limit had already been reached before this charge.
    AlreadyExceeded,
}

impl Budget {
    pub fn new(limit: Option<Usd>) -> Self {
        Budget { limit, ..Default::default() }
    }

    /// Adds `amount` to what was spent.
    pub fn charge(&mut self, amount: Usd) -> Charge {
        self.spent = self.spent + amount;
        match self.limit {
            Some(limit) if self.spent >= limit => {
                if self.crossed {
                    Charge::AlreadyExceeded
                } else {
                    self.crossed = true;
                    Charge::Crossed
                }
            }
            _ => Charge::Within,
        }
    }

    /// Nothing more may start: the limit is reached.
    pub fn exhausted(&self) -> bool {
        self.limit.is_some_and(|l| self.spent >= l)
    }

    /// What is left to spend or reserve (`None`: no limit).
    pub fn available(&self) -> Option<Usd> {
        self.limit.map(|l| l.saturating_sub(self.spent).saturating_sub(self.reserved))
    }

    /// Returns a reservation (its work ended; its real cost is charged separately).
    pub fn release(&mut self, estimate: Usd) {
        self.reserved = self.reserved.saturating_sub(estimate);
    }

    /// A new limit: a budget raised above what was spent can be crossed again.
    pub fn set_limit(&mut self, limit: Option<Usd>) {
        self.limit = limit;
        self.crossed = self.exhausted();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usd(s: &str) -> Usd {
        Usd::parse(s).unwrap()
    }

    #[test]
    fn the_crossing_is_reported_once() {
        let mut b = Budget::new(Some(usd("1")));
        assert_eq!(b.charge(usd("0.6")), Charge::Within);
        assert!(!b.exhausted());
        assert_eq!(b.charge(usd("0.4")), Charge::Crossed);
        assert!(b.exhausted());
        assert_eq!(b.charge(usd("0.1")), Charge::AlreadyExceeded);
        assert_eq!(b.spent, usd("1.1"));
    }

    #[test]
    fn reservations_count_against_what_is_available() {
        let mut b = Budget::new(Some(usd("1")));
        b.reserved = usd("0.8");
        assert_eq!(b.available(), Some(usd("0.2")));
        b.release(usd("0.4"));
        b.charge(usd("0.3"));
        assert_eq!(b.available(), Some(usd("0.3")));
        b.release(usd("5"));
        assert_eq!(b.reserved, Usd::ZERO, "releasing more than is reserved leaves nothing reserved");
        assert_eq!(Budget::new(None).available(), None);
    }

    #[test]
    fn raising_the_limit_allows_a_new_crossing() {
        let mut b = Budget::new(Some(usd("1")));
        assert_eq!(b.charge(usd("1")), Charge::Crossed);
        b.set_limit(Some(usd("2")));
        assert!(!b.exhausted() && b.available() == Some(usd("1")));
        assert_eq!(b.charge(usd("1")), Charge::Crossed);
        let mut free = Budget::new(None);
        assert_eq!(free.charge(usd("100")), Charge::Within);
        assert!(!free.exhausted());
    }
}
