#[kapsel::on::create("pods", errors = "sometimes")]
fn a() {}

#[kapsel::on::create("pods", labels(app = 3))]
fn b() {}

#[kapsel::on::create("pods", timeout = "1s")]
fn c() {}

#[kapsel::on::startup("pods")]
fn d() {}

#[kapsel::on::field("pods")]
fn e() {}

fn main() {}
