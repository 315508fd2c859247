#[kapsel::on::update("pods", value = 3)]
fn handler() {}

fn main() {}
