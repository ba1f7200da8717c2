"""A Python worker's long-lived objects are kept out of the collections Spark runs per task.

pyspark's daemon runs `gc.collect()` in a reused worker after every task (pyspark/daemon.py),
and a full collection walks every tracked object: pyspark's, pyarrow's, pandas's and the
connector's modules, 35,000-100,000 objects that live as long as the worker. Measured in a
streaming copy of 20,000-row micro-batches on 2 cores (load 4-10): 150-660 ms per collection,
two per task, eight per micro-batch, with either delivery guarantee. `gc.freeze()` moves the
objects alive now to the permanent generation, which collections skip (objects freed by
reference counting are still freed); the collections then took 0-1 ms.

What a worker imports arrives with its tasks (pyspark's serializers import pyarrow and pandas
as the rows come, the connector its client), so the data source freezes at the end of a task
that imported something (`freeze_after_imports`, when the task gives its pooled client back),
after a collection, so that no garbage is frozen with it. minilog's daemon freezes before it
forks (`worker_daemon.py`), so a fresh worker's first collection does not copy the daemon's
pages either.
"""
import gc
import sys

_modules_frozen = 0


def freeze_after_imports() -> None:
    """Freeze what this process holds if modules were imported since the last freeze: a
    length compared per task; a collection and a freeze the few times it differs."""
    global _modules_frozen
    if len(sys.modules) != _modules_frozen:
        _modules_frozen = len(sys.modules)
        gc.collect()
        gc.freeze()
