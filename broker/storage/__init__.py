"""The log: segments, indexes, loading and recovery, cleaning, producer state and checkpoints
(Kafka's `storage` module and `kafka.log`)."""
