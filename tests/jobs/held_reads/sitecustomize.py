"""Test-only: every Python process that has this folder on its PYTHONPATH (a job's driver, its
Spark planner and task workers) holds each `format("minilog")` streaming read for
MINILOG_TEST_READ_HOLD seconds, after touching the file MINILOG_TEST_READ_STARTED. A micro-batch
is then surely running when that file appears, and lasts far longer than any Ctrl-C may take:
the Ctrl-C tests press it there, a condition, not a guess at timing.

The reader's module is patched as it is imported (a finder ahead of the others), not imported
here: a Python worker must connect back to Spark within a fixed 10 s of its start."""
import importlib.abc
import os
import sys
import time
from pathlib import Path

STREAM = "minilog.datasource.stream"


def _held(read):
    def held_read(self, partition):
        Path(os.environ["MINILOG_TEST_READ_STARTED"]).touch()
        time.sleep(float(os.environ["MINILOG_TEST_READ_HOLD"]))
        yield from read(self, partition)
    return held_read


class _PatchOnImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != STREAM:
            return None
        others = [f for f in sys.meta_path if f is not self and hasattr(f, "find_spec")]
        spec = next(filter(None, (f.find_spec(name, path, target) for f in others)), None)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            module.StreamReader.read = _held(module.StreamReader.read)
        spec.loader.exec_module = exec_module
        return spec


if os.environ.get("MINILOG_TEST_READ_HOLD"):
    sys.meta_path.insert(0, _PatchOnImport())
