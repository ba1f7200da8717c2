"""Spark's Python processes import pyspark from its installed package, not from its zip.

Spark starts every Python process of its own (the task workers' daemon, and a new process for
each of a Python data source's planning steps: lookup, create, the streaming source, plan the
read, the write, the streaming sink) with `$SPARK_HOME/python/lib/pyspark.zip` first on
PYTHONPATH. With pip-installed pyspark, SPARK_HOME is the installed package itself, so the zip
holds the same files as the package beside it; but zipimport caches no bytecode, and each of
those processes compiled pyspark again: 1.7 s of CPU against 0.4 s to import pyspark's data
source API and minilog's connector (measured on 2 cores), seven processes for the first
micro-batch of a query's first run. The zips (pyspark's and py4j's) move after the site
directories, where the installed package is found first; nothing else on the path changes.

The `minilog-pyspark-path.pth` file that setup.py installs calls this at interpreter start,
only where PYTHONPATH names a pyspark zip.
"""
import os
import sys

_ZIP = os.path.join("pyspark", "python", "lib", "pyspark.zip")


def prefer_installed_pyspark(path: list[str] = sys.path) -> None:
    """Move a pip-installed pyspark's zips after the rest of `path`, preceded by the directory
    holding that pyspark (usually already on it: the site directory), and nothing else."""
    zips = [p for p in path if p.endswith(os.sep + _ZIP)]
    if not zips:
        return
    lib = os.path.dirname(zips[0])                      # .../site-packages/pyspark/python/lib
    package = os.path.dirname(os.path.dirname(lib))     # .../site-packages/pyspark
    if not os.path.isfile(os.path.join(package, "__init__.py")):
        return  # a Spark distribution's zip: no installed package beside it
    moved = [p for p in path if os.path.dirname(p) == lib]
    rest = [p for p in path if os.path.dirname(p) != lib]
    path[:] = dict.fromkeys(rest + [os.path.dirname(package)] + moved)
