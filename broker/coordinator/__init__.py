"""The coordinators that keep their state in internal topics (Kafka's `coordinator-common`,
`group-coordinator`, `transaction-coordinator`)."""
