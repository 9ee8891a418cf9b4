//! Dollar amounts as CLIs report them (JSON floats such as `0.30000000000000004`, or
//! decimal strings), converted to exact [`Usd`].

use arbiter_core::money::Usd;
use serde_json::Value;

/// The amount in a JSON number or decimal string. A float is rounded to 12 decimals first:
/// that is `Usd`'s precision, and a float's binary noise beyond it is not money.
pub(crate) fn usd_from_json(value: &Value) -> Option<Usd> {
    match value {
        Value::Number(n) => n.as_f64().and_then(usd_from_float),
        Value::String(s) => Usd::parse(s),
        _ => None,
    }
}

/// `None` for NaN, infinities and amounts beyond `Usd`'s range.
pub(crate) fn usd_from_float(amount: f64) -> Option<Usd> {
    if !amount.is_finite() {
        return None;
    }
    Usd::parse(&format!("{amount:.12}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_become_exact_dollars() {
        assert_eq!(usd_from_float(0.30000000000000004).unwrap().decimal(), "0.3");
        assert_eq!(usd_from_float(0.1 + 0.2).unwrap(), Usd::parse("0.3").unwrap());
        assert_eq!(usd_from_float(0.2916225).unwrap().decimal(), "0.2916225");
        assert_eq!(usd_from_float(1e-13).unwrap(), Usd::ZERO);
        assert_eq!(usd_from_float(-0.5).unwrap().decimal(), "-0.5");
        assert_eq!(usd_from_float(f64::NAN), None);
        assert_eq!(usd_from_float(f64::INFINITY), None);
        assert_eq!(usd_from_float(1e30), None);
    }

    #[test]
    fn json_numbers_and_strings() {
        assert_eq!(usd_from_json(&json!(0.0123)).unwrap().decimal(), "0.0123");
        assert_eq!(usd_from_json(&json!(3)).unwrap().decimal(), "3");
        assert_eq!(usd_from_json(&json!("0.0015")).unwrap().decimal(), "0.0015");
        assert_eq!(usd_from_json(&json!("free")), None);
        assert_eq!(usd_from_json(&json!(null)), None);
    }
}
