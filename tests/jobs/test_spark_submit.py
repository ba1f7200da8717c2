"""bank_balance as spark-submit runs it, from the repository root with spark-conf/'s
properties, on a standalone cluster of two workers, where the reads and writes run in executor
processes (minilog pip-installed in their Python, as a cluster must have it): the output topic
ends with the independent fold's balances, even when the driver's streaming source process
starts too late for Spark (the job starts its query again). spark-conf/'s own master, local
mode, runs in tests/jobs/test_bank_demo.py (`minilog demo` starts Spark on those settings)."""
import os
import signal
import sys
import time
import uuid

import pytest
from clitools import Interruptible, ok
from sparkprocs import (BIN, REPO, StandaloneCluster, catches, environment, kill_marked,
                        marked, running, spark_submit)
from sparktools import consume_all, create_topic, latest_by_key, unique
from waiting import wait_until

JOB = ["--properties-file", "spark-conf/spark-defaults.conf", "jobs/bank_balance.py"]
HELD_READS = REPO / "tests" / "jobs" / "held_reads"  # its sitecustomize holds streaming reads


@pytest.fixture
def cluster():
    c = StandaloneCluster(workers=2, cores=1, memory="1g")
    try:
        yield c.start()
    finally:
        c.stop()
        assert not marked(c.mark), "a master, worker or executor outlived the test"


def submit(submit_args, broker, transactions, tmp_path, **env):
    """spark-submit bank_balance on the transactions; the balances topic's last values."""
    topic = transactions[0]
    out = create_topic(broker.bootstrap, unique("bank.balances"), 1,
                       {"cleanup.policy": "compact"})
    log = tmp_path / "spark-submit.log"
    code = spark_submit([*submit_args, *JOB, "--bootstrap-servers", broker.bootstrap,
                         "--checkpoint", tmp_path / "checkpoint", "--trigger", "available-now",
                         "--transactions-topic", topic, "--balances-topic", out], log, **env)
    assert code == 0, log.read_text()[-5000:]
    return latest_by_key(consume_all(broker.bootstrap, out, 1))


def late_source_worker(tmp_path):
    """A Python for Spark that starts the first streaming source process (the one Spark waits
    a fixed 10 s for) 12 s late, as a starved machine does, and everything else at once."""
    python = tmp_path / "python"
    python.write_text(f"""#!/bin/sh
if [ "$2" = pyspark.sql.streaming.python_streaming_source_runner ] \\
   && mkdir "{tmp_path / 'late'}" 2>/dev/null; then sleep 12; fi
exec {sys.executable} "$@"
""")
    python.chmod(0o755)
    return str(python)


def test_bank_balance_on_a_standalone_cluster_outlasts_a_late_source_worker(
        broker, transactions, tmp_path, cluster):
    python = late_source_worker(tmp_path)
    got = submit(cluster.submit_args(), broker, transactions, tmp_path,
                 PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=python)
    assert (tmp_path / "late").is_dir(), "the source worker was not started through the wrapper"
    assert "starting the query again (2 of 3)" in (tmp_path / "spark-submit.log").read_text()
    assert got == transactions[1]
    assert {worker for worker, _ in cluster.executors()} == {0, 1}, "executors on both workers"


def bank_balance_in_a_terminal(broker, transactions, tmp_path, **env):
    """bank_balance under spark-submit in local mode with a processing-time trigger, as a
    terminal runs it (`env`: more environment); (the process, the mark of every process Spark
    starts for it, its output topic)."""
    out = create_topic(broker.bootstrap, unique("bank.balances"), 1, {"cleanup.policy": "compact"})
    mark = uuid.uuid4().hex
    p = Interruptible([BIN / "spark-submit", *JOB, "--bootstrap-servers", broker.bootstrap,
                       "--checkpoint", tmp_path / "checkpoint", "--trigger",
                       "processing-time=2 seconds", "--transactions-topic", transactions[0],
                       "--balances-topic", out], merged=True, cwd=REPO,
                      env=environment(mark, **env))
    return p, mark, out


def ctrl_c_and_finish(p, mark):
    """Ctrl-C; (exit status, seconds from Ctrl-C to exit, processes left after)."""
    try:
        assert p.proc.poll() is None, p.text()[-5000:]
        p.ctrl_c()
        code = p.finish(180)
        took = time.monotonic() - p.pressed
        wait_until(lambda: not marked(mark), timeout=60, what="Spark's processes to end")
    finally:
        left = marked(mark)
        kill_marked(mark)
    return code, took, left


def test_ctrl_c_stops_a_spark_submit_job_in_one_line(broker, transactions, tmp_path):
    """Ctrl-C (SIGINT to spark-submit's process group, as a terminal sends it) to bank_balance
    once it has written balances: one line after it, exit 130, and no JVM or Python worker
    left (spark-submit prints its Python driver's stderr on stdout)."""
    p, mark, out = bank_balance_in_a_terminal(broker, transactions, tmp_path)
    wait_until(lambda: ok("-b", broker.bootstrap, "offsets", out, "--latest") != f"{out}:0:0\n"
               or p.proc.poll() is not None, timeout=300, what="the job's first balances")
    code, _, left = ctrl_c_and_finish(p, mark)
    assert code == 130, p.text()[-5000:]
    assert p.after_ctrl_c("out") == ["interrupted: stopping"], p.text()[-5000:]
    assert not left, f"processes left after Ctrl-C: {left}"


def test_ctrl_c_at_startup_is_one_line_and_quick(broker, transactions, tmp_path):
    """Ctrl-C as soon as the job's Python driver, started by spark-submit, answers signals
    (it takes SIGTERM from its first line on), while it imports pyspark and Spark starts:
    the one line, exit 130, no traceback, within seconds."""
    p, mark, _ = bank_balance_in_a_terminal(broker, transactions, tmp_path)

    def driver_answers():
        pid = running(mark, sys.executable, "bank_balance.py")
        return pid and catches(pid, signal.SIGTERM)
    wait_until(lambda: driver_answers() or p.proc.poll() is not None, timeout=300,
               what="the job's Python driver to take signals", interval=0.01)
    code, took, left = ctrl_c_and_finish(p, mark)
    print(f"Ctrl-C at startup: exited {took:.1f} s after it")
    assert code == 130, p.text()[-5000:]
    assert p.after_ctrl_c("out") == ["interrupted: stopping"], p.text()[-5000:]
    assert "Traceback" not in p.text(), p.text()[-5000:]
    assert took < 30, f"{took:.0f} s from Ctrl-C to exit"
    assert not left, f"processes left after Ctrl-C: {left}"


def test_ctrl_c_in_the_middle_of_a_micro_batch_exits_within_seconds(broker, transactions,
                                                                    tmp_path):
    """Ctrl-C while the first micro-batch's tasks read (held there for ten minutes by
    held_reads/sitecustomize.py): the job gives the batch BATCH_FINISH_S to end, then stops
    its query inside it. One line, exit 130, nothing left, within seconds (58 s were seen when
    the job waited for the batch to end); the batch wrote nothing."""
    started = tmp_path / "read-started"
    p, mark, out = bank_balance_in_a_terminal(
        broker, transactions, tmp_path, MINILOG_TEST_READ_HOLD="600",
        MINILOG_TEST_READ_STARTED=str(started),
        PYTHONPATH=os.pathsep.join(filter(None, [str(HELD_READS), os.environ.get("PYTHONPATH")])))
    wait_until(lambda: started.exists() or p.proc.poll() is not None, timeout=300,
               what="the first micro-batch's reads")
    code, took, left = ctrl_c_and_finish(p, mark)
    print(f"Ctrl-C in the middle of a micro-batch: exited {took:.1f} s after it")
    assert code == 130, p.text()[-5000:]
    assert p.after_ctrl_c("out") == ["interrupted: stopping"], p.text()[-5000:]
    assert took < 20, f"{took:.1f} s from Ctrl-C to exit"
    assert not left, f"processes left after Ctrl-C: {left}"
    assert ok("-b", broker.bootstrap, "offsets", out, "--latest") == f"{out}:0:0\n", \
        "the held micro-batch wrote balances: Ctrl-C did not land inside it"
