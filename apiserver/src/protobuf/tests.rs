//! Unit tests of the protobuf decoder on hand-built bodies.

use super::*;

/// A length-delimited field.
fn field(num: u64, payload: &[u8]) -> Vec<u8> {
    let mut v = varint((num << 3) | 2);
    v.extend(varint(payload.len() as u64));
    v.extend_from_slice(payload);
    v
}

fn int(num: u64, value: u64) -> Vec<u8> {
    let mut v = varint(num << 3);
    v.extend(varint(value));
    v
}

fn varint(mut n: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            return out;
        }
        out.push(b | 0x80);
    }
}

fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let tm = [field(1, api_version.as_bytes()), field(2, kind.as_bytes())].concat();
    [b"k8s\0".as_slice(), &field(1, &tm), &field(2, raw)].concat()
}

#[test]
fn every_referenced_message_is_in_the_table() {
    let t = table();
    assert!(t.len() > 200, "{} messages", t.len());
    for fields in t.values() {
        for f in fields {
            let ty = f.ty.strip_prefix("map:").unwrap_or(f.ty);
            if ty.contains('.') {
                let special = ["Time", "MicroTime", "IntOrString", "Quantity", "FieldsV1"];
                assert!(
                    t.contains_key(ty) || special.contains(&short(ty)),
                    "{} refers to the unknown {ty}",
                    f.name
                );
            }
        }
    }
}

#[test]
fn decodes_a_configmap_envelope() {
    let meta = [
        field(1, b"cm1"),
        field(4, b""),
        field(11, &[field(1, b"a"), field(2, b"b")].concat()),
    ]
    .concat();
    let cm = [
        field(1, &meta),
        field(2, &[field(1, b"k"), field(2, b"v")].concat()),
        field(3, &[field(1, b"bin"), field(2, b"hi")].concat()),
    ]
    .concat();
    let v = decode(&envelope("v1", "ConfigMap", &cm)).unwrap();
    assert_eq!(
        v,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm1", "labels": {"a": "b"}}, "data": {"k": "v"}, "binaryData": {"bin": "aGk="}})
    );
    assert_eq!(decode(b"k8s\0\xff").unwrap_err().code, 415);
    assert_eq!(base64(b"abcd"), "YWJjZA==");
}

#[test]
fn decodes_a_deployment_with_its_special_fields() {
    let port = int(3, 80);
    let limits = field(
        1,
        &[field(1, b"cpu"), field(2, &field(1, b"500m"))].concat(),
    );
    let container = [
        field(1, b"app"),
        field(2, b"nginx"),
        field(6, &port),
        field(8, &limits),
        int(16, 0), // stdin: false, omitempty: not shown
    ]
    .concat();
    let volume = [field(1, b"data"), field(2, &field(2, &[]))].concat(); // emptyDir, inlined
    let pod_spec = [field(1, &volume), field(2, &container)].concat();
    let template = [
        field(
            1,
            &field(11, &[field(1, b"app"), field(2, b"web")].concat()),
        ),
        field(2, &pod_spec),
    ]
    .concat();
    let max_surge = [int(1, 1), field(3, b"25%")].concat(); // IntOrString string
    let max_unavailable = [int(1, 0), int(2, 2)].concat(); // IntOrString int
    let strategy = [
        field(1, b"RollingUpdate"),
        field(
            2,
            &[field(1, &max_unavailable), field(2, &max_surge)].concat(),
        ),
    ]
    .concat();
    let spec = [
        int(1, 0), // replicas: 0 is a pointer's value and shows
        field(3, &template),
        field(4, &strategy),
        int(5, 0), // minReadySeconds: 0, omitempty
    ]
    .concat();
    let created = [int(1, 1_700_000_000)].concat();
    let meta = [field(1, b"web"), field(8, &created)].concat();
    let d = [field(1, &meta), field(2, &spec), field(3, &[])].concat();
    let v = decode(&envelope("apps/v1", "Deployment", &d)).unwrap();
    assert_eq!(v["metadata"]["creationTimestamp"], "2023-11-14T22:13:20Z");
    assert_eq!(v["spec"]["replicas"], 0);
    assert!(v["spec"].get("minReadySeconds").is_none(), "{v}");
    assert_eq!(
        v["spec"]["strategy"]["rollingUpdate"],
        json!({"maxUnavailable": 2, "maxSurge": "25%"})
    );
    let pod = &v["spec"]["template"]["spec"];
    assert_eq!(pod["volumes"], json!([{"name": "data", "emptyDir": {}}]));
    assert_eq!(
        pod["containers"],
        json!([{"name": "app", "image": "nginx", "ports": [{"containerPort": 80}], "resources": {"limits": {"cpu": "500m"}}}])
    );
    assert_eq!(v["status"], json!({}));
}

#[test]
fn refuses_what_it_cannot_decode_faithfully() {
    // A field number the table does not know.
    let cm = [field(1, &field(1, b"x")), field(99, b"?")].concat();
    let e = decode(&envelope("v1", "ConfigMap", &cm)).unwrap_err();
    assert_eq!(e.code, 415);
    assert!(e.message.contains("field 99 of ConfigMap"), "{}", e.message);
    // A kind outside the table.
    let e = decode(&envelope("example.com/v1", "Widget", &[])).unwrap_err();
    assert_eq!(e.code, 415);
    // A wrong wire type for a field.
    let e = decode(&envelope("v1", "ConfigMap", &int(1, 3))).unwrap_err();
    assert_eq!(e.code, 415);
}
