#[kapsel::on::event("kopf.dev", "v1", "kopfexamples", "extra")]
fn handler() {}

fn main() {}
