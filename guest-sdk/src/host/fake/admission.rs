//! The fake host's admission calls: the request a test makes current, and what the
//! handler said about it (its warnings, the code it refused with), as the host's webhook
//! server would collect them; and the declarations `describe` would name.

use std::cell::RefCell;

use crate::host::{AdmissionDeclaration, AdmissionRequest};

#[derive(Default)]
struct FakeAdmission {
    /// The current call's request; none outside an admission call.
    request: Option<AdmissionRequest>,
    /// The warnings of the current call, in order.
    warnings: Vec<String>,
    /// The code the current call's failure refuses with (`admission.reject`).
    rejected: Option<u16>,
    /// What `describe` declared last.
    declared: Vec<AdmissionDeclaration>,
}

thread_local! {
    static ADMISSION: RefCell<FakeAdmission> = RefCell::new(FakeAdmission::default());
}

pub(crate) fn declare(declarations: &[AdmissionDeclaration]) {
    ADMISSION.with_borrow_mut(|fake| fake.declared = declarations.to_vec());
}

pub(crate) fn request() -> Option<AdmissionRequest> {
    ADMISSION.with_borrow(|fake| fake.request.clone())
}

/// Kept only during an admission call, as the host ignores it in any other.
pub(crate) fn warn(message: &str) {
    ADMISSION.with_borrow_mut(|fake| {
        if fake.request.is_some() {
            fake.warnings.push(message.to_owned());
        }
    });
}

/// Kept only during an admission call, as the host ignores it in any other.
pub(crate) fn reject(code: u16) {
    ADMISSION.with_borrow_mut(|fake| {
        if fake.request.is_some() {
            fake.rejected = Some(code);
        }
    });
}

/// Makes `request` the current call's (none: no admission call), with no warnings and no
/// rejection yet.
pub(crate) fn begin(request: Option<AdmissionRequest>) {
    ADMISSION.with_borrow_mut(|fake| {
        fake.request = request;
        fake.warnings.clear();
        fake.rejected = None;
    });
}

/// The warnings of the current (or last) admission call.
pub(crate) fn warnings() -> Vec<String> {
    ADMISSION.with_borrow(|fake| fake.warnings.clone())
}

/// The code the current (or last) admission call refused with, if it called `reject`.
pub(crate) fn rejected() -> Option<u16> {
    ADMISSION.with_borrow(|fake| fake.rejected)
}

/// What `describe` declared last.
pub(crate) fn declared() -> Vec<AdmissionDeclaration> {
    ADMISSION.with_borrow(|fake| fake.declared.clone())
}

pub(crate) fn reset() {
    ADMISSION.with_borrow_mut(|fake| *fake = FakeAdmission::default());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_and_rejections_count_only_during_an_admission_call() {
        reset();
        warn("outside");
        reject(400);
        assert_eq!((warnings(), rejected()), (Vec::<String>::new(), None));
        begin(Some(AdmissionRequest::default()));
        warn("inside");
        reject(422);
        assert_eq!(
            (warnings(), rejected()),
            (vec!["inside".to_owned()], Some(422))
        );
        begin(None);
        assert_eq!(
            (warnings(), rejected(), request()),
            (Vec::new(), None, None)
        );
    }
}
