#[kapsel::on::event(id = "x")]
fn handler() {}

fn main() {}
