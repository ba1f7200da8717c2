"""Partitions and their replicas: leaders, followers, the ISR and the fetchers that pull (Kafka's
`Partition`, `ReplicaManager`, `ReplicaFetcherThread`)."""
