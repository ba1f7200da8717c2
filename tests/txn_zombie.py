"""A transactional producer in its own process, to be SIGSTOPped as a zombie.

`python txn_zombie.py BOOTSTRAP TOPIC TXN_ID PARTITIONS`: initialises, begins a transaction,
writes "z-old-<i>" to each partition, flushes, and prints `ready`. Then, on a line from stdin
(the test resumed it after a new instance took the transactional id), writes "z-late-<i>"
and commits, and prints one JSON line: {"commit": "ok"} or the error librdkafka gave.
"""
import json
import sys

from confluent_kafka import KafkaException, Producer


def main(bootstrap: str, topic: str, txn_id: str, partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5,
                  "transaction.timeout.ms": 60000, "log_level": 0})
    p.init_transactions(120)
    p.begin_transaction()
    for i in range(partitions):
        p.produce(topic, b"z-old-%d" % i, partition=i)
    p.flush(120)
    print("ready", flush=True)
    sys.stdin.readline()
    try:
        for i in range(partitions):
            p.produce(topic, b"z-late-%d" % i, partition=i)
        p.commit_transaction(60)
        result = {"commit": "ok"}
    except KafkaException as e:
        err = e.args[0]
        result = {"commit": "error", "name": err.name(), "fatal": err.fatal()}
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
