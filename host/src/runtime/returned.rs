//! What a guest returns from a call, checked against its limits before the host parses or
//! keeps any of it.

use super::bindings::{Outcome, Reply};
use super::state::over_limit;
use crate::limits::Limits;

/// Whether a handler's reply is within the limits; else what went past which.
pub(super) fn reply_within_limits(limits: &Limits, reply: &Reply) -> Result<(), String> {
    let check = |what: &str, text: Option<&String>, limit: usize, flag: &str| match text {
        Some(text) if text.len() > limit => Err(over_limit(what, text.len(), limit, flag)),
        _ => Ok(()),
    };
    let result = match &reply.outcome {
        Outcome::Done(result) => result.as_ref(),
        _ => None,
    };
    check(
        "returned a result",
        result,
        limits.max_result_bytes,
        "max-result-bytes",
    )?;
    check(
        "returned a patch",
        reply.patch.as_ref(),
        limits.max_patch_bytes,
        "max-patch-bytes",
    )?;
    check(
        "left a memo",
        reply.memo.as_ref(),
        limits.max_memo_bytes,
        "max-memo-bytes",
    )
}

/// Whether an index handler's entries are within the limits; else by how much not.
pub(super) fn index_within_limits(
    limits: &Limits,
    entries: &[(String, String)],
) -> Result<(), String> {
    let size = entries
        .iter()
        .map(|(key, value)| key.len().saturating_add(value.len()))
        .fold(0_usize, usize::saturating_add);
    if size > limits.max_index_bytes {
        return Err(over_limit(
            "returned index entries",
            size,
            limits.max_index_bytes,
            "max-index-bytes",
        ));
    }
    Ok(())
}
