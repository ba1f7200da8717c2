"""The broker process: configuration, the socket server, the request handlers, inter-broker
channels and metrics (Kafka's `kafka.server`)."""
