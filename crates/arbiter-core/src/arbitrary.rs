//! Generators of values for property tests (`--features arbitrary`): every type that
//! crosses the wire derives `proptest_derive::Arbitrary` next to its definition, so a new
//! field is generated as soon as it exists; the few values that need a constrained or a
//! nastier generator than proptest's default are made here, and only here.
//!
//! - [`text`]: strings with what breaks careless code: control characters (NUL, escape,
//!   DEL), bidirectional overrides and isolates, invisible characters, a byte-order mark,
//!   quotes and backslashes, characters beyond the Basic Multilingual Plane; empty too.
//!   (proptest's own `String` leaves out every control and format character.)
//! - [`i64_edge`], [`u64_edge`]: the extremes (`MIN`, `MAX`, `i64::MAX + 1` as a `u64`) as
//!   well as values all over the range.
//! - [`finite_f64`]: every finite value (subnormals and `-0.0` included): JSON has no NaN
//!   or infinity.
//! - [`json`], [`json_option`]: `serde_json::Value`s (nested arrays and objects, objects
//!   keyed by numbers as text, the largest numbers) and `Option<Value>` with `Some(null)`.
//! - [`Usd`](crate::money::Usd) (the whole `i64` range of picodollars), and [`usd_amount`]
//!   for fields that take only an amount of zero or more; [`Timestamp`] (the whole `i64`
//!   range); [`RunId`] and [`CandidateId`] (only ids of their shape: their constructors
//!   make no other); [`Untrusted`](crate::text::Untrusted) (made of [`text`]).

use proptest::prelude::*;
use serde_json::Value;

use crate::ids::{CandidateId, RunId};
use crate::money::Usd;
use crate::text::Untrusted;
use crate::time::Timestamp;

/// Characters that text from outside arbiter may hold and that break careless code.
const NASTY: &[char] = &[
    '\0',
    '\u{1}',
    '\t',
    '\n',
    '\r',
    '\u{b}',
    '\u{c}',
    '\u{1b}',
    '\u{7f}',
    '\u{85}',
    '\u{9b}', // control
    '\u{200b}',
    '\u{200c}',
    '\u{200d}',
    '\u{2060}',
    '\u{feff}',
    '\u{ad}', // invisible
    '\u{202a}',
    '\u{202b}',
    '\u{202c}',
    '\u{202d}',
    '\u{202e}', // bidirectional embeddings and overrides
    '\u{2066}',
    '\u{2067}',
    '\u{2068}',
    '\u{2069}',
    '\u{200e}',
    '\u{200f}',
    '\u{61c}', // isolates and marks
    '\u{2028}',
    '\u{2029}', // line and paragraph separators (not newlines to JSON)
    '"',
    '\'',
    '\\',
    '/',
    '<',
    '>',
    '&',
    '$',
    '`',
    '%',
    '{',
    '}',
    ':',
    ',', // quoting and markup
    'é',
    'ß',
    'İ',
    'Ⱥ',
    '中',
    'ע',
    'ي',
    '\u{301}',
    '\u{fffd}',
    '\u{ffff}', // beyond ASCII
    '😀',
    '\u{1f3f3}',
    '\u{e0041}',
    '\u{10ffff}', // beyond the Basic Multilingual Plane
];

/// One character: a nasty one, printable ASCII, or any scalar value.
fn character() -> impl Strategy<Value = char> {
    prop_oneof![
        3 => proptest::sample::select(NASTY),
        3 => proptest::char::range(' ', '~'),
        1 => any::<char>(),
    ]
}

/// Text of up to 24 characters (see the module's documentation).
pub fn text() -> impl Strategy<Value = String> {
    proptest::collection::vec(character(), 0..24).prop_map(|chars| chars.into_iter().collect())
}

/// Text of at least one character.
pub fn non_empty_text() -> impl Strategy<Value = String> {
    proptest::collection::vec(character(), 1..24).prop_map(|chars| chars.into_iter().collect())
}

/// An `i64`: an extreme, a small one, or any.
pub fn i64_edge() -> impl Strategy<Value = i64> {
    prop_oneof![
        prop_oneof![Just(i64::MIN), Just(i64::MIN + 1), Just(-1), Just(0), Just(1), Just(i64::MAX - 1), Just(i64::MAX)],
        -1000i64..1000,
        any::<i64>(),
    ]
}

/// A `u64`: an extreme (`u64::MAX`, around `i64::MAX`), a small one, or any.
pub fn u64_edge() -> impl Strategy<Value = u64> {
    prop_oneof![
        prop_oneof![
            Just(0),
            Just(1),
            Just(i64::MAX as u64),
            Just(i64::MAX as u64 + 1),
            Just(u64::MAX - 1),
            Just(u64::MAX)
        ],
        0u64..1000,
        any::<u64>(),
    ]
}

/// Any finite `f64` (JSON has no NaN or infinity): normal, subnormal, zero of either sign,
/// the extremes, and everyday values.
pub fn finite_f64() -> impl Strategy<Value = f64> {
    use proptest::num::f64;
    prop_oneof![
        prop_oneof![Just(0.0), Just(-0.0), Just(f64::MIN_POSITIVE), Just(f64::MAX), Just(f64::MIN), Just(f64::EPSILON)],
        -1.0e6f64..1.0e6,
        (f64::POSITIVE | f64::NEGATIVE | f64::NORMAL | f64::SUBNORMAL | f64::ZERO),
    ]
}

/// A key of a JSON object: a number written as text (what a map keyed by numbers becomes),
/// or [`text`].
fn json_key() -> impl Strategy<Value = String> {
    prop_oneof![u64_edge().prop_map(|n| n.to_string()), i64_edge().prop_map(|n| n.to_string()), text(),]
}

/// A JSON value, nested up to three levels (arrays and objects of up to four entries).
pub fn json() -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        i64_edge().prop_map(Value::from),
        u64_edge().prop_map(Value::from),
        finite_f64().prop_map(Value::from),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(json_key(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
    .boxed()
}

/// An optional JSON value: absent, `Some(null)` (present, and null), or any other value.
pub fn json_option() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![Just(None), Just(Some(Value::Null)), json().prop_map(Some)]
}

/// An amount of zero or more (a budget, a price): what the fields read with
/// [`crate::money::deserialize_amount`] accept.
pub fn usd_amount() -> impl Strategy<Value = Usd> {
    prop_oneof![Just(0), Just(1), Just(i64::MAX), 0..i64::MAX, 0i64..1_000_000_000_000_000].prop_map(Usd::from_pico)
}

/// An optional [`usd_amount`].
pub fn usd_amount_option() -> impl Strategy<Value = Option<Usd>> {
    proptest::option::of(usd_amount())
}

impl Arbitrary for Usd {
    type Parameters = ();
    type Strategy = BoxedStrategy<Usd>;

    fn arbitrary_with((): ()) -> Self::Strategy {
        prop_oneof![
            i64_edge().prop_map(Usd::from_pico),
            // Whole cents and dollars, as people write them.
            (-1_000_000i64..1_000_000).prop_map(|cents| Usd::from_pico(cents * 10_000_000_000)),
        ]
        .boxed()
    }
}

impl Arbitrary for Timestamp {
    type Parameters = ();
    type Strategy = BoxedStrategy<Timestamp>;

    fn arbitrary_with((): ()) -> Self::Strategy {
        i64_edge().prop_map(Timestamp).boxed()
    }
}

impl Arbitrary for RunId {
    type Parameters = ();
    type Strategy = BoxedStrategy<RunId>;

    /// Started between 1970 and 9999 (the years a run id can spell), any suffix.
    fn arbitrary_with((): ()) -> Self::Strategy {
        (0i64..253_402_300_800_000_000, any::<u32>()).prop_map(|(at, suffix)| RunId::new(Timestamp(at), suffix)).boxed()
    }
}

impl Arbitrary for CandidateId {
    type Parameters = ();
    type Strategy = BoxedStrategy<CandidateId>;

    fn arbitrary_with((): ()) -> Self::Strategy {
        prop_oneof![0usize..100, 0usize..100_000].prop_map(CandidateId::from_index).boxed()
    }
}

impl Arbitrary for Untrusted {
    type Parameters = ();
    type Strategy = BoxedStrategy<Untrusted>;

    fn arbitrary_with((): ()) -> Self::Strategy {
        text().prop_map(Untrusted::new).boxed()
    }
}
