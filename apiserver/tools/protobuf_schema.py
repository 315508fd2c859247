#!/usr/bin/env python3
"""Writes src/protobuf/schema.txt: the protobuf field table of the built-in kinds whose
protobuf request bodies the server decodes.

Usage: tools/protobuf_schema.py API_CHECKOUT APIMACHINERY_CHECKOUT > src/protobuf/schema.txt
where the checkouts are of github.com/kubernetes/api and github.com/kubernetes/apimachinery.

Field numbers and types come from each package's generated.proto; from its types.go, each
field's JSON name and whether a zero value shows in JSON (a pointer or a field without
`omitempty` keeps it) or is inlined into its parent (`json:",inline"`).
"""
import os
import re
import sys

API, MACHINERY = sys.argv[1], sys.argv[2]
PACKAGES = {
    "k8s.io.api.core.v1": (API, "core/v1"),
    "k8s.io.api.apps.v1": (API, "apps/v1"),
    "k8s.io.api.batch.v1": (API, "batch/v1"),
    "k8s.io.api.rbac.v1": (API, "rbac/v1"),
    "k8s.io.api.scheduling.v1": (API, "scheduling/v1"),
    "k8s.io.api.policy.v1": (API, "policy/v1"),
    "k8s.io.api.networking.v1": (API, "networking/v1"),
    "k8s.io.api.authentication.v1": (API, "authentication/v1"),
    "k8s.io.api.authorization.v1": (API, "authorization/v1"),
    "k8s.io.api.coordination.v1": (API, "coordination/v1"),
    "k8s.io.api.certificates.v1": (API, "certificates/v1"),
    "k8s.io.api.discovery.v1": (API, "discovery/v1"),
    "k8s.io.apimachinery.pkg.apis.meta.v1": (MACHINERY, "pkg/apis/meta/v1"),
}
# Messages with their own JSON form, decoded by hand in protobuf.rs.
SPECIAL = {
    "k8s.io.apimachinery.pkg.apis.meta.v1.Time",
    "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime",
    "k8s.io.apimachinery.pkg.apis.meta.v1.Duration",
    "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1",
    "k8s.io.apimachinery.pkg.api.resource.Quantity",
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString",
    "k8s.io.apimachinery.pkg.runtime.RawExtension",
}
ROOTS = [
    "core.v1." + k for k in ("Namespace Pod ConfigMap Secret Service ServiceAccount Event "
                             "Endpoints Node PersistentVolumeClaim ResourceQuota").split()
] + [
    "apps.v1.Deployment", "apps.v1.ReplicaSet", "apps.v1.StatefulSet", "apps.v1.DaemonSet",
    "batch.v1.Job", "batch.v1.CronJob", "rbac.v1.Role", "rbac.v1.RoleBinding",
    "rbac.v1.ClusterRole", "rbac.v1.ClusterRoleBinding", "scheduling.v1.PriorityClass",
    "policy.v1.PodDisruptionBudget", "networking.v1.Ingress", "coordination.v1.Lease",
    "authentication.v1.TokenRequest", "authentication.v1.SelfSubjectReview",
    "authorization.v1.SelfSubjectAccessReview", "authentication.v1.TokenReview",
    "certificates.v1.CertificateSigningRequest", "discovery.v1.EndpointSlice",
]
FIELD = re.compile(r"^\s*(optional|repeated)?\s*(map<\s*string\s*,\s*([\w.]+)\s*>|[\w.]+)\s+(\w+)\s*=\s*(\d+);")


def read(base, rel):
    with open(os.path.join(base, rel)) as f:
        return f.read()


def protos():
    msgs = {}
    for pkg, (base, d) in PACKAGES.items():
        cur = None
        for line in read(base, d + "/generated.proto").splitlines():
            m = re.match(r"^message (\w+) \{", line)
            if m:
                cur = pkg + "." + m.group(1)
                msgs[cur] = []
                continue
            if line.startswith("}"):
                cur = None
                continue
            f = FIELD.match(line)
            if cur and f:
                label, ty, mapval, name, num = f.groups()
                msgs[cur].append((int(num), name, ty if not mapval else None, mapval, label == "repeated", pkg))
    return msgs


def go_fields():
    """(package, struct, proto name) -> (json name, keep zero, inline)."""
    out = {}
    tag = re.compile(r'^\s+(\w*)\s*(\S*)\s+`(.*)`')
    for pkg, (base, d) in PACKAGES.items():
        for fn in sorted(os.listdir(os.path.join(base, d))):
            if not fn.endswith(".go") or fn.endswith("_test.go") or fn.startswith("zz_") or fn == "generated.pb.go":
                continue
            struct = None
            for line in read(base, os.path.join(d, fn)).splitlines():
                m = re.match(r"^type (\w+) struct \{", line)
                if m:
                    struct = m.group(1)
                    continue
                if line.startswith("}"):
                    struct = None
                    continue
                t = tag.match(line)
                if not (struct and t):
                    continue
                gotype, tags = t.group(2), t.group(3)
                pb = re.search(r'protobuf:"[^"]*name=(\w+)', tags)
                js = re.search(r'json:"([^"]*)"', tags)
                if not pb or not js:
                    continue
                parts = js.group(1).split(",")
                # An embedded struct (no Go type after the name) without a JSON name is inlined.
                inline = "inline" in parts[1:] or (parts[0] == "" and gotype == "")
                pointer = gotype.startswith("*")
                keep = pointer or "omitempty" not in parts[1:]
                out[(pkg, struct, pb.group(1))] = (parts[0], keep, inline)
    return out


def resolve(ty, pkg):
    if ty.startswith("."):
        return ty[1:]
    if ty in ("string", "bytes", "bool", "int32", "int64", "double", "float", "uint32", "uint64"):
        return ty
    return pkg + "." + ty


def main():
    msgs = protos()
    go = go_fields()
    todo = ["k8s.io.api." + r if not r.startswith("apimachinery") else "k8s.io." + r for r in ROOTS]
    seen, lines = set(), []
    while todo:
        m = todo.pop(0)
        if m in seen or m in SPECIAL:
            continue
        seen.add(m)
        if m not in msgs:
            sys.exit(f"unknown message {m}")
        pkg, struct = m.rsplit(".", 1)
        before = len(lines)
        for num, name, ty, mapval, rep, _ in sorted(msgs[m]):
            json_name, keep, inline = go.get((pkg, struct, name), (name, True, False))
            if mapval:
                kind = "map:" + resolve(mapval, pkg)
                target = resolve(mapval, pkg)
            else:
                kind = resolve(ty, pkg)
                target = kind
            if "." in target and target not in msgs and target not in SPECIAL:
                # A message of a package outside this table (an alpha API): such a field is
                # left out, so a body carrying it is refused rather than guessed.
                continue
            if "." in target:
                todo.append(target)
            flags = "rep" if rep else ("inline" if inline else ("keep" if keep else "omit"))
            short = "map:" + kind[4:].removeprefix("k8s.io.") if kind.startswith("map:") else kind.removeprefix("k8s.io.")
            lines.append(f"{m.removeprefix('k8s.io.')} {num} {json_name or name} {short} {flags}")
        if len(lines) == before:
            # Every field left out: the message is known, and accepts no field.
            lines.append(f"{m.removeprefix('k8s.io.')} 0 - - empty")
    print("# Generated by tools/protobuf_schema.py from k8s.io/api and k8s.io/apimachinery; do not edit.")
    print("# message field-number json-name type flags (rep: repeated; keep: a zero value shows; omit: it does not; inline: fields go to the parent; empty: a message with no field)")
    print("\n".join(lines))


main()
