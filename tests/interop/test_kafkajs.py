"""kafkajs 2.2, a client we did not write, against a real minilog broker (needs Node.js and npm;
the test installs kafkajs itself into a cache folder)."""
import json
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).parent


def test_kafkajs_produces_and_consumes_in_a_group(broker, kafkajs):
    r = subprocess.run(["node", str(HERE / "kafkajs_roundtrip.js"), broker.bootstrap, "js-topic", "50"],
                       check=False, capture_output=True, text=True, timeout=90,
                       env={"NODE_PATH": str(kafkajs), "PATH": shutil.os.environ["PATH"]})
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    got = out["got"]
    assert sorted(int(m["value"][1:]) for m in got) == list(range(50))
    for m in got:
        i = int(m["value"][1:])
        assert m["key"] == f"k{i % 5}" and m["n"] == str(i) and m["timestamp"] == 1700000000000 + i
    per_partition = {}
    for m in got:
        per_partition.setdefault(m["partition"], []).append(m["offset"])
    for offsets in per_partition.values():
        assert offsets == list(range(len(offsets)))
    committed = {p["partition"]: int(p["offset"]) for t in out["committed"] for p in t["partitions"]}
    assert committed == {p: len(o) for p, o in per_partition.items()}


def test_kafkajs_transactions_commit_abort_and_send_offsets(broker, kafkajs):
    """kafkajs' transactional producer (commit, abort, sendOffsets) and its read_committed
    consumer: only the committed records, and the offsets committed with the transaction."""
    r = subprocess.run(["node", str(HERE / "kafkajs_transactions.js"), broker.bootstrap, "js-txn"],
                       check=False, capture_output=True, text=True, timeout=120,
                       env={"NODE_PATH": str(kafkajs), "PATH": shutil.os.environ["PATH"]})
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["got"] == ["c0", "c1", "c2", "d0", "d1", "d2"]
    committed = {p["partition"]: int(p["offset"]) for t in out["committed"] for p in t["partitions"]}
    assert committed == {0: 42}


def test_kafkajs_partition_reassignments(broker, kafkajs):
    """kafkajs' alterPartitionReassignments and listPartitionReassignments (KIP-455): a
    reassignment to the replica the partition has is accepted, one to an unknown broker is
    refused with Kafka's error, and nothing is listed as under way."""
    r = subprocess.run(["node", str(HERE / "kafkajs_reassign.js"), broker.bootstrap, "js-moved"],
                       check=False, capture_output=True, text=True, timeout=120,
                       env={"NODE_PATH": str(kafkajs), "PATH": shutil.os.environ["PATH"]})
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out == {"refused": "INVALID_REPLICA_ASSIGNMENT", "listed": {"topics": []}}, out
