#[kapsel::on::event("pods")]
struct Handler;

fn main() {}
