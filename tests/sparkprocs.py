"""Spark's own launchers from pip-installed pyspark, as bounded test processes: `spark-submit`
runs from the repository root, and a standalone cluster (a master and workers on 127.0.0.1).

Spark starts processes of its own (the driver's JVM and Python, executors, Python workers that
put themselves in process groups of their own), so a process group is not enough to find them:
every launch carries a marker in its environment, which all of those inherit. Teardown kills the
marked processes, and nothing else, and checks that none is left.
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pyspark
from brokers import free_port, wait_for_port
from sparktools import wait_for

BIN = Path(pyspark.__file__).parent / "bin"
REPO = Path(__file__).resolve().parent.parent
MARK = "MINILOG_TEST_SPARK"
DAEMONS = (b"pyspark.daemon", b"minilog.datasource.worker_daemon")  # what forks Python workers


def environment(mark, **more):
    """This process's environment for a Spark launcher: Python is this interpreter (minilog is
    installed in it), addresses are 127.0.0.1, nothing of an in-process Spark leaks in."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYSPARK_GATEWAY", "PYSPARK_SUBMIT_ARGS"))}
    env.update({"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
                "SPARK_LOCAL_IP": "127.0.0.1", **more, MARK: mark})
    return env


def marked(mark):
    """The ids of the live processes carrying `mark`."""
    tag, pids = f"{MARK}={mark}".encode(), []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if tag in f.read().split(b"\0"):
                    pids.append(int(pid))
        except OSError:  # gone, or not ours to read
            pass
    return pids


def running(mark, program, script):
    """The id of a live process carrying `mark` that is `program` (its argv[0]) running a
    `script` (an argument ending so; a launcher's own command line names it too), or None."""
    for pid in marked(mark):
        argv = _cmdline(pid).split(b"\0")
        if argv[0] == program.encode() and any(a.endswith(script.encode()) for a in argv[1:]):
            return pid
    return None


def catches(pid, signum):
    """Whether process `pid` has a handler of its own for signal `signum` (/proc's SigCgt)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            caught = next(int(line.split()[1], 16) for line in f if line.startswith("SigCgt:"))
    except (OSError, StopIteration):
        return False
    return bool(caught & (1 << (signum - 1)))


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _parent(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def python_workers(root=None):
    """The ids of the Python workers that run tasks (`pyspark.worker`, forked by the daemon:
    `pyspark.daemon` or minilog's `worker_daemon`; not the data source's planning and commit
    processes) that descend from `root` (default: this process, whose in-process Spark started
    them): never another test run's."""
    root = os.getpid() if root is None else root
    workers = []
    for pid in map(int, filter(str.isdigit, os.listdir("/proc"))):
        parent = _parent(pid)
        if not any(_cmdline(pid).endswith(daemon + b"\0pyspark.worker\0")
                   and daemon in _cmdline(parent) for daemon in DAEMONS):
            continue
        ancestor = parent
        while ancestor > 1 and ancestor != root:
            ancestor = _parent(ancestor)
        if ancestor == root:
            workers.append(pid)
    return workers


def kill_marked(mark, grace=10.0):
    """SIGTERM the marked processes, SIGKILL what is left after `grace` seconds; raise if any
    is still there after that."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 30.0)):
        for pid in marked(mark):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        end = time.monotonic() + wait
        while marked(mark) and time.monotonic() < end:
            time.sleep(0.2)
    left = marked(mark)
    assert not left, f"processes left running: {left}"


class MarkedProcess:
    """A command that starts Spark (`proc`, launched with `environment(mark)`): kill -9 and
    teardown reach it and everything it started, and nothing else."""
    proc = None
    mark = None

    def kill9(self):
        """SIGKILL the process and everything it started (its Spark JVM, Python workers)."""
        for pid in marked(self.mark):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()
        wait_for(lambda: not marked(self.mark), "the killed processes to go", 60)

    def stop(self):
        if self.mark:
            kill_marked(self.mark)
        if self.proc:
            self.proc.wait()


def spark_submit(args, log, timeout=600, **env):
    """Run `spark-submit args...` from the repository root (`env`: more environment), its
    output into the file `log`; its exit code (None when it ran out of time). Every process it
    started is gone after."""
    mark = uuid.uuid4().hex
    with open(log, "wb") as out:
        p = subprocess.Popen([str(BIN / "spark-submit"), *map(str, args)], cwd=REPO,
                             env=environment(mark, **env), stdout=out, stderr=subprocess.STDOUT)
        try:
            return p.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        finally:
            kill_marked(mark)
            p.wait()


class StandaloneCluster:
    """A Spark standalone master and `workers` workers on 127.0.0.1, each worker with `cores`
    cores and `memory` for executors, in a temporary directory (logs, work dirs)."""

    def __init__(self, workers=2, cores=1, memory="1g"):
        self.workers, self.cores, self.memory = workers, cores, memory
        self._tmp = tempfile.TemporaryDirectory(prefix="minilog-spark-")
        self.dir = Path(self._tmp.name)
        self.mark = uuid.uuid4().hex
        self._procs = []
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"

    def start(self, timeout=180.0):
        """Start the master, then the workers; return once every worker has registered."""
        master = self._spawn("master", "org.apache.spark.deploy.master.Master",
                             "--host", "127.0.0.1", "--port", self.port, "--webui-port", 0)
        wait_for_port(self.port, timeout, master)
        for i in range(self.workers):
            self._spawn(f"worker-{i}", "org.apache.spark.deploy.worker.Worker", self.url,
                        "--host", "127.0.0.1", "--webui-port", 0, "--cores", self.cores,
                        "--memory", self.memory, "--work-dir", self.dir / f"work-{i}")
        wait_for(lambda: self.log("master").count("Registering worker") == self.workers,
                 f"{self.workers} workers registered with {self.url}", timeout)
        return self

    def executors(self):
        """The executors the workers launched: [(worker index, "app-.../<executor id>")]."""
        return [(i, e) for i in range(self.workers)
                for e in re.findall(r"Asked to launch executor (\S+)", self.log(f"worker-{i}"))]

    def log(self, name):
        return (self.dir / f"{name}.log").read_text(errors="replace")

    def stop(self):
        """Kill the master, the workers and whatever they launched; remove the directory."""
        try:
            kill_marked(self.mark)
            for p in self._procs:
                p.wait()
        finally:
            self._tmp.cleanup()

    def submit_args(self):
        """spark-submit's arguments for an application on this cluster: its master, and the
        JVM options the suite gives every Spark JVM (conftest: SPARK_SUBMIT_OPTS, which reaches
        drivers only) for its executors too."""
        return ["--master", self.url, "--conf",
                f"spark.executor.extraJavaOptions={os.environ.get('SPARK_SUBMIT_OPTS', '')}"]

    def _spawn(self, name, main_class, *args):
        # spark-class takes a master's or worker's JVM options from SPARK_DAEMON_JAVA_OPTS
        daemon = os.environ.get("SPARK_SUBMIT_OPTS", "")
        with open(self.dir / f"{name}.log", "wb") as out:
            self._procs.append(subprocess.Popen(
                [str(BIN / "spark-class"), main_class, *map(str, args)], cwd=self.dir,
                env=environment(self.mark, SPARK_LOCAL_DIRS=str(self.dir),
                                SPARK_DAEMON_JAVA_OPTS=daemon),
                stdout=out, stderr=subprocess.STDOUT))
        return self._procs[-1]
