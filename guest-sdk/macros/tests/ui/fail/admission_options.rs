#[kapsel::on::validate("kopfexamples", operations = ["create"])]
fn a() {}

#[kapsel::on::validate("kopfexamples", operations = ["PATCH"])]
fn b() {}

#[kapsel::on::mutate("kopfexamples", operations = [])]
fn c() {}

#[kapsel::on::validate("kopfexamples", retries = 3)]
fn d() {}

#[kapsel::on::mutate("kopfexamples", errors = "ignored")]
fn e() {}

#[kapsel::on::validate("kopfexamples", timeout = 1)]
fn f() {}

#[kapsel::on::mutate("kopfexamples", backoff = 1)]
fn g() {}

#[kapsel::on::validate("kopfexamples", subresource = "status/scale")]
fn h() {}

#[kapsel::on::create("kopfexamples", operations = ["CREATE"])]
fn i() {}

#[kapsel::on::validate("kopfexamples", operation = "UPSERT")]
fn j() {}

#[kapsel::on::validate("kopfexamples", side_effects = "yes")]
fn k() {}

#[kapsel::on::validate(operations = ["CREATE"])]
fn l() {}

#[kapsel::on::mutate("kopfexamples", field = "spec.x", old = 1)]
fn m() {}

fn main() {}
