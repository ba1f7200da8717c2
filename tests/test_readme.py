"""The README's Python examples, run as a reader would: each block as a script, against a real broker."""
import re
import subprocess
import sys

import pytest
from brokers import MinilogBroker
from readme import ROOT, blocks, quick_start_commands

from minilog.jobs.pipeline import SOURCE_WORKER_LATE, STARTS

BLOCKS = blocks("python")
CLIENT_EXAMPLE = next(i for i, code in enumerate(BLOCKS) if "Consumer(" in code)


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """Each python block run once, in README order, as `python script.py`, against a new
    broker. Run again from the start, as a reader would, when Spark gave up waiting for a
    streaming source's Python process (a fixed 10 s that a starved machine can miss: see
    pipeline.start_query; the README's example starts its queries plainly)."""
    for _ in range(STARTS):
        b = MinilogBroker().start()
        try:
            results = run_blocks(b.bootstrap, tmp_path_factory.mktemp("readme"), BLOCKS)
        finally:
            b.cleanup()
        if not any(SOURCE_WORKER_LATE in r.stderr for r in results):
            break
    return results


def run_blocks(bootstrap, directory, blocks):
    results = []
    for index, code in enumerate(blocks):
        script = directory / f"block{index}.py"
        script.write_text(code.replace("127.0.0.1:9092", bootstrap))
        results.append(subprocess.run([sys.executable, str(script)], check=False,
                                      capture_output=True, text=True, timeout=300))
    return results


def run_alone(code, directory):
    """One block as the only thing a new broker has seen (again if Spark's source process
    was late, as in `ran`)."""
    for _ in range(STARTS):
        b = MinilogBroker().start()
        try:
            result, = run_blocks(b.bootstrap, directory, [code])
        finally:
            b.cleanup()
        if SOURCE_WORKER_LATE not in result.stderr:
            break
    return result


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_python_example_runs(ran, index):
    assert ran[index].returncode == 0, ran[index].stderr


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_python_example_runs_on_its_own(tmp_path, index):
    """A reader may run any one example first: each creates what it needs, and a topic that
    an earlier example created is no error."""
    alone = run_alone(BLOCKS[index], tmp_path)
    assert alone.returncode == 0, alone.stderr


def test_the_spark_example_sets_few_shuffle_partitions():
    """Spark's default of 200 shuffle partitions turns the example's three-row aggregation
    into 200 tasks; the jobs set a few (spark-conf/), so does the example's session."""
    spark_example = next(code for code in BLOCKS if "SparkSession.builder" in code)
    assert re.search(r'\.config\("spark\.sql\.shuffle\.partitions", \d\)', spark_example)


def test_the_spark_example_ends_cleanly(ran):
    """No stack traces at its end (a listener left registered makes Spark's listener bus call
    into the Python that exited) and no warning of our own making (registering the source
    over the one Spark found by name)."""
    index = next(i for i, code in enumerate(BLOCKS) if "SparkSession.builder" in code)
    stderr = ran[index].stderr
    for noise in ("Py4JNetworkException", "Traceback", "replaced a statically registered"):
        assert noise not in stderr, stderr[-5000:]


def test_the_client_example_prints_the_records_it_produced(ran):
    # printed as `partition offset key value`, e.g. `1 0 b'alice' b'100'`
    printed = re.findall(r"^\d+ \d+ b'(\w+)' b'(-?\d+)'$", ran[CLIENT_EXAMPLE].stdout, re.MULTILINE)
    assert sorted(printed) == [("alice", "100"), ("bob", "-20"), ("carol", "35")], \
        ran[CLIENT_EXAMPLE].stdout


def test_ci_runs_the_readme_test_command():
    # the first command is run for real by tests/test_fresh_install.py
    assert quick_start_commands()[1] in (ROOT / ".ci" / "run").read_text()
