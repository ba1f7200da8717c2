"""Cluster metadata: the image, its records and stores, the controller and what it decides (Kafka's
`metadata` and `controller` modules)."""
