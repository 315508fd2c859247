//! The one `wit_bindgen::generate!` of the SDK, over the workspace's `wit/` (the
//! contract shared with the host), which the SDK's folder links to as `wit` so that the
//! published crate carries it. Only compiled for wasm32: native builds use the fake host
//! of `kapsel::testing`.

wit_bindgen::generate!({
    world: "guest",
    path: "wit",
});
