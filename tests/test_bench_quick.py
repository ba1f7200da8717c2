"""The benchmarks keep working: each one runs in --quick mode and prints its ratios.

`python -m bench <name> --quick --out <tmp>` is run as a user would run it, from the repository
root, in its own process (it starts and stops its own brokers). The figures of a quick run mean
nothing; what is checked is that it finishes, exits 0, prints its `ratio ... = x` lines and
writes its results file (and plots, when matplotlib is installed).
"""
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from proctree import run_bounded

ROOT = Path(__file__).resolve().parent.parent
RATIO = re.compile(r"^ratio .+ = (\S+)", re.MULTILINE)
BENCHMARKS = ["produce", "consume", "latency", "constant_cost", "scale", "replication", "spark",
              "security", "rebalance", "transactions"]
# A Spark session takes 20-60 s to start on a busy 2-core machine; the rebalance benchmark
# (24 s alone) passed 150 s twice at a load average of 12; latency starts a 3-broker cluster too
# (RF=3).
TIMEOUTS = {"spark": 420, "rebalance": 400, "latency": 300}


def _run(name, out, timeout=150):
    """The benchmark in its own process tree, stopped whole however the test ends (its brokers
    and Spark run in sessions of their own)."""
    return run_bounded([sys.executable, "-m", "bench", name, "--quick", "--out", str(out)],
                       timeout, cwd=ROOT)


@pytest.mark.parametrize("name", BENCHMARKS)
def test_quick_benchmark_runs_and_prints_its_ratios(name, tmp_path):
    try:
        proc = _run(name, tmp_path, TIMEOUTS.get(name, 150))
    except subprocess.TimeoutExpired as e:  # stopped, with what it started: say where it was
        pytest.fail(f"{name} --quick did not finish in {e.timeout:g} s; its output:\n"
                    f"{(e.stdout or '')[-3000:]}\n{(e.stderr or '')[-3000:]}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not proc.leftover, f"processes the benchmark left running: {proc.leftover}"
    ratios = RATIO.findall(proc.stdout)
    assert ratios, proc.stdout[-3000:]
    assert all(float(r.replace(",", "")) > 0 for r in ratios), proc.stdout[-3000:]
    results = json.loads((tmp_path / "bench-results" / f"{name}.json").read_text())
    assert results["quick"] is True and results["ratios"]
    assert results["machine"]["nproc"] >= 1
    if importlib.util.find_spec("matplotlib") is not None:
        assert list((tmp_path / "img").glob(f"{name}-*.png"))


@pytest.mark.skipif(shutil.which("py-spy") is None, reason="py-spy is not installed")
def test_quick_profile_runs(tmp_path):
    proc = _run("profile", tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    profiles = json.loads((tmp_path / "bench-results" / "profile.json").read_text())
    assert {p["process"] for p in profiles} == {"broker", "client"}
    assert all(p["samples"] > 0 for p in profiles)


def test_unknown_benchmark_is_an_error():
    proc = subprocess.run([sys.executable, "-m", "bench", "nope"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 2
    assert "unknown benchmark" in proc.stderr


def test_kernel_micro_benchmark_compares_c_with_the_python_reference():
    proc = subprocess.run([sys.executable, "-m", "bench", "kernel", "--records", "20000"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "python decode_to_arrow" in proc.stdout


def test_latency_against_a_revision_runs_its_broker_beside_this_trees(tmp_path):
    """`--against REV`: the old side's brokers import that revision's code (extracted to a
    temporary directory), not this tree's, and every cell gets a new/old ratio."""
    proc = subprocess.run([sys.executable, "-m", "bench", "latency", "--quick", "--against",
                           "HEAD", "--out", str(tmp_path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    old = re.search(r"old broker: (\S+); new broker: (\S+)", proc.stdout)
    assert old, proc.stdout[-3000:]
    assert Path(old.group(2)) == ROOT / "broker"
    assert not Path(old.group(1)).is_relative_to(ROOT), old.group(1)
    ratios = re.findall(r"^ratio latency p(?:50|99) new/\w+ RF=(\d) (\d+)/s = (\S+)", proc.stdout,
                        re.MULTILINE)
    assert {(rf, rate) for rf, rate, _ in ratios} == {(rf, rate) for rf in ("1", "3")
                                                      for rate in ("10000", "40000")}
    assert all(float(v.replace(",", "")) > 0 for *_, v in ratios)
    assert json.loads((tmp_path / "bench-results" / "latency-compare.json").read_text())["ratios"]


def test_request_cost_prints_the_brokers_cpu_per_produce_request():
    proc = run_bounded([sys.executable, "-m", "bench", "request_cost", "--quick", "--rf", "1"],
                       150, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not proc.leftover, f"processes the benchmark left running: {proc.leftover}"
    cost = re.search(r"new RF=1: +([\d.]+) µs/request", proc.stdout)
    assert cost and float(cost.group(1)) > 0, proc.stdout[-3000:]


def test_idle_prints_an_idle_brokers_cpu_and_wake_ups_a_second():
    proc = run_bounded([sys.executable, "-m", "bench", "idle", "--quick", "--seconds", "2",
                        "--settle", "1"], 150, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not proc.leftover, f"processes the benchmark left running: {proc.leftover}"
    idle = re.search(r"new median: +([\d.]+) ms CPU/s, +([\d.]+) wake-ups/s", proc.stdout)
    assert idle and float(idle.group(1)) > 0 and float(idle.group(2)) > 0, proc.stdout[-3000:]


def test_compare_against_a_revision_prints_a_ratio_per_measure_and_keeps_each_run(tmp_path):
    """`bench compare --against REV`: produce and consume on both trees' brokers, a new/old
    ratio per measure, and every run's figure in the results, so sittings can be pooled."""
    proc = run_bounded([sys.executable, "-m", "bench", "compare", "--quick", "--against", "HEAD",
                        "--out", str(tmp_path)], 300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not proc.leftover, f"processes the benchmark left running: {proc.leftover}"
    ratios = re.findall(r"^ratio (.+) (?:new/\w+|\w+/new) = (\S+)", proc.stdout, re.MULTILINE)
    measures = {m for m, _ in ratios}
    assert {"produce RF=1 MB/s", "produce RF=3 MB/s", "consume confluent consume records/s",
            "consume minilog poll_arrow records/s"} <= measures, proc.stdout[-3000:]
    assert all(float(v.replace(",", "")) > 0 for _, v in ratios)
    rows = json.loads((tmp_path / "bench-results" / "compare.json").read_text())["sections"][0]
    assert all(len(r["old_runs"]) == len(r["new_runs"]) == r["runs"] for r in rows["rows"])
