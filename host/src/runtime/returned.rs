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

/// Cuts the error message of a failed call to what a log line may be
/// (`--max-log-line-bytes`), saying how long it was: the message is logged, journaled and
/// kept in the object's progress annotation, so a longer one would cost the host memory
/// and the object its annotations (a 413 for the whole patch). What the failure is
/// (temporary, permanent, arbitrary) stays as the handler said.
pub(super) fn bound_message(limits: &Limits, reply: &mut Reply) {
    let message = match &mut reply.outcome {
        Outcome::Temporary((message, _))
        | Outcome::Permanent(message)
        | Outcome::Failed(message) => message,
        Outcome::Done(_) => return,
    };
    cut(message, limits.max_log_line_bytes);
}

/// Cuts `text` to at most `limit` bytes (on a character's boundary), ending with a note of
/// its length.
fn cut(text: &mut String, limit: usize) {
    if text.len() <= limit {
        return;
    }
    let note = format!(
        " … [{} bytes in all, cut to --max-log-line-bytes]",
        text.len()
    );
    let mut end = limit.saturating_sub(note.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(&note);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_message_is_cut_on_a_character_to_the_limit_with_its_length() {
        let mut short = "fine".to_string();
        cut(&mut short, 100);
        assert_eq!(short, "fine");
        let mut long = "é".repeat(1000);
        cut(&mut long, 200);
        assert!(long.len() <= 200, "{}", long.len());
        assert!(long.starts_with("éé"), "{long}");
        assert!(
            long.ends_with(" … [2000 bytes in all, cut to --max-log-line-bytes]"),
            "{long}"
        );
    }
}
