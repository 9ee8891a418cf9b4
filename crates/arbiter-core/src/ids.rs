//! Run and candidate identifiers.
//!
//! A run id is the UTC start time plus a random suffix (`20261129T083437Z-3fa9c1`), so ids
//! sort by time and never collide between concurrent runs. A candidate id is its 1-based
//! position, zero-padded (`c01`), so directory listings sort in candidate order.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::time::Timestamp;

/// The id of one run (one task executed as a tournament).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RunId(String);

/// Why a string is not a run id.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("'{0}' is not a run id: expected the form 20261129T083437Z-3fa9c1 (see `arbiter runs list`) or `latest`")]
pub struct InvalidRunId(pub String);

impl RunId {
    /// Builds the id of a run started at `started` with a random 24-bit `suffix`.
    pub fn new(started: Timestamp, suffix: u32) -> Self {
        RunId(format!("{}-{:06x}", started.compact(), suffix & 0xff_ffff))
    }

    /// Parses a user-supplied id. Only the exact id shape is accepted, so an id can be
    /// joined to a directory path without escaping it.
    pub fn parse(s: &str) -> Result<Self, InvalidRunId> {
        let ok = s.len() == 23
            && s.as_bytes()[8] == b'T'
            && s.as_bytes()[15] == b'Z'
            && s.as_bytes()[16] == b'-'
            && s[..8].bytes().all(|b| b.is_ascii_digit())
            && s[9..15].bytes().all(|b| b.is_ascii_digit())
            && s[17..].bytes().all(|b| b.is_ascii_hexdigit());
        if ok { Ok(RunId(s.to_string())) } else { Err(InvalidRunId(s.to_string())) }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The id of one candidate inside a run.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CandidateId(String);

impl CandidateId {
    /// The id of the candidate at 0-based `index`.
    pub fn from_index(index: usize) -> Self {
        CandidateId(format!("c{:02}", index + 1))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Accepts only ids of the `c01` shape (safe as a path component).
    pub fn parse(s: &str) -> Option<Self> {
        let digits = s.strip_prefix('c')?;
        (digits.len() >= 2 && digits.bytes().all(|b| b.is_ascii_digit())).then(|| CandidateId(s.to_string()))
    }
}

impl fmt::Display for CandidateId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_round_trip_and_sort_by_time() {
        let a = RunId::new(Timestamp(1_795_941_277_250_000), 0x3fa9c1);
        assert_eq!(a.as_str(), "20261129T083437Z-3fa9c1");
        assert_eq!(RunId::parse(a.as_str()), Ok(a.clone()));
        let b = RunId::new(Timestamp(1_795_941_278_000_000), 0);
        assert!(a < b);
    }

    #[test]
    fn run_id_parse_refuses_paths() {
        for bad in ["../etc", "latest", "20261129T083437Z-3fa9c", "20261129T083437Z/3fa9c1", ""] {
            assert!(RunId::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn candidate_ids_are_padded() {
        assert_eq!(CandidateId::from_index(0).as_str(), "c01");
        assert_eq!(CandidateId::from_index(11).as_str(), "c12");
        assert!(CandidateId::parse("c03").is_some());
        assert!(CandidateId::parse("../c03").is_none());
    }
}
