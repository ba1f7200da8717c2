"""Shared fixtures: real brokers, started once per test module and always torn down."""
import os
import sys
import tempfile

import pytest
import spark_class_archive
from brokers import MinilogBroker, TansuBroker

# Spark's Python workers must run this interpreter.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# The suite starts hundreds of brokers, CLI commands and Spark Python workers: each would
# compile minilog from source again where the environment forbids bytecode files (a CPU second
# per start on a busy machine). They share one cache outside the source tree instead.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ.setdefault("PYTHONPYCACHEPREFIX", os.path.join(tempfile.gettempdir(),
                                                          "minilog-test-pycache"))
# Every Spark driver the suite starts (sessions, spark-submit, Connect servers) lives for
# seconds to minutes on small data: the JVM's optimising compiler and parallel collector cost
# more than they win there (measured: a session's JVM used 32-34 s of CPU for a start and a few
# small jobs, 18-22 s with C1 alone and the serial collector). The product's settings
# (spark-conf/) keep the JVM's defaults, which suit long-running jobs.
# They also map Spark's classes from a class-data sharing archive once the run has written one
# (spark_class_archive: half a driver's start).
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC "
                      + spark_class_archive.java_options(spark_class_archive.archive_path()))
_archive_build = None


def pytest_sessionstart(session):
    """The main process (not an xdist worker) writes the class archive, in the background, if
    no earlier run on this machine did."""
    global _archive_build
    if not hasattr(session.config, "workerinput") and \
            "SharedArchiveFile" in os.environ["SPARK_SUBMIT_OPTS"]:
        _archive_build = spark_class_archive.start_build(spark_class_archive.archive_path())


@pytest.fixture(scope="module")
def broker():
    """A fresh minilog broker process with its own temporary data directory."""
    b = MinilogBroker().start()
    yield b
    b.cleanup()


def pytest_sessionfinish(session, exitstatus):
    """The last resort, after every fixture's teardown: brokers and benchmarks this test
    process started and that still run (a helper that missed its cleanup) are killed with
    their process groups, and named, so that a leak shows instead of running for hours."""
    from proctree import kill_tree, left_by
    spark_class_archive.stop_build(_archive_build, spark_class_archive.archive_path())
    if getattr(session.config.option, "numprocesses", None) and \
            not hasattr(session.config, "workerinput"):
        return  # the xdist controller: its children are the workers, which do this themselves
    killed = kill_tree(left_by(os.getpid()))
    if killed:
        sys.stderr.write(f"\nkilled processes the tests left running: {killed}\n")


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
    a loaded machine may fail one attempt, a real failure fails all four. Python workers fork
    from minilog's daemon, as spark-conf/ has them."""
    from pyspark.sql import SparkSession
    session = (SparkSession.builder.master("local[2,4]").appName("minilog-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.sql.streaming.stopTimeout", "30s")
               .config("spark.python.daemon.module", "minilog.datasource.worker_daemon")
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


# The modules that take a minute or more, longest first (seconds of a full run on 2 cores, in
# brackets). The suite runs a module per worker (pytest.ini: pytest-xdist, --dist loadfile) in
# collection order: started first, they run beside the many short modules instead of making a
# tail at the end of the run.
LONG_MODULES = ("datasource/test_exactly_once_replan.py",  # 333
                "test_bench_quick.py", "jobs/test_spark_submit.py",  # 260, 251
                "test_fresh_install.py", "jobs/test_bank_demo.py",  # 209, 155
                "jobs/test_missing_input.py", "mirror/test_mirror_failover.py",  # 153, 137
                "mirror/test_stock_properties.py",
                "test_readme.py", "mirror/test_mirror_faults.py",  # 130, 130
                "connect/test_worker.py", "datasource/test_stream.py",  # 122, 116
                "datasource/test_exactly_once_edges.py",  # 95
                "cluster/test_replication_safety.py", "datasource/test_kafka_parity.py",  # 89, 88
                "datasource/test_connect.py", "connect/test_kill9_pipelines.py",  # 84, 82
                "console/test_browser.py", "cluster/test_failover.py",  # 80, 69
                "mirror/test_mirror.py", "datasource/test_exactly_once_cluster.py",  # 67, 63
                "connect/test_transforms.py", "connect/test_mirror_connectors.py",
                "cluster/test_nemesis.py", "cluster/test_txn_nemesis.py", "cluster/test_churn.py")


def pytest_configure(config):
    """xdist (3.7 on) hands out modules with the most tests first unless told not to: that put
    the long modules, which have few tests, at the end, where one worker ran them alone."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    def rank(item):
        path = item.nodeid.split("::")[0]
        return next((i for i, m in enumerate(LONG_MODULES) if path.endswith(m)), len(LONG_MODULES))
    items.sort(key=rank)  # stable: the order within a module, and among the others, is kept
