#[kapsel::on::event("pods", retries = 3)]
fn handler() {}

#[kapsel::on::create("pods", colour = "blue")]
fn other() {}

fn main() {}
