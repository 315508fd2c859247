//! A test guest whose `describe` panics: the host must reject it at load with a message
//! naming the file and the trap, and keep its other guests.

#[allow(
    unsafe_code,
    reason = "wit-bindgen's generated export glue is unsafe by nature"
)]
mod bindings {
    wit_bindgen::generate!({ path: "../../../wit", world: "guest" });

    use super::BadDescribe;
    export!(BadDescribe with_types_in self);
}

use bindings::kapsel::operator::types::{Cause, DescribeOutput, IndexOutcome, Outcome, Reply};

struct BadDescribe;

impl bindings::Guest for BadDescribe {
    fn describe() -> DescribeOutput {
        panic!("describe is broken on purpose")
    }

    fn invoke(_cause: Cause) -> Reply {
        Reply {
            outcome: Outcome::Permanent("unreachable".to_owned()),
            patch: None,
            memo: None,
        }
    }

    fn index(_cause: Cause) -> IndexOutcome {
        IndexOutcome::Keep
    }

    fn when(_cause: Cause) -> bool {
        false
    }
}
