"""Spark's Python processes import pip-installed pyspark from its package, with cached bytecode,
not from the zip Spark puts first on their PYTHONPATH (`minilog_pyspark_path`): compiling the
zip again cost each of them a second of CPU, seven of them for a query's first micro-batch."""
import os
import subprocess
import sys
from pathlib import Path

import pyspark

LIB = Path(pyspark.__file__).parent / "python" / "lib"


def _where_pyspark_is_imported(pythonpath: str) -> list[str]:
    probe = "import pyspark, py4j; print(pyspark.__file__); print(py4j.__file__)"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120, check=True,
                          env={**os.environ, "PYTHONPATH": pythonpath}).stdout.split()


def test_a_process_started_as_spark_starts_it_imports_the_installed_package():
    zips = os.pathsep.join(str(p) for p in sorted(LIB.glob("*.zip")))
    assert "pyspark.zip" in zips
    assert _where_pyspark_is_imported(zips) == [pyspark.__file__,
                                                 __import__("py4j").__file__]


def test_a_zip_with_no_installed_package_beside_it_is_left_first(tmp_path):
    """A Spark distribution's zip (SPARK_HOME/python/lib) is the only pyspark there is."""
    lib = tmp_path / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    probe = ("import sys; import minilog_pyspark_path as m; "
             f"sys.path.insert(0, {str(lib / 'pyspark.zip')!r}); "
             "before = list(sys.path); m.prefer_installed_pyspark(); print(sys.path == before)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120, check=True).stdout.strip()
    assert out == "True"


def test_spark_task_workers_import_the_installed_package(spark):
    def where(_):
        import pyspark
        yield pyspark.__file__
    assert spark.sparkContext.parallelize([0], 1).mapPartitions(where).collect() == [
        pyspark.__file__]
