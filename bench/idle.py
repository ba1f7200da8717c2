"""idle: what a single broker costs doing nothing, its CPU and its wake-ups a second.

A broker that nobody uses should sleep: every timer that fires only to find nothing due costs
a wake-up (a context switch, the event loop's turn, the callback) on a machine shared with the
work that matters, and its CPU is the floor under every other benchmark's "broker CPU per MB".
A fresh single broker (RF=1 `__consumer_offsets` created at its start) is left alone for
`--settle` seconds, then watched for `--seconds`: the CPU of all its threads
(`cluster.process_cpu_seconds`) and its threads' context switches (`/proc/<pid>/task/*/status`,
voluntary and not: each is the thread going to sleep or being put aside, about one a wake-up).

`--against REV` measures that revision's broker beside this tree's, runs interleaved.

    python -m bench idle [--against REV] [--repeats N] [--seconds S]
"""
import contextlib
import os
import time
from pathlib import Path

from . import cluster, revision
from .report import main_args, median

SECONDS, QUICK_SECONDS = 30.0, 5.0
SETTLE_SECONDS = 5.0


def context_switches(pid: int) -> int:
    """The context switches of process `pid`'s live threads so far."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            for line in (task / "status").read_text().splitlines():
                if "ctxt_switches:" in line:  # voluntary_ and nonvoluntary_
                    total += int(line.split()[-1])
        except (OSError, ValueError):
            continue  # a thread that ended while we looked
    return total


def _one_run(pid: int, seconds: float) -> tuple[float, float]:
    """(ms of CPU a second, wake-ups a second) of process `pid` over `seconds`."""
    cpu0, switches0, t0 = cluster.process_cpu_seconds(pid), context_switches(pid), time.monotonic()
    time.sleep(seconds)
    took = time.monotonic() - t0
    return ((cluster.process_cpu_seconds(pid) - cpu0) * 1000 / took,
            (context_switches(pid) - switches0) / took)


def main(argv=None):
    def more(parser):
        parser.add_argument("--against", metavar="REV",
                            help="a git revision (or a checkout's path) measured beside this tree")
        parser.add_argument("--seconds", type=float, help="seconds watched a run (default 30)")
        parser.add_argument("--settle", type=float, default=SETTLE_SECONDS,
                            help="seconds left alone after the start (default %(default)s)")
    args = main_args(argv, more)
    repeats = args.repeats or (1 if args.quick else 3)
    seconds = args.seconds or (QUICK_SECONDS if args.quick else SECONDS)
    print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"{seconds:.0f} s watched a run, {repeats} runs", flush=True)
    with contextlib.ExitStack() as stack:
        sides = revision.sides(args.against, stack)
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in sides}
        for r in range(repeats):
            for name, env in (sides if r % 2 == 0 else sides[::-1]):
                with cluster.running("minilog", env=env) as b:
                    time.sleep(args.settle)
                    runs[name].append(_one_run(b.pid, seconds))
                cpu, wakes = runs[name][-1]
                print(f"{name:>10}: {cpu:6.2f} ms CPU/s, {wakes:6.1f} wake-ups/s", flush=True)
        for name, _ in sides:
            print(f"{name:>10} median: {median([c for c, _ in runs[name]]):6.2f} ms CPU/s, "
                  f"{median([w for _, w in runs[name]]):6.1f} wake-ups/s", flush=True)
    print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())} at the end")


if __name__ == "__main__":
    main()
