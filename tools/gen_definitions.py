"""Regenerate connector/protocol/definitions/ from Kafka's message JSON files.

Usage: python tools/gen_definitions.py PATH/TO/kafka-protocol connector/protocol/definitions

One module per part of the protocol (FAMILIES), so no table outgrows a readable module;
`definitions/__init__.py` joins them.

The output is minilog's own compact declaration of each supported message, limited to the
versions minilog implements (SUPPORTED below). Field docs are left out: the JSON files are
the reference, this is the table the codec runs from.
"""
import json
import re
import sys
import textwrap
from pathlib import Path

# The modules of connector/protocol/definitions/, one part of the protocol each: module ->
# (what its docstring says it holds, {API name: (min version, max version) minilog declares}).
FAMILIES = {
    "data": ("the data path: what every producer and consumer sends, and the replicas' fetches", {
        "ApiVersions": (0, 4), "Metadata": (0, 12), "Produce": (0, 11), "Fetch": (0, 16),
        "ListOffsets": (0, 9), "DeleteRecords": (0, 2), "OffsetForLeaderEpoch": (0, 4)}),
    "groups": ("consumer groups: the classic protocol, KIP-848's, and committed offsets", {
        "FindCoordinator": (0, 6), "OffsetCommit": (0, 9), "OffsetFetch": (0, 9),
        "JoinGroup": (0, 9), "Heartbeat": (0, 4), "LeaveGroup": (0, 5), "SyncGroup": (0, 5),
        "DescribeGroups": (0, 5), "ListGroups": (0, 5), "DeleteGroups": (0, 2),
        "OffsetDelete": (0, 0), "ConsumerGroupHeartbeat": (0, 1),
        "ConsumerGroupDescribe": (0, 1)}),
    "admin": ("administration: topics, partitions, configs, the cluster and its log dirs", {
        "CreateTopics": (0, 7), "DeleteTopics": (0, 6), "CreatePartitions": (0, 3),
        "DescribeConfigs": (0, 4), "AlterConfigs": (0, 2), "IncrementalAlterConfigs": (0, 1),
        "DescribeCluster": (0, 1), "DescribeLogDirs": (0, 4), "ElectLeaders": (0, 2),
        "AlterPartitionReassignments": (0, 0), "ListPartitionReassignments": (0, 0)}),
    "transactions": ("idempotence and transactions (KIP-98, KIP-447): coordinator APIs, the "
                     "markers between brokers, and their description", {
        "InitProducerId": (0, 6), "AddPartitionsToTxn": (0, 5), "AddOffsetsToTxn": (0, 4),
        "TxnOffsetCommit": (0, 4), "EndTxn": (0, 5), "WriteTxnMarkers": (0, 1),
        "DescribeTransactions": (0, 0), "ListTransactions": (0, 1),
        "DescribeProducers": (0, 0)}),
    "inter_broker": ("between brokers: the controller quorum (Raft), registration, ISR changes, "
                     "forwarding and producer-id blocks", {
        "Vote": (0, 2), "BeginQuorumEpoch": (0, 0), "EndQuorumEpoch": (0, 0),
        "BrokerRegistration": (0, 0), "BrokerHeartbeat": (0, 0), "AlterPartition": (0, 3),
        "Envelope": (0, 0), "AllocateProducerIds": (0, 0)}),
    "security": ("security: SASL authentication, SCRAM credentials (KIP-554) and ACLs", {
        "SaslHandshake": (0, 1), "SaslAuthenticate": (0, 2),
        "DescribeUserScramCredentials": (0, 0), "AlterUserScramCredentials": (0, 0),
        "CreateAcls": (0, 3), "DescribeAcls": (0, 3), "DeleteAcls": (0, 3)}),
}
# API name -> (min version, max version) that minilog declares.
SUPPORTED = {api: versions for _, apis in FAMILIES.values() for api, versions in apis.items()}


# Versions newer than the definitions in kafka-protocol/, declared here from their KIPs until
# those files catch up: message name -> {path of struct field names (() the top level): fields
# appended there (Kafka's JSON field form)}.
NEWER = {
    # KIP-939 (two-phase commit), Kafka 4.x: InitProducerId v6
    "InitProducerIdRequest": {(): [
        {"name": "Enable2Pc", "type": "bool", "versions": "6+", "default": "false"},
        {"name": "KeepPreparedTxn", "type": "bool", "versions": "6+", "default": "false"}]},
    "InitProducerIdResponse": {(): [
        {"name": "OngoingTxnProducerId", "type": "int64", "versions": "6+", "default": "-1"},
        {"name": "OngoingTxnProducerEpoch", "type": "int16", "versions": "6+", "default": "-1"}]},
    # KAFKA-17750, Kafka 4.0: ConsumerGroupDescribe v1 says whether a member speaks the classic
    # or the consumer protocol (-1 unknown, 0 classic, 1 consumer; the request is as in v0)
    "ConsumerGroupDescribeResponse": {("Groups", "Members"): [
        {"name": "MemberType", "type": "int8", "versions": "1+", "default": "-1"}]},
    # KIP-996 (pre-vote), Kafka 4.0: Vote v2; the response is as in v1
    "VoteRequest": {("Topics", "Partitions"): [
        {"name": "PreVote", "type": "bool", "versions": "2+", "default": "false"}]},
}


def _append_newer(msg, name):
    for path, fields in NEWER.get(name, {}).items():
        struct = msg
        for step in path:
            struct = next(f for f in struct["fields"] if f["name"] == step)
        struct["fields"] = struct["fields"] + fields


def _load(path):
    text = "\n".join(line for line in Path(path).read_text().splitlines()
                     if not line.strip().startswith("//"))
    return json.loads(text)


def _range(spec):
    if spec in (None, "none"):
        return None
    if spec.endswith("+"):
        return int(spec[:-1]), 99
    if "-" in spec:
        a, b = spec.split("-")
        return int(a), int(b)
    return int(spec), int(spec)


def _clip(rng, lo, hi):
    if rng is None:
        return None
    a, b = max(rng[0], lo), min(rng[1], hi)
    return (a, b) if a <= b else None


def _fmt(rng, hi):
    a, b = rng
    return f"{a}+" if b >= hi else (f"{a}" if a == b else f"{a}-{b}")


def snake(name):
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def _fields(fields, common, lo, hi, depth, out):
    for f in fields:
        vr = _clip(_range(f["versions"]), lo, hi)
        if vr is None:
            continue
        ftype = f["type"]
        base = ftype.removeprefix("[]")
        parts = [snake(f["name"]), "[]" if ftype.startswith("[]") and (f.get("fields") or base in common) else ftype]
        if parts[1] == "[]":
            pass
        elif ftype.startswith("[]"):
            parts[1] = "[]" + base
        elif f.get("fields") or base in common:
            parts[1] = "{}"
        if vr != (lo, hi):
            parts.append("v" + _fmt(vr, hi))
        nr = _clip(_range(f.get("nullableVersions")), lo, hi)
        if nr:
            parts.append("null" + _fmt(nr, hi))
        tr = _clip(_range(f.get("taggedVersions")), lo, hi)
        if tr:
            parts.append(f"tag{f['tag']}@" + _fmt(tr, hi))
        if "default" in f and f["default"] not in ("", "0", "false", "null"):
            parts.append("=" + str(f["default"]).replace(" ", ""))
        if f.get("flexibleVersions") == "none":
            parts.append("noflex")
        out.append("  " * depth + " ".join(parts))
        sub = f.get("fields") or common.get(base)
        if sub and (f.get("fields") or base in common):
            _fields(sub, common, lo, hi, depth + 1, out)


def declarations(root, apis):
    """The declaration lines of `apis` ({API name: (lo, hi)}), requests before responses."""
    out = []
    for api, (lo, hi) in apis.items():
        for kind in ("Request", "Response"):
            msg = _load(Path(root) / f"{api}{kind}.json")
            _append_newer(msg, f"{api}{kind}")
            common = {c["name"]: c["fields"] for c in msg.get("commonStructs", [])}
            flex = _range(msg.get("flexibleVersions"))
            flex_s = f" flex{flex[0]}" if flex and flex[0] <= hi else ""
            out.append(f"{api}{kind} {msg['apiKey']} {lo}-{hi}{flex_s}")
            _fields(msg["fields"], common, lo, hi, 1, out)
    return out


def main(root, out_dir):
    for module, (holds, apis) in FAMILIES.items():
        text = ('"""' + textwrap.fill(f"Declarations of {holds}.", 97) + "\n\n"
                "Generated by tools/gen_definitions.py from Kafka's message definitions; see "
                "schema.py\nfor the notation. Regenerate rather than edit by hand.\"\"\"\n\n"
                "DEFINITIONS = r'''\n" + "\n".join(declarations(root, apis)) + "\n'''\n")
        (Path(out_dir) / f"{module}.py").write_text(text)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
