"""Where a new partition's replicas go: spread evenly, never two on one broker.

As Kafka's round-robin assignment: partition i takes `rf` consecutive brokers starting at
(start + i) in the sorted live broker list, so leaders (the first replica) rotate over the
brokers and every broker holds about the same number of replicas. `start` rotates with the
topic count, so many single-partition topics do not all lead on the same broker.
"""


from collections.abc import Iterable


def assign_replicas(brokers: Iterable[int], first_partition: int, count: int, rf: int,
                    start: int) -> dict[int, list[int]]:
    """{partition index: [broker ids]} for partitions first_partition .. first_partition+count-1."""
    brokers = sorted(brokers)
    n = len(brokers)
    if rf > n:
        raise ValueError(f"replication factor {rf} is larger than the {n} available broker(s)")
    return {i: [brokers[(start + i + j) % n] for j in range(rf)]
            for i in range(first_partition, first_partition + count)}
