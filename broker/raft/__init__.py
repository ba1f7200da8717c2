"""The Raft quorum of the `__cluster_metadata` log (Kafka's `raft` module, KIP-595)."""
