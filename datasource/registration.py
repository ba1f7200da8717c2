"""`spark.dataSource.register`, made safe for queries that start at once in one session.

Spark keeps one PythonFunction per registered Python data source, and every reader, writer and
planner function it makes from it shares that function's environment map
(`UserDefinedPythonDataSource.createPythonFunction`). Each Python runner adds its settings to
that very map when it first runs (`BasePythonRunner.compute`: SPARK_LOCAL_DIRS,
SPARK_REUSE_WORKER, SPARK_JOB_ARTIFACT_UUID and more). With several queries starting together in
one session (a Connect worker's connectors, a mirror's flows), the driver can serialize one
task's function while another task's runner adds keys to the map: the task then cannot be read
back (`java.io.OptionalDataException` in `HashMap.readObject`) and its query dies, with every
query of the moment. pyspark hands Spark a `java.util.HashMap`; a `java.util.Hashtable` writes a
snapshot taken under its lock, and its puts take the same lock, so the map a task carries is
always whole. Everything else is what pyspark's own `register` does.
"""
from typing import Any


def register(spark: Any, source: type) -> None:
    """Register the Python data source class `source` under `source.name()` in `spark`."""
    from pyspark.core.rdd import _prepare_for_python_RDD

    sc = spark.sparkContext
    jvm = sc._jvm
    pickled, broadcast_vars, env, includes = _prepare_for_python_RDD(sc, source)
    function = jvm.SimplePythonFunction(bytearray(pickled), jvm.java.util.Hashtable(env),
                                        includes, sc.pythonExec, sc.pythonVer, broadcast_vars,
                                        sc._javaAccumulator)
    data_source = getattr(jvm, "org.apache.spark.sql.execution.datasources.v2.python."
                               "UserDefinedPythonDataSource")(function)
    spark._jsparkSession.dataSource().registerPython(source.name(), data_source)
