//! The `kapsel` command.
fn main() {}
