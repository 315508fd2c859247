kapsel::permit!("v1", "configmaps", verbs = ["get", "update"]);
kapsel::permit!("v1", "configmaps", verbs = []);
kapsel::permit!("v1", "configmaps", verbs = ["get", "get"]);
kapsel::permit!("v1", "configmaps", verbs = "get");
kapsel::permit!("v1", "configmaps");

fn main() {}
