"""minilog's web console: a server-rendered view of any Kafka cluster through minilog's client.

`minilog -b BOOTSTRAP console [--listen 127.0.0.1:8080]`. The console is an ordinary client
(imports point one way: the console uses the client, nothing below it uses the console), so it
works against any Kafka-compatible cluster.
"""
