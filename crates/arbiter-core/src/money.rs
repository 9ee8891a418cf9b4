//! Exact money: US dollars held as integer picodollars (1e-12 USD), so sums of many
//! per-token costs never drift the way floating point does.

use std::fmt;
use std::ops::Add;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An amount of US dollars, exact to 1e-12.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Usd {
    pico: i64,
}

const PICO_PER_USD: i64 = 1_000_000_000_000;

impl Usd {
    pub const ZERO: Usd = Usd { pico: 0 };

    pub fn from_pico(pico: i64) -> Self {
        Usd { pico }
    }

    pub fn pico(self) -> i64 {
        self.pico
    }

    /// Parses a decimal such as `0.15` or `3` (at most 12 decimals).
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        let (neg, s) = match s.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, s),
        };
        let (int, frac) = s.split_once('.').unwrap_or((s, ""));
        if int.is_empty() && frac.is_empty() || frac.len() > 12 {
            return None;
        }
        if !int.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        // In i128, then narrowed: the most negative amount (`i64::MIN` picodollars) has a
        // magnitude one more than the largest positive one.
        let int: i128 = if int.is_empty() { 0 } else { int.parse().ok()? };
        let frac_val: i128 = if frac.is_empty() { 0 } else { format!("{frac:0<12}").parse().ok()? };
        let pico = int.checked_mul(PICO_PER_USD as i128)?.checked_add(frac_val)?;
        let pico = i64::try_from(if neg { -pico } else { pico }).ok()?;
        Some(Usd { pico })
    }

    /// The cost of `tokens` at `per_million` dollars per million tokens, exact.
    pub fn per_million_tokens(per_million: Usd, tokens: u64) -> Usd {
        let pico = (per_million.pico as i128 * tokens as i128) / 1_000_000;
        Usd { pico: pico.clamp(i64::MIN as i128, i64::MAX as i128) as i64 }
    }

    /// The exact decimal, trailing zeros trimmed (`0.0015`, `2`).
    pub fn decimal(self) -> String {
        let sign = if self.pico < 0 { "-" } else { "" };
        let abs = self.pico.unsigned_abs();
        let int = abs / PICO_PER_USD as u64;
        let frac = abs % PICO_PER_USD as u64;
        if frac == 0 {
            format!("{sign}{int}")
        } else {
            let f = format!("{frac:012}");
            format!("{sign}{int}.{}", f.trim_end_matches('0'))
        }
    }
}

impl Usd {
    /// `self - other`, or zero when `other` is more.
    pub fn saturating_sub(self, other: Usd) -> Usd {
        Usd::from_pico(self.pico.saturating_sub(other.pico).max(0))
    }
}

impl Add for Usd {
    type Output = Usd;
    fn add(self, rhs: Usd) -> Usd {
        Usd { pico: self.pico.saturating_add(rhs.pico) }
    }
}

impl std::iter::Sum for Usd {
    fn sum<I: Iterator<Item = Usd>>(iter: I) -> Usd {
        iter.fold(Usd::ZERO, Add::add)
    }
}

impl fmt::Display for Usd {
    /// `$0.0042` for people: at least two decimals, at most six.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let micro = (self.pico as i128 + if self.pico >= 0 { 500_000 } else { -500_000 }) / 1_000_000;
        let sign = if micro < 0 { "-" } else { "" };
        let micro = micro.unsigned_abs();
        let s = format!("{:06}", micro % 1_000_000);
        let mut frac = s.trim_end_matches('0').to_string();
        while frac.len() < 2 {
            frac.push('0');
        }
        write!(f, "{sign}${}.{frac}", micro / 1_000_000)
    }
}

/// Serialized as a decimal string (`"0.0015"`) so JSON readers never round it.
impl Serialize for Usd {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.decimal())
    }
}

impl<'de> Deserialize<'de> for Usd {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Usd::parse(&text).ok_or_else(|| serde::de::Error::custom(format!("'{text}' is not a dollar amount")))
    }
}

/// Reads an optional, non-negative dollar amount written as a decimal string (`"0.15"`,
/// exact) or a plain number (read through its shortest decimal form); `what` names the
/// value in the error.
pub fn deserialize_amount<'de, D: Deserializer<'de>>(d: D, what: &str) -> Result<Option<Usd>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Text(String),
        Int(i64),
        Float(f64),
    }
    let text = match Option::<Raw>::deserialize(d)? {
        None => return Ok(None),
        Some(Raw::Text(t)) => t,
        Some(Raw::Int(i)) => i.to_string(),
        Some(Raw::Float(f)) => f.to_string(),
    };
    match Usd::parse(&text) {
        Some(p) if p >= Usd::ZERO => Ok(Some(p)),
        _ => Err(serde::de::Error::custom(format!("'{text}' is not {what} (e.g. \"0.15\")"))),
    }
}

/// [`deserialize_amount`] for a budget in USD.
pub fn deserialize_budget<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Usd>, D::Error> {
    deserialize_amount(d, "a budget in USD")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_exactly() {
        let p = Usd::parse("0.15").unwrap();
        assert_eq!(p.decimal(), "0.15");
        assert_eq!(Usd::parse("3").unwrap().decimal(), "3");
        assert!(Usd::parse("1.2.3").is_none());
        assert!(Usd::parse("abc").is_none());
    }

    /// Every amount reads back from its decimal, the extremes too (the most negative one's
    /// magnitude does not fit an `i64`).
    #[test]
    fn every_amount_reads_back_from_its_decimal() {
        for pico in [i64::MIN, i64::MIN + 1, -1, 0, 1, i64::MAX] {
            let amount = Usd::from_pico(pico);
            assert_eq!(Usd::parse(&amount.decimal()), Some(amount), "{}", amount.decimal());
        }
        assert_eq!(Usd::parse("-9223372.036854775808"), Some(Usd::from_pico(i64::MIN)));
        assert_eq!(Usd::parse("9223372.036854775808"), None, "one past the largest");
        assert_eq!(Usd::parse("-9223372.036854775809"), None, "one past the smallest");
        assert_eq!(Usd::parse("99999999999999999999999999999999999999999"), None);
    }

    #[test]
    fn token_costs_sum_without_drift() {
        let price = Usd::parse("0.1").unwrap();
        let total: Usd = (0..1000).map(|_| Usd::per_million_tokens(price, 3)).sum();
        assert_eq!(total.decimal(), "0.0003");
        assert_eq!(format!("{total}"), "$0.0003");
        assert_eq!(format!("{}", Usd::parse("2").unwrap()), "$2.00");
    }
}
