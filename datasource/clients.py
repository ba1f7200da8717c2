"""Kafka clients kept per Python worker, keyed by their settings.

Spark reuses its Python workers across tasks and queries (`spark.python.worker.reuse`), so a
task can take the consumer or producer an earlier task opened, as Spark's own Kafka connector
keeps a cache per executor: a micro-batch then pays for no connections or metadata again.
A worker runs one task at a time; the lock covers the driver, where threads may share this.
`MINILOG_CLIENT_POOL=0` in the workers' environment turns the pool off (each task opens and
closes its own client), to measure what it saves.

The client classes are imported where a client is made: Spark's planning steps import this
module with the data source and most of them never open a client.
"""
import atexit
import os
import threading

from .worker_gc import freeze_after_imports

_lock = threading.Lock()
_pool = {}


def settings_key(config):
    return tuple(sorted((str(k), str(v)) for k, v in config.items()))


def _key(kind, config):
    return (kind, settings_key(config))


def pooled():
    return os.environ.get("MINILOG_CLIENT_POOL", "1") != "0"


def _get(kind, factory, config):
    if not pooled():
        return factory(dict(config))
    key = _key(kind, config)
    with _lock:
        client = _pool.get(key)
        if client is None:
            client = _pool[key] = factory(dict(config))
        return client


def consumer(config):
    """A Consumer for fetching offset ranges (no group: ranges are read by assignment)."""
    from minilog.connector.client import Consumer
    return _get("consumer", Consumer, {k: v for k, v in config.items() if k != "group.id"})


def producer(config):
    from minilog.connector.client import Producer
    return _get("producer", Producer, config)


def release(client):
    """The task is done with `client`: kept for the next task, or closed without the pool."""
    freeze_after_imports()  # the end of a task: long-lived objects out of gc (worker_gc.py)
    if not pooled():
        client.close()


def discard(client):
    """Drop a client that failed, so the next task opens a fresh one."""
    with _lock:
        for key, c in list(_pool.items()):
            if c is client:
                del _pool[key]
    _close_quietly(client)


def _close_quietly(client):
    try:
        client.close()
    except Exception:  # noqa: BLE001 - a broken client may fail to close; it is gone anyway
        pass


def admin(config):
    """A new AdminClient for the driver's planning (closed by its owner)."""
    from minilog.connector.client import AdminClient
    return AdminClient({k: v for k, v in config.items() if k != "group.id"})


@atexit.register
def close_all():
    with _lock:
        clients = list(_pool.values())
        _pool.clear()
    for c in clients:
        _close_quietly(c)
