//! The Kubernetes side that every stage shares: the HTTP client (`client`), the login
//! handlers' credentials (`credentials`) and the vault that keeps them and re-authenticates
//! on 401 (`vault`), what the cluster serves (`discovery`),
//! which resource a selector means (`selectors`), which namespaces are served (`scope`),
//! Kopf's retries of API requests (`requests`) and the time limits of every request
//! (`timeouts`), Kubernetes Events (`events`), and the
//! guests' own Kubernetes calls and Events, checked and paced (`guest_calls`), and how
//! objects are read off the wire (`wire`). Nothing here knows about handlers.

mod client;
mod credentials;
mod discovery;
mod events;
mod guest_calls;
mod requests;
mod scope;
mod selectors;
mod timeouts;
mod vault;
pub(crate) mod wire;

pub use client::{default_kube_client, kube_client};
pub(crate) use credentials::{ConnectionInfo, LoginError};
pub(crate) use discovery::{Error as DiscoveryError, Resource, scan, scan_group};
pub(crate) use events::{ObjectRef, PostedEvent, Poster, from_guest, from_log, posting_level};
pub(crate) use guest_calls::{GuestTraffic, KnownResources, KubeAccess, SENSITIVE, guest_may};
pub(crate) use requests::{RequestError, Retries, retried};
pub(crate) use scope::{Scope, served_namespaces};
pub(crate) use selectors::{Choices, Resolution, Selector, only_named, resolve};
#[cfg(feature = "testing")]
pub(crate) use selectors::{FindError, find_kind, find_resource};
pub(crate) use timeouts::bounded;
pub(crate) use vault::Vault;
