//! Risk reviews: a model's structured opinion of one candidate, validated here so a
//! malformed answer is caught (and repaired or replaced by a recorded fallback) instead of
//! being coerced into something that looks valid.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ids::CandidateId;

/// Scores in 0..1.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct ReviewScores {
    #[cfg_attr(feature = "arbitrary", proptest(strategy = "crate::arbitrary::finite_f64()"))]
    pub correctness: f64,
    #[cfg_attr(feature = "arbitrary", proptest(strategy = "crate::arbitrary::finite_f64()"))]
    pub risk: f64,
    #[cfg_attr(feature = "arbitrary", proptest(strategy = "crate::arbitrary::finite_f64()"))]
    pub minimality: f64,
}

/// A validated review.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct Review {
    pub summary: String,
    pub likely_correct: bool,
    #[cfg_attr(feature = "arbitrary", proptest(strategy = "crate::arbitrary::finite_f64()"))]
    pub confidence: f64,
    pub risks: Vec<String>,
    pub evidence_gaps: Vec<String>,
    pub scores: ReviewScores,
}

/// `reviews/<id>.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct ReviewArtifact {
    pub schema_version: u32,
    pub candidate_id: CandidateId,
    pub backend: Option<String>,
    /// `None` when no valid review was obtained (see `fallback`).
    pub review: Option<Review>,
    pub fallback: Option<String>,
    /// Whether the review came after one repair request.
    pub repaired: bool,
}

/// The JSON schema of a review (the parameters of the `review` tool).
pub fn schema() -> Value {
    let unit = serde_json::json!({"type": "number", "minimum": 0, "maximum": 1});
    let list = serde_json::json!({"type": "array", "items": {"type": "string"}});
    serde_json::json!({
        "type": "object",
        "properties": {
            "summary": {"type": "string"},
            "likely_correct": {"type": "boolean"},
            "confidence": unit,
            "risks": list,
            "evidence_gaps": list,
            "scores": {
                "type": "object",
                "properties": {"correctness": unit, "risk": unit, "minimality": unit},
                "required": ["correctness", "risk", "minimality"],
                "additionalProperties": false
            }
        },
        "required": ["summary", "likely_correct", "confidence", "risks", "evidence_gaps", "scores"],
        "additionalProperties": false
    })
}

/// Validates a review against [`schema`]; the error names the first problem (it is sent
/// back to the model in the repair request).
pub fn validate(v: &Value) -> Result<Review, String> {
    let obj = v.as_object().ok_or("the review must be a JSON object")?;
    for key in obj.keys() {
        if !["summary", "likely_correct", "confidence", "risks", "evidence_gaps", "scores"].contains(&key.as_str()) {
            return Err(format!("unknown field `{key}`"));
        }
    }
    let unit = |value: Option<&Value>, name: &str| -> Result<f64, String> {
        let x = value.and_then(Value::as_f64).ok_or(format!("`{name}` must be a number"))?;
        if (0.0..=1.0).contains(&x) { Ok(x) } else { Err(format!("`{name}` must be between 0 and 1, not {x}")) }
    };
    let strings = |name: &str| -> Result<Vec<String>, String> {
        obj.get(name)
            .and_then(Value::as_array)
            .ok_or(format!("`{name}` must be a list of strings"))?
            .iter()
            .map(|s| s.as_str().map(str::to_string).ok_or(format!("`{name}` must be a list of strings")))
            .collect()
    };
    let scores = obj.get("scores").and_then(Value::as_object).ok_or("`scores` must be an object")?;
    Ok(Review {
        summary: obj.get("summary").and_then(Value::as_str).ok_or("`summary` must be a string")?.to_string(),
        likely_correct: obj
            .get("likely_correct")
            .and_then(Value::as_bool)
            .ok_or("`likely_correct` must be true or false")?,
        confidence: unit(obj.get("confidence"), "confidence")?,
        risks: strings("risks")?,
        evidence_gaps: strings("evidence_gaps")?,
        scores: ReviewScores {
            correctness: unit(scores.get("correctness"), "scores.correctness")?,
            risk: unit(scores.get("risk"), "scores.risk")?,
            minimality: unit(scores.get("minimality"), "scores.minimality")?,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn good() -> Value {
        json!({"summary": "fixes add", "likely_correct": true, "confidence": 0.8, "risks": [], "evidence_gaps": ["no negative test"],
               "scores": {"correctness": 0.9, "risk": 0.1, "minimality": 1.0}})
    }

    #[test]
    fn valid_reviews_pass_and_bad_ones_say_why() {
        assert!(validate(&good()).is_ok());
        let mut out_of_range = good();
        out_of_range["confidence"] = json!(8.5);
        assert!(validate(&out_of_range).unwrap_err().contains("between 0 and 1"));
        let mut missing = good();
        missing.as_object_mut().unwrap().remove("scores");
        assert!(validate(&missing).unwrap_err().contains("scores"));
        let mut extra = good();
        extra["verdict"] = json!("ok");
        assert!(validate(&extra).unwrap_err().contains("unknown field"));
    }
}
