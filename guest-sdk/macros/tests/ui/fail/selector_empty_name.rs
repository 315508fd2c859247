#[kapsel::on::event("v1", "")]
fn handler() {}

fn main() {}
