//! What changing handlers may return, and what the host receives for each
//! (KOPF.md §1.14: nothing, a map merged into `status.<id>`, any other value
//! assigned), plus the typed kwargs they read.

use std::collections::BTreeMap;

use kapsel::testing::{self, Outcome};
use kapsel::{Cause, DiffOp, Reason, Value, json};

#[derive(kapsel::serde::Serialize)]
#[serde(crate = "kapsel::serde")]
struct Summary {
    name: String,
    replicas: u32,
}

#[kapsel::on::create("kopfexamples")]
fn unit_result() -> kapsel::Result<()> {
    Ok(())
}

#[kapsel::on::create("kopfexamples")]
fn none_result() -> kapsel::Result<Option<u32>> {
    Ok(None)
}

#[kapsel::on::create("kopfexamples")]
fn some_result() -> kapsel::Result<Option<u32>> {
    Ok(Some(7))
}

#[kapsel::on::update("kopfexamples")]
fn value_result(cause: &Cause) -> kapsel::Result<Value> {
    Ok(json!({"changed": cause.diff().iter().map(|d| d.field()).collect::<Vec<_>>()}))
}

#[kapsel::on::update("kopfexamples")]
fn struct_result(cause: &Cause) -> kapsel::Result<Summary> {
    Ok(Summary {
        name: cause.name().unwrap_or_default().to_owned(),
        replicas: 3,
    })
}

#[kapsel::on::resume("kopfexamples")]
fn map_result(cause: &Cause) -> kapsel::Result<BTreeMap<String, String>> {
    let reason = cause.reason().map(Reason::as_str).unwrap_or("none");
    Ok(BTreeMap::from([("reason".to_owned(), reason.to_owned())]))
}

#[kapsel::on::field("kopfexamples", field = "spec.size")]
fn plain_text(cause: &Cause) -> String {
    let op = cause.diff().first().map_or("none", |d| d.op.as_str());
    format!("{op} at {}", cause.started_rfc3339())
}

#[kapsel::on::delete("kopfexamples")]
fn temporary() -> Result<u32, kapsel::TemporaryError> {
    Err(kapsel::TemporaryError::new("wait").with_delay(2.0))
}

#[kapsel::on::delete("kopfexamples", id = "std_error")]
fn std_error(cause: &Cause) -> Result<u32, std::num::ParseIntError> {
    cause.spec()["size"].as_str().unwrap_or("x").parse()
}

fn main() {
    let call = |id: &str, reason: Reason| {
        let mut cause = testing::cause()
            .handler_id(id)
            .changing(reason)
            .body(json!({"metadata": {"name": "kex", "namespace": "ns"}, "spec": {"size": "4"}}))
            .diff(json!([["change", ["spec", "size"], "3", "4"]]))
            .started("2026-11-30T03:32:51.611056+00:00")
            .build();
        assert_eq!(cause.diff()[0].op, DiffOp::Change);
        assert_eq!(cause.reason(), Some(reason));
        testing::invoke(&mut cause).outcome
    };
    assert_eq!(call("unit_result", Reason::Create), Outcome::Done(None));
    assert_eq!(call("none_result", Reason::Create), Outcome::Done(None));
    assert_eq!(call("some_result", Reason::Create), Outcome::Done(Some(json!(7))));
    assert_eq!(
        call("value_result", Reason::Update),
        Outcome::Done(Some(json!({"changed": ["spec.size"]})))
    );
    assert_eq!(
        call("struct_result", Reason::Update),
        Outcome::Done(Some(json!({"name": "kex", "replicas": 3})))
    );
    assert_eq!(
        call("map_result", Reason::Resume),
        Outcome::Done(Some(json!({"reason": "resume"})))
    );
    assert_eq!(
        call("plain_text/spec.size", Reason::Update),
        Outcome::Done(Some(json!("change at 2026-11-30T03:32:51.611056+00:00")))
    );
    assert_eq!(call("temporary", Reason::Delete), Outcome::Temporary("wait".into(), 2.0));
    assert_eq!(call("std_error", Reason::Delete), Outcome::Done(Some(json!(4))));
}
