"""Shared fixtures: real brokers, started once per test module and always torn down."""
import os
import sys

import pytest
from brokers import MinilogBroker, TansuBroker

# Spark's Python workers must run this interpreter.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


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


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for the whole run (it takes seconds to start). No
    `format("minilog")` registration: the installed connector must be found by name. A task
    is tried up to 4 times, as on a cluster and in spark-conf/ (local[threads,maxFailures]):
    a loaded machine may fail one attempt, a real failure fails all four."""
    from pyspark.sql import SparkSession
    session = (SparkSession.builder.master("local[2,4]").appName("minilog-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.sql.streaming.stopTimeout", "30s")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory):
    """A broker listening with PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL (security_tools)."""
    from security_tools import SecureBroker, make_certificates
    b = SecureBroker(make_certificates(tmp_path_factory.mktemp("certs"))).start()
    yield b
    b.cleanup()
