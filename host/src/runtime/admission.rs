//! A guest's admission handlers (Kopf's `on.validate` and `on.mutate`): their calls,
//! declarations checked at load, and the WIT `admission` imports as the guest calls them
//! (the declarations during `describe`; an admission call's request, warnings and refusal
//! code).

use serde_json::{Value, json};

use super::bindings::{
    AdmissionDeclaration, AdmissionImports, AdmissionRequest, DescribeOutput, HandlerKind, Webhook,
};
use super::bindings::{Cause, Reply};
use super::describe::DeclarationError;
use super::guest::Guest;
use super::invoke::{CallError, Export, Returned, mismatch};
use super::services::CallContext;
use super::state::{Admitted, HostState};

/// The operations an admission rule names (kube's `OperationType`).
pub(crate) const OPERATIONS: [&str; 4] = ["CREATE", "UPDATE", "DELETE", "CONNECT"];

/// Checks the admission handlers a guest declared (`admission.declare`): each names,
/// once, an id whose registrations are all event registrations (so that the reactor
/// never calls it for a watch event), with Kopf's operations and a subresource that says
/// something.
pub(super) fn validate_admissions(
    output: &DescribeOutput,
    declared: &[AdmissionDeclaration],
) -> Result<(), DeclarationError> {
    let mut seen = std::collections::HashSet::new();
    for declaration in declared {
        let id = &declaration.id;
        let mut registrations = output.handlers.iter().filter(|r| &r.id == id).peekable();
        if registrations.peek().is_none() || registrations.any(|r| r.kind != HandlerKind::Event) {
            return Err(DeclarationError::NotAnAdmissionRegistration(id.clone()));
        }
        if !seen.insert(id) {
            return Err(DeclarationError::AdmissionTwice(id.clone()));
        }
        if let Some(operation) = declaration
            .operations
            .iter()
            .find(|operation| !OPERATIONS.contains(&operation.as_str()))
        {
            return Err(DeclarationError::AdmissionOperation {
                id: id.clone(),
                operation: operation.clone(),
            });
        }
        if declaration.subresource.as_deref() == Some("") {
            return Err(DeclarationError::AdmissionSubresource(id.clone()));
        }
    }
    Ok(())
}

// Which handlers admit is part of what the guest declares at load: kept for the loader,
// which checks them against the registrations. What an admission call answers beside its
// reply is kept for the call's end, which hands it over with the reply.
impl AdmissionImports for HostState {
    fn declare(&mut self, declarations: Vec<AdmissionDeclaration>) -> wasmtime::Result<()> {
        match &mut self.admissions {
            // Once per `describe`, so that the list is bounded by the guest's own memory.
            Some(declared) if declared.is_empty() => {
                *declared = declarations;
                Ok(())
            }
            Some(_) => Err(self.refuse("declared its admission handlers twice".to_owned())),
            None => Err(self.refuse(
                "declared admission handlers outside describe (admission.declare is for \
                 describe only)"
                    .to_owned(),
            )),
        }
    }

    fn current(&mut self) -> wasmtime::Result<Option<AdmissionRequest>> {
        Ok(self.admission.as_ref().map(|call| call.request.clone()))
    }

    fn warn(&mut self, message: String) -> wasmtime::Result<()> {
        if self.admission.is_none() {
            return Ok(());
        }
        // A warning is a line the client reads: bounded as the call's log lines are, and
        // counted with them.
        self.admit_log(&message)?;
        if let Some(call) = &mut self.admission {
            call.warnings.push(message);
        }
        Ok(())
    }

    fn reject(&mut self, code: u16) -> wasmtime::Result<()> {
        if let Some(call) = &mut self.admission {
            call.rejected = Some(code);
        }
        Ok(())
    }
}

// The calls of admission handlers: `invoke` and `when` with the request the imports answer.
impl Guest {
    /// Calls the guest's `invoke` export for the admission handler named by
    /// `cause.handler_id`, answering `request`.
    ///
    /// The call's deadline is its registration's, else the runtime's admission budget
    /// (shorter than other calls': a write waits for it).
    ///
    /// # Errors
    /// As [`Guest::invoke`].
    pub(crate) async fn admit(
        &self,
        cause: Cause,
        request: AdmissionRequest,
        ctx: CallContext,
    ) -> Result<(Reply, Admitted), CallError> {
        let mut budget = self.budget(&cause.handler_id);
        let declared = self
            .describe()
            .handlers
            .iter()
            .any(|r| r.id == cause.handler_id && r.deadline_ms.is_some());
        if !declared {
            budget.deadline = self.runtime().limits().admission_deadline;
        }
        match self
            .call(budget, ctx, Export::Admit(cause, request))
            .await?
        {
            Returned::Admitted(reply, admitted) => Ok((reply, admitted)),
            _ => Err(mismatch()),
        }
    }

    /// Calls the guest's `when` export for the admission handler named by
    /// `cause.handler_id`, about `request` (which `admission.current` answers meanwhile).
    ///
    /// # Errors
    /// As [`Guest::invoke`].
    pub(crate) async fn admission_when(
        &self,
        cause: Cause,
        request: AdmissionRequest,
        ctx: CallContext,
    ) -> Result<bool, CallError> {
        let mut budget = self.budget(&cause.handler_id);
        budget.deadline = budget
            .deadline
            .min(self.runtime().limits().admission_deadline);
        match self
            .call(budget, ctx, Export::AdmitWhen(cause, request))
            .await?
        {
            Returned::When(applies) => Ok(applies),
            _ => Err(mismatch()),
        }
    }
}

/// Marks the admission handlers in a guest's rendering (`describe_json`, for `kapsel
/// inspect`): their kind is `validate` or `mutate`, with their options beside it.
pub(crate) fn add_admissions_json(rendered: &mut Value, declared: &[AdmissionDeclaration]) {
    let Some(handlers) = rendered.get_mut("handlers").and_then(Value::as_array_mut) else {
        return;
    };
    for handler in handlers {
        let id = handler
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let Some(declaration) = declared.iter().find(|d| d.id == id) else {
            continue;
        };
        let Value::Object(fields) = handler else {
            continue;
        };
        let kind = match declaration.webhook {
            Webhook::Validating => "validate",
            Webhook::Mutating => "mutate",
        };
        fields.insert("kind".to_owned(), json!(kind));
        if !declaration.operations.is_empty() {
            fields.insert("operations".to_owned(), json!(declaration.operations));
        }
        if let Some(subresource) = &declaration.subresource {
            fields.insert("subresource".to_owned(), json!(subresource));
        }
        for (flag, set) in [
            ("persistent", declaration.persistent),
            ("side_effects", declaration.side_effects),
            ("ignore_failures", declaration.ignore_failures),
        ] {
            if set {
                fields.insert(flag.to_owned(), Value::Bool(true));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::state::AdmissionCall;
    use crate::runtime::state::test_state as fresh_state;

    fn declaration(id: &str) -> AdmissionDeclaration {
        AdmissionDeclaration {
            id: id.to_owned(),
            webhook: Webhook::Validating,
            operations: Vec::new(),
            subresource: None,
            persistent: false,
            side_effects: false,
            ignore_failures: false,
        }
    }

    fn request() -> AdmissionRequest {
        AdmissionRequest {
            uid: "uid-1".to_owned(),
            operation: "CREATE".to_owned(),
            subresource: None,
            dry_run: false,
            user_info: "{}".to_owned(),
            options: None,
        }
    }

    #[test]
    fn admission_handlers_are_declared_once_in_describe() {
        let mut state = fresh_state();
        let refused = AdmissionImports::declare(&mut state, vec![declaration("check")])
            .expect_err("not describe");
        assert!(
            refused.to_string().contains("outside describe"),
            "{refused}"
        );
        let mut state = fresh_state();
        state.admissions = Some(Vec::new());
        AdmissionImports::declare(&mut state, vec![declaration("check")]).expect("in describe");
        assert_eq!(state.admissions, Some(vec![declaration("check")]));
        let refused =
            AdmissionImports::declare(&mut state, vec![declaration("more")]).expect_err("twice");
        assert!(refused.to_string().contains("twice"), "{refused}");
    }

    #[test]
    fn only_an_admission_call_has_a_request_warnings_and_a_code() {
        let mut state = fresh_state();
        assert_eq!(AdmissionImports::current(&mut state).unwrap(), None);
        AdmissionImports::warn(&mut state, "ignored".to_owned()).unwrap();
        AdmissionImports::reject(&mut state, 422).unwrap();
        assert!(state.admission.is_none());

        state.admission = Some(AdmissionCall {
            request: request(),
            warnings: Vec::new(),
            rejected: None,
        });
        assert_eq!(
            AdmissionImports::current(&mut state).unwrap(),
            Some(request())
        );
        AdmissionImports::warn(&mut state, "careful".to_owned()).unwrap();
        AdmissionImports::reject(&mut state, 422).unwrap();
        let call = state.admission.as_ref().unwrap();
        assert_eq!(call.warnings, ["careful"]);
        assert_eq!(call.rejected, Some(422));
    }

    #[test]
    fn warnings_count_against_the_calls_log_limits() {
        let mut state = fresh_state();
        state.admission = Some(AdmissionCall {
            request: request(),
            warnings: Vec::new(),
            rejected: None,
        });
        let long = "w".repeat(state.limits.max_log_line_bytes + 1);
        let refused = AdmissionImports::warn(&mut state, long).expect_err("too long");
        assert!(
            refused.to_string().contains("max-log-line-bytes"),
            "{refused}"
        );
        assert!(state.admission.as_ref().unwrap().warnings.is_empty());
    }

    #[test]
    fn admission_handlers_render_as_validate_and_mutate() {
        let mut rendered = json!({"handlers": [
            {"id": "check", "kind": "event"}, {"id": "label", "kind": "event"}, {"id": "plain", "kind": "event"},
        ]});
        let check = AdmissionDeclaration {
            id: "check".to_owned(),
            webhook: Webhook::Validating,
            operations: vec!["CREATE".to_owned()],
            subresource: Some("status".to_owned()),
            persistent: true,
            side_effects: false,
            ignore_failures: true,
        };
        let label = AdmissionDeclaration {
            id: "label".to_owned(),
            webhook: Webhook::Mutating,
            operations: Vec::new(),
            subresource: None,
            persistent: false,
            side_effects: true,
            ignore_failures: false,
        };
        add_admissions_json(&mut rendered, &[check, label]);
        assert_eq!(
            rendered,
            json!({"handlers": [
                {"id": "check", "kind": "validate", "operations": ["CREATE"], "subresource": "status",
                 "persistent": true, "ignore_failures": true},
                {"id": "label", "kind": "mutate", "side_effects": true},
                {"id": "plain", "kind": "event"},
            ]})
        );
    }
}
