"""A worker's long-lived objects leave the collections pyspark's daemon runs after every task
(`worker_gc.py`): frozen at the end of a task that imported modules, after a collection, so no
garbage is frozen; a task that imported nothing costs no collection."""
import subprocess
import sys

PROBE = """
import gc, weakref
from minilog.datasource import clients, worker_gc

class Node:
    pass

a, b = Node(), Node()
a.other, b.other = b, a            # a cycle, garbage once dropped: only a collection frees it
gone = weakref.ref(a)
del a, b
collections = []
gc.callbacks.append(lambda phase, info: phase == "start" and collections.append(1))

class Client:
    def close(self):
        pass

clients.release(Client())          # the end of a task that imported its modules
frozen = gc.get_freeze_count()
after_first = len(collections)
clients.release(Client())          # a task that imported nothing
after_second = len(collections)
import json, xml.dom.minidom       # a task that imported more
clients.release(Client())
print(gone() is None, frozen > 1000, len(gc.get_objects()) < 1000, after_first >= 1,
      after_second == after_first, gc.get_freeze_count() > frozen)
"""


def test_a_task_end_freezes_what_its_imports_left_and_frees_the_garbage_first():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    assert out == ["True"] * 6, out


def test_the_daemon_freezes_before_it_forks():
    probe = ("import sys, gc, runpy; sys.argv = ['x']; "
             "import pyspark.daemon; pyspark.daemon.manager = lambda: print(gc.get_freeze_count()); "
             "runpy.run_module('minilog.datasource.worker_daemon', run_name='__main__')")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    assert int(out[-1]) > 10_000, out
