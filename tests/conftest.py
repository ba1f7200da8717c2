"""Shared fixtures: real brokers, started once per test module and always torn down."""
import os
import sys

import pytest
from brokers import MinilogBroker, TansuBroker

# Spark's Python workers must run this interpreter.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@pytest.fixture(scope="module")
def broker():
    """A fresh minilog broker process with its own temporary data directory."""
    b = MinilogBroker().start()
    yield b
    b.cleanup()


@pytest.fixture(scope="module")
def tansu():
    b = TansuBroker().start()
    yield b
    b.cleanup()


@pytest.fixture
def make_broker():
    """Factory for tests that need their own broker (restarts, kills, custom settings)."""
    started = []

    def make(**kwargs):
        b = MinilogBroker(**kwargs).start()
        started.append(b)
        return b
    yield make
    for b in started:
        b.cleanup()
