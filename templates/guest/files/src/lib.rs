//! {{name}}: Kubernetes operator handlers, Kopf-style, compiled to a WebAssembly
//! component that the Kapsel host runs.
//!
//! One handler to start from, Kopf's first example: every new `KopfExample` is
//! greeted, and the result becomes its `status.create_fn`. Replace the resource
//! (`manifests/`) and the handler with your own; the SDK's documentation
//! (`cargo doc --open -p kapsel-sdk`) lists every handler kind and option.

use kapsel::{Cause, Value, json};

/// Greets every new object; the returned map is merged into `status.create_fn`.
#[kapsel::on::create("kopf.dev", "v1", "kopfexamples")]
fn create_fn(cause: &Cause) -> Value {
    kapsel::info!("And here we are! Creating: {}", cause.spec());
    json!({"message": "hello world"})
}

#[cfg(test)]
mod tests {
    use kapsel::testing::{self, Outcome};
    use kapsel::{Reason, json};

    /// Natively, with the SDK's fake host: the handler is called as the host calls it.
    #[test]
    fn says_hello_into_the_status() {
        let mut cause = testing::cause()
            .handler_id("create_fn")
            .changing(Reason::Create)
            .body(json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                         "metadata": {"namespace": "default", "name": "example"},
                         "spec": {"field": "value"}}))
            .build();
        let reply = testing::invoke(&mut cause);
        assert_eq!(
            reply.outcome,
            Outcome::Done(Some(json!({"message": "hello world"})))
        );
        assert_eq!(
            testing::logs()[0].message,
            r#"And here we are! Creating: {"field":"value"}"#
        );
    }
}
