//! The OpenAPI v2 document in gnostic's protobuf encoding (`openapi_v2.Document`).
//!
//! client-go fetches `/openapi/v2` only as
//! `application/com.github.proto-openapi.spec.v2@v1.0+protobuf`, and kubectl fails its
//! client-side validation on anything else (a 406 included), so the JSON document is
//! encoded here. Field numbers are those of gnostic's `openapiv2/OpenAPIv2.proto`. Vendor
//! extensions, defaults, examples and enum values are `Any` messages carrying their value as
//! YAML text (JSON is YAML), which is how kube-openapi's readers take them.

use serde_json::Value;

/// Protobuf output for one message.
#[derive(Default)]
struct Msg(Vec<u8>);

impl Msg {
    fn varint(&mut self, mut n: u64) {
        loop {
            let b = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                self.0.push(b);
                return;
            }
            self.0.push(b | 0x80);
        }
    }

    fn tag(&mut self, num: u64, wire: u64) {
        self.varint((num << 3) | wire);
    }

    fn bytes(&mut self, num: u64, b: &[u8]) {
        self.tag(num, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    fn string(&mut self, num: u64, v: Option<&Value>) {
        if let Some(s) = v.and_then(Value::as_str).filter(|s| !s.is_empty()) {
            self.bytes(num, s.as_bytes());
        }
    }

    fn strings(&mut self, num: u64, v: Option<&Value>) {
        for s in v.and_then(Value::as_array).into_iter().flatten() {
            if let Some(s) = s.as_str() {
                self.bytes(num, s.as_bytes());
            }
        }
    }

    fn boolean(&mut self, num: u64, v: Option<&Value>) {
        if v.and_then(Value::as_bool) == Some(true) {
            self.tag(num, 0);
            self.varint(1);
        }
    }

    fn int(&mut self, num: u64, v: Option<&Value>) {
        if let Some(n) = v.and_then(Value::as_i64).filter(|n| *n != 0) {
            self.tag(num, 0);
            self.varint(n as u64);
        }
    }

    fn double(&mut self, num: u64, v: Option<&Value>) {
        if let Some(n) = v.and_then(Value::as_f64).filter(|n| *n != 0.0) {
            self.tag(num, 1);
            self.0.extend_from_slice(&n.to_le_bytes());
        }
    }

    fn message(&mut self, num: u64, m: Msg) {
        self.bytes(num, &m.0);
    }
}

/// `Any { yaml = 2 }`.
fn any(v: &Value) -> Msg {
    let mut m = Msg::default();
    m.bytes(2, v.to_string().as_bytes());
    m
}

/// `NamedX { name = 1; value = 2 }`.
fn named(name: &str, value: Msg) -> Msg {
    let mut m = Msg::default();
    m.bytes(1, name.as_bytes());
    m.message(2, value);
    m
}

/// Every `x-` key of `v` as `NamedAny` entries in field `num`.
fn extensions(out: &mut Msg, num: u64, v: &Value) {
    for (k, x) in v.as_object().into_iter().flatten() {
        if k.starts_with("x-") {
            out.message(num, named(k, any(x)));
        }
    }
}

fn schema(v: &Value) -> Msg {
    let mut m = Msg::default();
    m.string(1, v.get("$ref"));
    m.string(2, v.get("format"));
    m.string(3, v.get("title"));
    m.string(4, v.get("description"));
    if let Some(d) = v.get("default") {
        m.message(5, any(d));
    }
    m.double(6, v.get("multipleOf"));
    m.double(7, v.get("maximum"));
    m.boolean(8, v.get("exclusiveMaximum"));
    m.double(9, v.get("minimum"));
    m.boolean(10, v.get("exclusiveMinimum"));
    m.int(11, v.get("maxLength"));
    m.int(12, v.get("minLength"));
    m.string(13, v.get("pattern"));
    m.int(14, v.get("maxItems"));
    m.int(15, v.get("minItems"));
    m.boolean(16, v.get("uniqueItems"));
    m.int(17, v.get("maxProperties"));
    m.int(18, v.get("minProperties"));
    m.strings(19, v.get("required"));
    for e in v
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.message(20, any(e));
    }
    match v.get("additionalProperties") {
        Some(Value::Bool(b)) => {
            let mut item = Msg::default();
            item.tag(2, 0);
            item.varint(u64::from(*b));
            m.message(21, item);
        }
        Some(s @ Value::Object(_)) => {
            let mut item = Msg::default();
            item.message(1, schema(s));
            m.message(21, item);
        }
        _ => {}
    }
    match v.get("type") {
        Some(t @ Value::String(_)) => {
            let mut item = Msg::default();
            item.string(1, Some(t));
            m.message(22, item);
        }
        Some(t @ Value::Array(_)) => {
            let mut item = Msg::default();
            item.strings(1, Some(t));
            m.message(22, item);
        }
        _ => {}
    }
    let items: Vec<&Value> = match v.get("items") {
        Some(Value::Array(a)) => a.iter().collect(),
        Some(s @ Value::Object(_)) => vec![s],
        _ => Vec::new(),
    };
    if !items.is_empty() {
        let mut item = Msg::default();
        for s in items {
            item.message(1, schema(s));
        }
        m.message(23, item);
    }
    for s in v
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.message(24, schema(s));
    }
    if let Some(props) = v.get("properties").and_then(Value::as_object) {
        let mut p = Msg::default();
        for (name, s) in props {
            p.message(1, named(name, schema(s)));
        }
        m.message(25, p);
    }
    m.string(26, v.get("discriminator"));
    m.boolean(27, v.get("readOnly"));
    if let Some(e) = v.get("example") {
        m.message(30, any(e));
    }
    extensions(&mut m, 31, v);
    m
}

/// A parameter: `ParametersItem { parameter = 1 | json_reference = 2 }`.
fn parameter(v: &Value) -> Msg {
    let mut item = Msg::default();
    if let Some(r) = v.get("$ref") {
        let mut jr = Msg::default();
        jr.string(1, Some(r));
        item.message(2, jr);
        return item;
    }
    let mut p = Msg::default();
    if v.get("in").and_then(Value::as_str) == Some("body") {
        let mut b = Msg::default();
        b.string(1, v.get("description"));
        b.string(2, v.get("name"));
        b.string(3, v.get("in"));
        b.boolean(4, v.get("required"));
        if let Some(s) = v.get("schema") {
            b.message(5, schema(s));
        }
        extensions(&mut b, 6, v);
        p.message(1, b);
    } else {
        // Query and form-data sub-schemas have allowEmptyValue (5) and so number the rest
        // one higher than path and header ones.
        let (which, shift) = match v.get("in").and_then(Value::as_str) {
            Some("header") => (1, 0),
            Some("formData") => (2, 1),
            Some("path") => (4, 0),
            _ => (3, 1),
        };
        let mut s = Msg::default();
        s.boolean(1, v.get("required"));
        s.string(2, v.get("in"));
        s.string(3, v.get("description"));
        s.string(4, v.get("name"));
        if shift == 1 {
            s.boolean(5, v.get("allowEmptyValue"));
        }
        s.string(5 + shift, v.get("type"));
        s.string(6 + shift, v.get("format"));
        s.boolean(19 + shift, v.get("uniqueItems"));
        extensions(&mut s, 22 + shift, v);
        let mut nb = Msg::default();
        nb.message(which, s);
        p.message(2, nb);
    }
    item.message(1, p);
    item
}

fn operation(v: &Value) -> Msg {
    let mut m = Msg::default();
    m.strings(1, v.get("tags"));
    m.string(2, v.get("summary"));
    m.string(3, v.get("description"));
    m.string(5, v.get("operationId"));
    m.strings(6, v.get("produces"));
    m.strings(7, v.get("consumes"));
    for p in v
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.message(8, parameter(p));
    }
    if let Some(rs) = v.get("responses").and_then(Value::as_object) {
        let mut responses = Msg::default();
        for (code, r) in rs {
            let mut resp = Msg::default();
            resp.string(1, r.get("description"));
            if let Some(s) = r.get("schema") {
                let mut item = Msg::default();
                item.message(1, schema(s));
                resp.message(2, item);
            }
            let mut value = Msg::default();
            value.message(1, resp);
            responses.message(1, named(code, value));
        }
        m.message(9, responses);
    }
    m.strings(10, v.get("schemes"));
    m.boolean(11, v.get("deprecated"));
    extensions(&mut m, 13, v);
    m
}

fn path_item(v: &Value) -> Msg {
    let mut m = Msg::default();
    m.string(1, v.get("$ref"));
    for (num, method) in [
        (2, "get"),
        (3, "put"),
        (4, "post"),
        (5, "delete"),
        (6, "options"),
        (7, "head"),
        (8, "patch"),
    ] {
        if let Some(op) = v.get(method) {
            m.message(num, operation(op));
        }
    }
    for p in v
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.message(9, parameter(p));
    }
    extensions(&mut m, 10, v);
    m
}

/// Encodes the `/openapi/v2` JSON document as an `openapi_v2.Document`.
pub(crate) fn encode(doc: &Value) -> Vec<u8> {
    let mut d = Msg::default();
    d.string(1, doc.get("swagger"));
    if let Some(info) = doc.get("info") {
        let mut i = Msg::default();
        i.string(1, info.get("title"));
        i.string(2, info.get("version"));
        i.string(3, info.get("description"));
        extensions(&mut i, 7, info);
        d.message(2, i);
    }
    d.string(3, doc.get("host"));
    d.string(4, doc.get("basePath"));
    d.strings(5, doc.get("schemes"));
    d.strings(6, doc.get("consumes"));
    d.strings(7, doc.get("produces"));
    if let Some(paths) = doc.get("paths").and_then(Value::as_object) {
        let mut ps = Msg::default();
        for (path, item) in paths {
            ps.message(2, named(path, path_item(item)));
        }
        d.message(8, ps);
    }
    if let Some(defs) = doc.get("definitions").and_then(Value::as_object) {
        let mut ds = Msg::default();
        for (name, s) in defs {
            ds.message(1, named(name, schema(s)));
        }
        d.message(9, ds);
    }
    for req in doc
        .get("security")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let mut r = Msg::default();
        for (name, scopes) in req.as_object().into_iter().flatten() {
            let mut arr = Msg::default();
            arr.strings(1, Some(scopes));
            r.message(1, named(name, arr));
        }
        d.message(12, r);
    }
    if let Some(defs) = doc.get("securityDefinitions").and_then(Value::as_object) {
        let mut ds = Msg::default();
        for (name, s) in defs {
            // Only apiKey schemes are served (BearerToken); others have no field here.
            if s.get("type").and_then(Value::as_str) != Some("apiKey") {
                continue;
            }
            let mut key = Msg::default();
            key.string(1, s.get("type"));
            key.string(2, s.get("name"));
            key.string(3, s.get("in"));
            key.string(4, s.get("description"));
            let mut item = Msg::default();
            item.message(2, key);
            ds.message(1, named(name, item));
        }
        d.message(13, ds);
    }
    extensions(&mut d, 16, doc);
    d.0
}
