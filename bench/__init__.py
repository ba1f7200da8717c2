"""minilog's benchmarks: `python -m bench <name> [--quick]` (see docs/BENCHMARKS.md).

Each benchmark starts its own brokers on 127.0.0.1 in temporary directories, warms up, repeats
its measurements and prints medians next to baselines measured in the same run, then writes
`docs/bench-results/<name>.json` and plots under `docs/img/`. Not part of the test suite;
`tests/test_bench_quick.py` runs every one in `--quick` mode so that they keep working.
"""
