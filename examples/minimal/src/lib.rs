//! Kopf's first example (`examples/01-minimal`):
//!
//! ```python
//! @kopf.on.create('kopfexamples')
//! def create_fn(spec, **kwargs):
//!     print(f"And here we are! Creating: {spec}")
//!     return {'message': 'hello world'}  # will be the new status
//! ```
//!
//! in Rust. The returned map is merged into `status.create_fn`, so after
//! `kubectl apply -f examples/manifests/kopfexample-obj.yaml`,
//! `kubectl get kex kopf-example-1 -o jsonpath='{.status.create_fn.message}'`
//! prints `hello world`.
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p kapsel-example-minimal`
//! (the component is `target/wasm32-wasip2/release/minimal.wasm`).
//! Run: `kapsel run --embedded -A target/wasm32-wasip2/release/minimal.wasm`.

use kapsel::{Cause, Value, json};

/// Greets every new kopfexample; the result becomes `status.create_fn`.
#[kapsel::on::create("kopfexamples")]
fn create_fn(cause: &Cause) -> Value {
    kapsel::info!("And here we are! Creating: {}", cause.spec());
    json!({"message": "hello world"})
}

#[cfg(test)]
mod tests {
    use kapsel::testing::{self, Outcome};
    use kapsel::{Reason, json};

    #[test]
    fn says_hello_into_the_status() {
        let mut cause = testing::cause()
            .handler_id("create_fn")
            .changing(Reason::Create)
            .body(json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                         "metadata": {"namespace": "default", "name": "kopf-example-1"},
                         "spec": {"field": "value"}}))
            .build();
        let reply = testing::invoke(&mut cause);
        assert_eq!(
            reply.outcome,
            Outcome::Done(Some(json!({"message": "hello world"})))
        );
        assert_eq!(reply.patch, None);
        assert_eq!(
            testing::logs()[0].message,
            r#"And here we are! Creating: {"field":"value"}"#
        );
    }

    #[test]
    fn registers_one_create_handler() {
        let registrations = testing::registrations();
        assert_eq!(registrations.len(), 1);
        assert_eq!(
            (&registrations[0]["id"], &registrations[0]["kind"]),
            (&json!("create_fn"), &json!("create"))
        );
    }
}
