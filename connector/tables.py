"""Tables the command line and the demo print about a cluster, as Kafka's tools print them.

Below both `cli.py` and the demo (`minilog.jobs.bank_demo`): each imports these, neither
imports the other's module for them.
"""
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from minilog.connector.client import AdminClient, KafkaError


def describe_topics(admin: AdminClient, names: Iterable[str] | None, out: TextIO) -> None:
    """`kafka-topics --describe`: a line per topic, then leader, replicas and ISR per partition."""
    for name, t in admin.describe_topics(names).items():
        try:
            configs = admin.describe_configs("topic", name)
            shown = ",".join(f"{c.name}={c.value}" for c in configs.values()
                             if c.source not in (5, -1) and not c.sensitive)
        except KafkaError:
            shown = "?"  # brokers without DescribeConfigs
        open_txns = _open_transactions(admin, name, t.partitions)
        rf = len(t.partitions[0].replicas) if t.partitions else 0
        out.write(f"Topic: {name}\tTopicId: {t.topic_id}\tPartitionCount: {len(t.partitions)}\t"
                  f"ReplicationFactor: {rf}\tConfigs: {shown}\n")
        for p in t.partitions:
            out.write(f"\tTopic: {name}\tPartition: {p.partition}\tLeader: {p.leader}\t"
                      f"Replicas: {','.join(map(str, p.replicas))}\t"
                      f"Isr: {','.join(map(str, p.isr))}"
                      f"{open_txns.get(p.partition, '')}\n")


def _open_transactions(admin: AdminClient, topic: str, partitions) -> dict[int, str]:
    """{partition: "\tLastStableOffset: L\tHighWatermark: H"} for the partitions whose last
    stable offset is behind the high watermark (a transaction is open there): what a
    read_committed consumer cannot read yet. Nothing when the offsets cannot be listed."""
    specs = {(topic, p.partition): "latest" for p in partitions}
    try:
        high = admin.list_offsets(specs)
        stable = admin.list_offsets(specs, "read_committed")
    except KafkaError:
        return {}
    return {tp.partition: f"\tLastStableOffset: {stable[tp].offset}\tHighWatermark: "
            f"{high[tp].offset}" for tp in high if tp in stable and stable[tp] is not None
            and high[tp] is not None and stable[tp].offset < high[tp].offset}


def table(rows: Sequence[Sequence[Any]], out: TextIO) -> None:
    """Rows as left-aligned columns two spaces apart (`kafka-consumer-groups`' layout)."""
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        out.write("  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip() + "\n")
