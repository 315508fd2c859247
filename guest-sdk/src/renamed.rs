//! The SDK's earlier names of items that moved, kept as deprecated aliases: a guest
//! written against them still builds, with a warning that names the new path.
//! `CHANGELOG.md` records each move; `docs/versioning.md` says how long an alias stays.

use serde_json::Value;

use crate::events;

/// Posts a Kubernetes Event about `object`: the earlier name of [`events::post`].
#[deprecated(since = "0.1.0", note = "use kapsel::events::post")]
pub fn event(object: &Value, event_type: &str, reason: &str, message: &str) {
    events::post(object, event_type, reason, message);
}

/// A `Normal` event: the earlier name of [`events::info`] (the log macro `info!` keeps
/// its name).
#[deprecated(since = "0.1.0", note = "use kapsel::events::info")]
pub fn info(object: &Value, reason: &str, message: &str) {
    events::info(object, reason, message);
}

/// A `Warning` event: the earlier name of [`events::warn`] (the log macro `warn!` keeps
/// its name).
#[deprecated(since = "0.1.0", note = "use kapsel::events::warn")]
pub fn warn(object: &Value, reason: &str, message: &str) {
    events::warn(object, reason, message);
}

/// An `Error` event: the earlier name of [`events::exception`].
#[deprecated(since = "0.1.0", note = "use kapsel::events::exception")]
pub fn exception(object: &Value, reason: &str, message: &str) {
    events::exception(object, reason, message);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::testing;

    /// Code as a guest wrote it against the SDK before Events moved to `kapsel::events`:
    /// it builds, and posts what the new names post.
    #[test]
    #[allow(deprecated, reason = "the earlier names are what this test is about")]
    fn a_guest_written_with_the_earlier_names_still_builds_and_posts_the_same_events() {
        let body = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
        kapsel::event(&body, "Normal", "Custom", "custom");
        kapsel::info(&body, "Fine", "all fine");
        kapsel::warn(&body, "Odd", "very odd");
        kapsel::exception(&kapsel::Value::Null, "Failed", "it failed");
        // The log macros of the same names are untouched.
        kapsel::info!("logged");
        let earlier = testing::events();
        testing::reset();

        kapsel::events::post(&body, "Normal", "Custom", "custom");
        kapsel::events::info(&body, "Fine", "all fine");
        kapsel::events::warn(&body, "Odd", "very odd");
        kapsel::events::exception(&kapsel::Value::Null, "Failed", "it failed");
        assert_eq!(earlier, testing::events());
        assert_eq!(
            earlier
                .iter()
                .map(|e| e.event_type.as_str())
                .collect::<Vec<_>>(),
            ["Normal", "Normal", "Warning", "Error"]
        );
    }
}
