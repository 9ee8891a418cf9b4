//! Timestamps as microseconds since the Unix epoch, and their RFC 3339 rendering.
//!
//! The store keeps integer microseconds on every backend; artifacts show RFC 3339 UTC.
//! Reading the clock is an effect, so this module only converts values it is given.

use serde::{Deserialize, Serialize};

/// Microseconds since 1970-01-01T00:00:00Z.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// The civil UTC date and time of this instant.
    pub fn civil(self) -> Civil {
        let secs = self.0.div_euclid(1_000_000);
        let micros = self.0.rem_euclid(1_000_000);
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(days);
        Civil {
            year,
            month,
            day,
            hour: (rem / 3600) as u32,
            minute: ((rem % 3600) / 60) as u32,
            second: (rem % 60) as u32,
            micros: micros as u32,
        }
    }

    /// `2026-11-29T08:34:37.123Z` (milliseconds).
    pub fn rfc3339(self) -> String {
        let c = self.civil();
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            c.year,
            c.month,
            c.day,
            c.hour,
            c.minute,
            c.second,
            c.micros / 1000
        )
    }

    /// `20261129T083437Z`, the sortable prefix of run ids.
    pub fn compact(self) -> String {
        let c = self.civil();
        format!("{:04}{:02}{:02}T{:02}{:02}{:02}Z", c.year, c.month, c.day, c.hour, c.minute, c.second)
    }

    /// Whole seconds from `now` until this time, rounded up (a wait of 4.2 s is "5 s", as a
    /// wait of 5 s configured reads), 0 once it has passed.
    pub fn seconds_after(self, now: Timestamp) -> i64 {
        ((self.0 - now.0).max(0) as u64).div_ceil(1_000_000) as i64
    }

    /// Milliseconds elapsed from `earlier` to `self` (never negative).
    pub fn millis_since(self, earlier: Timestamp) -> u64 {
        ((self.0 - earlier.0).max(0) / 1000) as u64
    }
}

/// A broken-down UTC time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Civil {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    pub micros: u32,
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian calendar).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Formats a duration in milliseconds for people: `850ms`, `12.3s`, `4m05s`.
pub fn human_duration(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        let s = ms / 1000;
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A retry 5 s away, seen a few microseconds later, read "4 s" (the docs say 5).
    #[test]
    fn waits_round_up_to_the_second() {
        let now = Timestamp(1_000_000_000);
        assert_eq!(Timestamp(now.0 + 5_000_000 - 300).seconds_after(now), 5);
        assert_eq!(Timestamp(now.0 + 5_000_000).seconds_after(now), 5);
        assert_eq!(Timestamp(now.0 + 1).seconds_after(now), 1);
        assert_eq!(Timestamp(now.0 - 10).seconds_after(now), 0);
    }

    #[test]
    fn renders_known_instants() {
        assert_eq!(Timestamp(0).rfc3339(), "1970-01-01T00:00:00.000Z");
        // 2026-11-29T08:34:37.250Z
        let t = Timestamp(1_795_941_277_250_000);
        assert_eq!(t.rfc3339(), "2026-11-29T08:34:37.250Z");
        assert_eq!(t.compact(), "20261129T083437Z");
        // leap day
        assert_eq!(Timestamp(951_782_400_000_000).rfc3339(), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(human_duration(850), "850ms");
        assert_eq!(human_duration(12_345), "12.3s");
        assert_eq!(human_duration(245_000), "4m05s");
    }
}
