//! Log lines about an object (Kopf's per-object logger, KOPF.md §6.6).
//!
//! The object's reference travels as the tracing field `object` (`namespace/name`, or
//! `name` for cluster-scoped objects), never inside the message: the `kapsel` binary's
//! text formats print it as Kopf's `[namespace/name] ` prefix, its JSON format puts it
//! under the key `object`. Guest log lines carry the same field (see the runtime).

/// Logs a line about an object at a level (`debug`, `info`, `warn`, `error`):
///
/// ```text
/// object_log!(info, object, "Handler '{}' succeeded.", handler.spec.id);
/// ```
///
/// is `tracing::info!(object = %object, "Handler '{}' succeeded.", handler.spec.id)`:
/// `[default/web-0] Handler 'x' succeeded.` in the text formats.
macro_rules! object_log {
    ($level:ident, $object:expr, $($message:tt)+) => {
        ::tracing::$level!(object = %$object, $($message)+)
    };
}

pub(crate) use object_log;

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing::field::{Field, Visit};

    /// Collects the fields of every event.
    #[derive(Clone, Default)]
    struct Fields(Arc<Mutex<Vec<(String, String)>>>);

    impl Visit for Fields {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            self.0
                .lock()
                .unwrap()
                .push((field.name().to_owned(), format!("{value:?}")));
        }
    }

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Fields {
        fn on_event(
            &self,
            event: &tracing::Event<'_>,
            _: tracing_subscriber::layer::Context<'_, S>,
        ) {
            event.record(&mut self.clone());
        }
    }

    #[test]
    fn the_object_is_a_field_not_part_of_the_message() {
        use tracing_subscriber::layer::SubscriberExt;
        let fields = Fields::default();
        let subscriber = tracing_subscriber::registry().with(fields.clone());
        tracing::subscriber::with_default(subscriber, || {
            let object = String::from("default/web-0");
            object_log!(info, object, "Handler '{}' succeeded.", "x");
        });
        assert_eq!(
            *fields.0.lock().unwrap(),
            [
                ("message".to_owned(), "Handler 'x' succeeded.".to_owned()),
                ("object".to_owned(), "default/web-0".to_owned()),
            ]
        );
    }
}
