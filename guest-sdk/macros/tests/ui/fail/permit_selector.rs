kapsel::permit!(verbs = ["get"]);
kapsel::permit!("a", "b", "c", "d", verbs = ["get"]);
kapsel::permit!("pods", id = "x", verbs = ["get"]);
kapsel::permit!("pods", plural = "pods", verbs = ["get"]);

fn main() {}
