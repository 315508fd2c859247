//! One peering object followed by one task ([`serve_target`]): our keep-alives in it,
//! and the review of the peers it lists (Kopf's `process_peering_event`).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use rand::Rng;
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::peers::{self, Review, Verdict};
use super::places::{Blocks, Place, describe, patch, peering_api};
use super::resources;
use super::settings::{Mode, Settings};
use crate::cluster::Resource;

/// How long leaving (removing our record) may take at shutdown.
const LEAVE_TIMEOUT: Duration = Duration::from_secs(5);

/// What every peering task shares.
pub(super) struct Shared {
    pub(super) client: Client,
    pub(super) settings: Settings,
    pub(super) identity: String,
    pub(super) blocks: Blocks,
}

pub(super) fn waiting_reason(name: &str) -> String {
    format!("waiting for the peering object '{name}'")
}

/// The state of one peering object, as one task follows it.
struct Follower {
    shared: Arc<Shared>,
    place: Place,
    /// `clusterkopfpeerings.kopf.dev`, as messages name the resource.
    resource: String,
    api: Api<DynamicObject>,
    /// Kopf's `conflicts_found` toggle for this object.
    blocked: bool,
    /// Whether the object was seen (and not deleted since).
    present: bool,
    /// Whether the current listing contained the object.
    listed: bool,
    /// Whether watching fails, and that was warned about: the further failures of the
    /// streak are logged at debug level only, however long it lasts.
    watch_failing: bool,
    /// The same for writing our record.
    touch_failing: bool,
}

/// Keeps our record alive in one peering object and follows its peers.
pub(super) async fn serve_target(
    shared: Arc<Shared>,
    resource: Resource,
    place: Place,
    cancel: CancellationToken,
) {
    let name = shared.settings.name.clone();
    let lifetime = shared.settings.lifetime;
    let api = peering_api(&shared.client, &resource, &place.target);
    let mut follower = Follower {
        blocked: shared.settings.mode == Mode::Mandatory,
        shared,
        resource: resources::name(&resource.group, place.target.is_none()),
        place,
        api: api.clone(),
        present: false,
        listed: false,
        watch_failing: false,
        touch_failing: false,
    };
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = watcher::watcher(api, config).default_backoff().boxed();
    let keepalive = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(keepalive);
    // When the first blocking peer expires (Kopf then touches itself to be re-evaluated).
    let expiry = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(expiry);
    let mut expiry_armed = false;
    loop {
        tokio::select! {
            () = cancel.cancelled() => break,
            () = &mut keepalive => {
                follower.touch(lifetime).await;
                let jitter = rand::rng().random_range(5..=10);
                let period = peers::keepalive_period(lifetime, jitter);
                keepalive.as_mut().reset(Instant::now() + Duration::from_secs(period.unsigned_abs()));
            }
            () = &mut expiry, if expiry_armed => {
                expiry_armed = false;
                follower.touch(lifetime).await;
            }
            event = events.next() => {
                let Some(event) = event else { break };
                let was_present = follower.present;
                let expiry_update = follower.take(event).await;
                if follower.present && !was_present {
                    // Just appeared: announce ourselves now, not a keep-alive period later.
                    keepalive.as_mut().reset(Instant::now());
                }
                if let Some(next) = expiry_update {
                    expiry_armed = next.is_some();
                    if let Some(delay) = next {
                        expiry.as_mut().reset(Instant::now() + delay);
                    }
                }
            }
        }
    }
    follower.shared.blocks.set(Some(&follower.place), None);
    // Leave as Kopf does: a record with no lifetime, i.e. removal.
    if tokio::time::timeout(LEAVE_TIMEOUT, follower.touch(0))
        .await
        .is_err()
    {
        tracing::warn!(
            "Could not remove ourselves from the peering object {}: timed out.",
            follower.where_()
        );
    }
}

impl Follower {
    fn name(&self) -> &str {
        &self.shared.settings.name
    }

    fn mandatory(&self) -> bool {
        self.shared.settings.mode == Mode::Mandatory
    }

    /// Where the object is, as messages say it: Kopf's words, and the group when it is
    /// the legacy one.
    fn where_(&self) -> String {
        let where_ = describe(&self.place.target);
        if self.place.group == resources::GROUPS[0] {
            where_
        } else {
            format!("{where_} ({})", self.place.group)
        }
    }

    /// Takes one event of the watch; returns `Some(when to look again)` after a review
    /// or a disappearance, `None` to leave the expiry timer as it is.
    async fn take(
        &mut self,
        event: Result<Event<DynamicObject>, watcher::Error>,
    ) -> Option<Option<Duration>> {
        // Only what a listing or a watch delivered ends a streak of failures: each
        // retry starts with `Init` before it fails again.
        let succeeded = matches!(
            event,
            Ok(Event::InitApply(_) | Event::InitDone | Event::Apply(_) | Event::Delete(_))
        );
        let expiry_update = match event {
            Ok(Event::Init) => {
                self.listed = false;
                None
            }
            Ok(Event::InitApply(object)) => {
                self.listed = true;
                Some(self.seen(&object).await)
            }
            Ok(Event::InitDone) => (!self.listed).then(|| {
                self.absent();
                None
            }),
            Ok(Event::Apply(object)) => Some(self.seen(&object).await),
            Ok(Event::Delete(_)) => {
                self.absent();
                Some(None)
            }
            Err(error) => {
                self.failed(&error);
                None
            }
        };
        if succeeded {
            self.watch_failing = false;
        }
        expiry_update
    }

    /// Writes our record (removes it with `lifetime` 0).
    async fn touch(&mut self, lifetime: i64) {
        let body = peers::touch_patch(
            &self.shared.identity,
            self.shared.settings.priority,
            lifetime,
            peers::now(),
        );
        let where_ = self.where_();
        let result = patch(&self.api, self.name(), &body).await;
        let failing = result.is_err();
        match result {
            // Kopf's stealth mode keeps quiet about keep-alives, unless the object is gone.
            Ok(true) if self.shared.settings.stealth => {}
            Ok(found) => {
                let result = if found { "ok" } else { "not found" };
                tracing::debug!("Keep-alive in '{}' {where_}: {result}.", self.name());
            }
            // Once per streak of failures (a missing grant fails every keep-alive).
            Err(error) if !self.touch_failing => tracing::warn!(
                "Keep-alive in '{}' {where_} failed: {}",
                self.name(),
                crate::error_chain(&error)
            ),
            Err(error) => tracing::debug!(
                "Keep-alive in '{}' {where_} failed again: {}",
                self.name(),
                crate::error_chain(&error)
            ),
        }
        self.touch_failing = failing;
    }

    /// Reviews the peers after an event of the peering object (Kopf's
    /// `process_peering_event`); returns when to look again if blockers expire.
    async fn seen(&mut self, object: &DynamicObject) -> Option<Duration> {
        if object.metadata.name.as_deref() != Some(self.name()) {
            return None;
        }
        self.present = true;
        let now = peers::now();
        let status = object.data.get("status").cloned().unwrap_or(Value::Null);
        let settings = &self.shared.settings;
        let review = Review::of(&status, &self.shared.identity, settings.priority, now);
        if !review.dead.is_empty() {
            tracing::debug!(
                "Removing dead peers {}: {}",
                self.where_(),
                peers::identities(&review.dead)
            );
            if let Err(error) =
                patch(&self.api, self.name(), &peers::clean_patch(&review.dead)).await
            {
                tracing::warn!(
                    "Could not remove dead peers: {}",
                    crate::error_chain(&error)
                );
            }
        }
        match review.verdict() {
            Verdict::Yield => {
                if !self.blocked {
                    tracing::info!(
                        "Pausing operations in favour of {}.",
                        peers::show(&review.higher)
                    );
                }
                self.block(format!(
                    "in favour of {}",
                    peers::identities(&review.higher)
                ));
            }
            Verdict::Conflict => {
                tracing::warn!(
                    "Possibly conflicting operators with the same priority: {}.",
                    peers::show(&review.same)
                );
                if !self.blocked {
                    tracing::warn!(
                        "Pausing all operators, including self: {}",
                        peers::show(&review.all)
                    );
                }
                self.block(format!(
                    "conflicting operators with the same priority: {}",
                    peers::identities(&review.same)
                ));
            }
            Verdict::Run => self.unblock(),
        }
        review
            .next_expiry()
            .and_then(|deadline| (deadline - now).to_std().ok())
            // Just past the deadline, so that the peer is dead when we look.
            .map(|delay| delay + Duration::from_millis(50))
    }

    /// The object is not there (not listed, or deleted).
    fn absent(&mut self) {
        self.present = false;
        if self.mandatory() {
            if !self.blocked {
                tracing::info!(
                    "Pausing operations: the peering object '{}' is gone {}.",
                    self.name(),
                    self.where_()
                );
            }
            self.block(waiting_reason(self.name()));
        } else {
            // No object, no peers: Kopf's auto-detected peering runs unpaused.
            self.unblock();
        }
    }

    /// Watching failed. A 404: the peering resource is not served any more (its CRD was
    /// deleted; discovery stops this task soon); a 403: the operator may not read it.
    /// Either means no peering through this object: `--peering` stays paused,
    /// auto-detection runs on. Each streak of failures is warned about once, so that a
    /// missing grant is said once, not at every retry.
    fn failed(&mut self, error: &watcher::Error) {
        let code = match error {
            watcher::Error::InitialListFailed(kube::Error::Api(status))
            | watcher::Error::WatchStartFailed(kube::Error::Api(status))
            | watcher::Error::WatchFailed(kube::Error::Api(status)) => Some(status.code),
            watcher::Error::WatchError(status) => Some(status.code),
            _ => None,
        };
        let resource = &self.resource;
        let (reason, advice) = match code {
            Some(404) => (
                format!("the peering resource {resource} is not served"),
                "deploy the peering CRDs",
            ),
            Some(403) => (
                format!("reading the peering resource {resource} is forbidden"),
                "grant list and watch of it, as `kapsel rbac` does",
            ),
            _ => {
                let where_ = self.where_();
                let error = crate::error_chain(error);
                if self.watch_failing {
                    tracing::debug!("Watching the peering object {where_} failed again: {error}");
                } else {
                    tracing::warn!(
                        "Watching the peering object {where_} failed, retrying: {error}"
                    );
                }
                self.watch_failing = true;
                return;
            }
        };
        if !self.watch_failing {
            let where_ = self.where_();
            if self.mandatory() {
                tracing::warn!("Paused {where_}: {reason} ({advice}).");
            } else {
                tracing::warn!("No peering {where_}: {reason} ({advice}, or use --standalone).");
            }
        }
        if self.mandatory() {
            self.block(reason);
        } else {
            self.present = false;
            self.unblock();
        }
        self.watch_failing = true;
    }

    fn block(&mut self, reason: String) {
        self.blocked = true;
        self.shared.blocks.set(Some(&self.place), Some(reason));
    }

    fn unblock(&mut self) {
        if self.blocked {
            tracing::info!(
                "Resuming operations after the pause. Conflicting operators with the same priority are gone."
            );
        }
        self.blocked = false;
        self.shared.blocks.set(Some(&self.place), None);
    }
}
