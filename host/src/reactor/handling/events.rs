//! [`Events`]: the raw event handlers (`on.event`, KOPF.md §1.7) of an object's event.
//! They are never retried: a failure is logged and ignored, as raw events are not
//! persisted anywhere a retry could come from. What they return goes to `status.<id>`,
//! and the patches they build are applied with the event's other changes, as Kopf
//! applies them after the handlers of the event.

use std::collections::HashSet;

use super::EventContext;
use super::calls::{Attempting, Calls, Success};
use crate::handlers::execution::Retrying;
use crate::reactor::changes::Patch;
use crate::reactor::objects::ObjectMemory;

/// The on.event stage.
#[derive(Clone)]
pub(crate) struct Events {
    pub(super) calls: Calls,
}

impl Events {
    /// Calls every matching on.event handler once; their results (`status.<id>`, KOPF.md
    /// §1.14) and their own patches go into `patch`.
    pub(super) async fn run(
        &self,
        ctx: &EventContext<'_>,
        memory: &ObjectMemory,
        patch: &mut Patch,
    ) {
        let mut called: HashSet<(String, String)> = HashSet::new();
        for handler in &ctx.handlers.resource.event {
            if !handler.spec.filters.matches_body(&ctx.event.body)
                || called.contains(&handler.identity())
                || !self.calls.passes_when(handler, ctx, None).await
            {
                continue;
            }
            called.insert(handler.identity());
            let how = Attempting {
                details: None,
                standing: None,
                // Nothing brings a raw event back: what would be retried is ignored.
                retrying: Retrying::Never,
                success: Success::Debug,
                subhandlers: None,
            };
            let decision = self.calls.attempt(handler, ctx, how, memory, patch).await;
            if let Some(result) = &decision.outcome.result {
                patch.deliver_result(&handler.spec.id, result);
            }
        }
    }
}
