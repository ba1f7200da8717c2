"""MirrorMaker 2 on Spark: `minilog mirror mm2.properties` copies topics and translates
consumer groups' offsets between Kafka-compatible clusters, each flow a Spark streaming query
writing through the exactly-once sink. MM2's properties file, topic names and record formats
(offset syncs, checkpoints, heartbeats), so Kafka's own tools read what it writes.
"""
