"""Fixtures for the client tests: every broker we test against, and small helpers.

`cluster` runs a test against Tansu (a Kafka-compatible broker that is not ours) and against a
minilog broker process. Topics get unique names because brokers are shared per module.
"""
import gc
import logging

import pytest


@pytest.fixture(scope="module")
def gbroker():
    """A broker of the consumer-group tests, one per module: rebalances without delay."""
    from brokers import MinilogBroker
    from grouptools import FAST
    b = MinilogBroker(extra=FAST).start()
    yield b
    b.cleanup()


@pytest.fixture(scope="module", params=["tansu", "minilog"])
def cluster(request):
    """A running broker (`.bootstrap`); `.kind` says which one."""
    b = request.getfixturevalue("tansu" if request.param == "tansu" else "broker")
    b.kind = request.param
    return b


class _UnobservedTaskFailures(logging.Handler):
    """Collects asyncio's "Task exception was never retrieved" and the client's own report of
    a background task that failed (`minilog.connector.client.tasks`)."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.seen = []

    def emit(self, record):
        text = record.getMessage()
        if "never retrieved" in text or text.startswith("background task "):
            self.seen.append(text.splitlines()[0] + (f": {record.exc_info[1]!r}"
                                                     if record.exc_info else ""))


@pytest.fixture(autouse=True)
def no_unobserved_task_failures():
    """Every client test fails if a task of the client's event loop failed unobserved: the
    exception of a task nobody awaits is a bug that no return value shows."""
    handler = _UnobservedTaskFailures()
    loggers = [logging.getLogger("asyncio"), logging.getLogger("minilog.client")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield
        gc.collect()  # a finished task's unretrieved exception is reported when it is collected
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
    assert not handler.seen, f"client tasks failed unobserved: {handler.seen}"
