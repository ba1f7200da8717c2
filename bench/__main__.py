"""`python -m bench <name> [--quick] [--out DIR] [--repeats N]`, or `python -m bench all`."""
import importlib
import signal
import sys
import time
import traceback

BENCHMARKS = ("produce", "consume", "latency", "constant_cost", "scale", "replication", "spark",
              "rebalance", "transactions")
# On request only: diagnoses (profile), micro-benchmarks, comparisons with another revision.
EXTRA = ("profile", "kernel", "security", "metrics", "txn_markers", "mirror", "compare",
         "eos_sink", "connect", "request_cost", "idle")
USAGE = (f"usage: python -m bench {{{'|'.join(BENCHMARKS + EXTRA)}|all}} "
         "[--quick] [--out DIR] [--repeats N]")


def _run(name, argv):
    module = importlib.import_module(f"bench.{name}")
    module.main(argv)


def _stop(signum, frame):
    """SIGTERM (a supervisor's, or a test's on timeout) unwinds the benchmark like Ctrl-C: its
    `finally` blocks stop the brokers and Spark it started, which run in sessions of their
    own and would otherwise outlive it."""
    raise SystemExit(128 + signum)


def main(argv=None):
    signal.signal(signal.SIGTERM, _stop)
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    name, rest = argv[0].replace("-", "_"), argv[1:]
    if name == "all":
        failed, t0 = [], time.time()
        for bench in BENCHMARKS:
            try:
                _run(bench, rest)
            except Exception:  # noqa: BLE001 - report and go on with the next benchmark
                traceback.print_exc()
                failed.append(bench)
            print(flush=True)
        print(f"all benchmarks: {time.time() - t0:.0f} s"
              + (f", FAILED: {', '.join(failed)}" if failed else ""))
        return 1 if failed else 0
    if name not in BENCHMARKS + EXTRA:
        print(f"unknown benchmark {argv[0]!r}\n{USAGE}", file=sys.stderr)
        return 2
    _run(name, rest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
