#[kapsel::on::update("pods", field = "spec.x", value = 3, old = present)]
fn handler() {}

fn main() {}
