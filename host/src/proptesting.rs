//! What the host's property tests share: JSON values of every shape, and how many cases
//! each property runs (`KAPSEL_PROPTEST_CASES`, 256 by default, so `make test` stays
//! bounded and a longer run is one variable away).

use proptest::prelude::*;
use serde_json::Value;

/// Cases per property.
pub(crate) fn cases() -> u32 {
    std::env::var("KAPSEL_PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(256)
}

/// JSON values of every type, nested up to three levels; strings and mapping keys as the
/// regular expressions `strings` and `keys` say.
pub(crate) fn json_values(
    strings: &'static str,
    keys: &'static str,
) -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON has no NaN", |f| f.is_finite())
            .prop_map(Value::from),
        strings.prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(keys, inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}
