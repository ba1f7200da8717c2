"""The broker's settings as Kafka names them, below every part that reads them: the keys with
their types and defaults, and the listeners (Kafka's `server-common` config definitions)."""
