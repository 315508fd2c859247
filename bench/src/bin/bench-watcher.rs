//! The floor of the bench: a bare kube-rs process that lists and watches every
//! kopfexample and pod (from `KUBECONFIG`) and does nothing with them, keeping nothing.
//! Its memory is what a Rust operator of these resources cannot go below.

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};

/// Drains a watch of every object of `resource` in every namespace, for ever.
async fn drain(client: kube::Client, resource: ApiResource) {
    let api = Api::<DynamicObject>::all_with(client, &resource);
    watcher(api, watcher::Config::default())
        .default_backoff()
        .for_each(|_| std::future::ready(()))
        .await;
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = kube::Client::try_default().await?;
    let kopfexamples = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kopf.dev", "v1", "KopfExample"),
        "kopfexamples",
    );
    let pods = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Pod"), "pods");
    eprintln!("watching kopfexamples and pods");
    futures::join!(drain(client.clone(), kopfexamples), drain(client, pods));
    Ok(())
}
