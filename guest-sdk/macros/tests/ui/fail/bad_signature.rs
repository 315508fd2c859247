#[kapsel::on::event("pods")]
fn by_value(_cause: kapsel::Cause) {}

#[kapsel::on::event("pods")]
fn two(_cause: &kapsel::Cause, _more: u32) {}

#[kapsel::on::event("pods")]
async fn not_sync() {}

fn main() {}
