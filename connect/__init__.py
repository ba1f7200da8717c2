"""Kafka Connect on Spark: `minilog connect worker.properties`.

A worker serves Kafka Connect's REST API (the paths, JSON shapes and error bodies of Kafka's
`ConnectorsResource`), keeps connector configs, target states, source offsets and statuses in
the three compacted topics Connect uses, and runs each connector as a Spark Structured Streaming
query that reaches Kafka through `format("minilog")`. The worker is an ordinary client of the
cluster (it imports minilog.connector's client, never the broker), so it works against any
Kafka-compatible cluster.
"""
