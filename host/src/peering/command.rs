//! `kapsel freeze` and `kapsel resume` (Kopf's `kopf freeze`/`kopf resume`,
//! KOPF.md §8.4): write one peer record, through each peering group the cluster
//! serves (`kopf.dev/v1`, the legacy `zalando.org/v1`), and exit.

use std::time::Duration;

use super::places::{Target, describe, patch, peering_api};
use super::{identity, peers, resources};
use crate::Error;
use crate::cluster::{Scope, served_namespaces};

/// A manual peer that pauses operators of lower priority (`kapsel freeze`)
/// until its record expires or is removed (`kapsel resume`).
///
/// ```no_run
/// # async fn demo() -> Result<(), kapsel_host::Error> {
/// use std::time::Duration;
/// use kapsel_host::Freezer;
/// Freezer::new("default").freeze(Duration::from_secs(600)).await?;
/// // ... maintenance ...
/// Freezer::new("default").resume().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
#[must_use]
pub struct Freezer {
    peering: String,
    namespaces: Vec<String>,
    identity: Option<String>,
    priority: i64,
    client: Option<kube::Client>,
}

impl std::fmt::Debug for Freezer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Freezer")
            .field("peering", &self.peering)
            .field("namespaces", &self.namespaces)
            .field("identity", &self.identity)
            .field("priority", &self.priority)
            .finish_non_exhaustive()
    }
}

impl Freezer {
    /// A freezer of the peering object of this name, cluster-wide (the
    /// ClusterKopfPeering), with priority 100 and the identity `user@host`
    /// (or env `POD_ID`), as `kopf freeze` has.
    pub fn new(peering: impl Into<String>) -> Freezer {
        Freezer {
            peering: peering.into(),
            namespaces: Vec::new(),
            identity: None,
            priority: 100,
            client: None,
        }
    }

    /// Freeze cluster-wide operators (the ClusterKopfPeering). The default.
    pub fn all_namespaces(mut self) -> Freezer {
        self.namespaces.clear();
        self
    }

    /// Freeze the operators of the namespaces matching these patterns (the
    /// KopfPeering of each), as `-n` does.
    pub fn namespaces<I, S>(mut self, patterns: I) -> Freezer
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.namespaces = patterns.into_iter().map(Into::into).collect();
        self
    }

    /// The identity of the record (`--id`); `resume` must use the one `freeze` used.
    pub fn identity(mut self, identity: impl Into<String>) -> Freezer {
        self.identity = Some(identity.into());
        self
    }

    /// The priority of the record (`--priority`, default 100; `--dev` is 666).
    pub fn priority(mut self, priority: i64) -> Freezer {
        self.priority = priority;
        self
    }

    /// Priority 666 (`--dev`).
    pub fn dev(self) -> Freezer {
        self.priority(super::DEV_PRIORITY)
    }

    /// Use this client instead of inferring one.
    pub fn client(mut self, client: kube::Client) -> Freezer {
        self.client = Some(client);
        self
    }

    /// Writes the record for `lifetime` (rounded up to whole seconds; zero
    /// removes it instead): operators of lower priority pause until it expires
    /// or [`Freezer::resume`] removes it.
    ///
    /// # Errors
    /// No cluster connection, or a peering object that is missing or cannot be patched.
    pub async fn freeze(self, lifetime: Duration) -> Result<(), Error> {
        let seconds = lifetime.as_secs() + u64::from(lifetime.subsec_nanos() > 0);
        let lifetime = i64::try_from(seconds).unwrap_or(i64::MAX);
        self.touch(lifetime).await
    }

    /// Removes the record (Kopf writes it with lifetime 0, which removes it).
    ///
    /// # Errors
    /// As [`Freezer::freeze`].
    pub async fn resume(self) -> Result<(), Error> {
        self.touch(0).await
    }

    async fn touch(self, lifetime: i64) -> Result<(), Error> {
        let client = match self.client {
            Some(client) => client,
            None => crate::cluster::default_kube_client()
                .await
                .map_err(|e| Error::Connect(Box::new(e)))?,
        };
        let targets: Vec<Target> = if self.namespaces.is_empty() {
            vec![None]
        } else {
            served_namespaces(&client, &Scope::from_patterns(&self.namespaces))
                .await
                .map_err(|e| Error::Peering(Box::new(e)))?
                .into_iter()
                .map(Some)
                .collect()
        };
        if targets.is_empty() {
            return Err(Error::Peering(
                format!("no namespace matches {}", self.namespaces.join(", ")).into(),
            ));
        }
        let clusterwide = self.namespaces.is_empty();
        let resources = resources::discover(&client, clusterwide).await;
        if resources.is_empty() {
            return Err(Error::Peering(
                format!(
                    "{} (deploy the peering CRDs)",
                    resources::missing(clusterwide)
                )
                .into(),
            ));
        }
        let identity = self.identity.unwrap_or_else(identity::for_command);
        let body = peers::touch_patch(&identity, self.priority, lifetime, peers::now());
        let mut missing = Vec::new();
        for target in &targets {
            let where_ = describe(target);
            // As Kopf, through every peering group served (both while a cluster moves).
            let mut found = false;
            for resource in &resources {
                let api = peering_api(&client, resource, target);
                if !patch(&api, &self.peering, &body)
                    .await
                    .map_err(|e| Error::Peering(Box::new(e)))?
                {
                    continue;
                }
                found = true;
                tracing::info!(
                    "Peer record of '{identity}' in '{}' {where_} ({}): {}.",
                    self.peering,
                    resources::name(&resource.group, clusterwide),
                    if lifetime > 0 {
                        format!("priority {}, lifetime {lifetime} s", self.priority)
                    } else {
                        "removed".to_owned()
                    }
                );
            }
            if !found {
                missing.push(where_);
            }
        }
        // Kopf ignores a missing object silently; a command that did nothing should say so.
        if missing.is_empty() {
            Ok(())
        } else {
            Err(Error::Peering(
                format!(
                    "the peering object '{}' does not exist {} (are the peering CRDs and the object deployed?)",
                    self.peering,
                    missing.join(", ")
                )
                .into(),
            ))
        }
    }
}
