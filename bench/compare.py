"""compare: the working tree's broker against another revision's, in one sitting.

A rebuilt broker (new metadata image and loader, coordinator runtime, Raft core) must cost no
more than the one it replaces. On a shared machine absolute figures move with the neighbours'
load, so both brokers are measured here interleaved (old, new; then new, old), each run on a
fresh broker or cluster of its tree (`revision.checked_out`), with this tree's clients:

- produce: confluent-kafka, idempotent, acks=all, 1 KB values, to one broker (RF=1) and to a
  three-broker cluster (RF=3, min.insync.replicas=2): MB/s from first send to last ack;
- consume: one partition of 100 B records read to its end by confluent-kafka and by minilog's
  Arrow path (records/s), from one broker of each tree started and filled once, read once to
  warm it, then read in turns: a fresh broker's first reads (its page cache, its first fetch
  sessions) moved a sitting's figures by 10-25 %.

Throughput on a busy machine is mostly the neighbours' and the client's; the brokers' own CPU
seconds per MB moved (every broker process of the run, /proc) are reported beside it and are
the steadier measure of what the broker code costs.

Produce-to-consume latency has its own comparison: `python -m bench latency --against REV`.

    python -m bench compare --against f065238 [--quick] [--repeats N]
"""
from __future__ import annotations

import contextlib
import os


from . import cluster, revision
from .consume import READERS as CONSUME_READERS
from .consume import SIZE as CONSUME_SIZE
from .consume import _fill
from .replication import SIZE as PRODUCE_SIZE
from .replication import _throughput
from .report import Report, main_args, median

# 200 MB a run: 50,000 records took 0.13-0.2 s at RF=1, where one scheduling hiccup on a
# shared machine moved a run by more than the 5 % a comparison must resolve.
PRODUCE_RECORDS, QUICK_PRODUCE_RECORDS = 200_000, 5_000
CONSUME_RECORDS, QUICK_CONSUME_RECORDS = 500_000, 50_000
READERS = ("confluent consume", "minilog poll_arrow")
MIN_INSYNC = 2


def _load() -> str:
    return "load %.1f %.1f %.1f" % os.getloadavg()


class _Target:
    """A fresh broker (rf=1) or three-broker cluster of one tree: its bootstrap, and the CPU
    seconds its broker processes have used so far."""

    def __init__(self, bootstrap: str, pids: list[int]) -> None:
        self.bootstrap, self.pids = bootstrap, pids

    def cpu_seconds(self) -> float:
        return sum(cluster.process_cpu_seconds(pid) for pid in self.pids)


@contextlib.contextmanager
def _target(rf: int, env: dict | None):
    if rf == 1:
        with cluster.running("minilog", env=env) as b:
            yield _Target(b.bootstrap, [b.pid])
    else:
        with cluster.running_cluster(rf, env=env) as c:
            yield _Target(c.bootstrap, [b.proc.pid for b in c.brokers])


def _produce(env: dict | None, rf: int, n: int, topic: str) -> tuple[float, float]:
    """(MB/s, broker CPU ms per MB)."""
    with _target(rf, env) as t:
        config = {"min.insync.replicas": str(MIN_INSYNC)} if rf > 1 else None
        cluster.create_topic(t.bootstrap, topic, 1, config, replication_factor=rf)
        before = t.cpu_seconds()
        mb_s = _throughput(t.bootstrap, topic, n)
        return mb_s, (t.cpu_seconds() - before) * 1000 / (n * PRODUCE_SIZE / 1e6)


def _consume(t: _Target, n: int) -> dict[str, tuple[float, float]]:
    """reader -> (records/s, broker CPU ms per MB), from a broker `_filled` already."""
    got = {}
    for r in READERS:
        before = t.cpu_seconds()
        seconds = CONSUME_READERS[r](t.bootstrap, "big", n)
        got[r] = (n / seconds, (t.cpu_seconds() - before) * 1000 / (n * CONSUME_SIZE / 1e6))
    return got


@contextlib.contextmanager
def _filled(env: dict | None, n: int):
    """One broker of a tree holding `n` records in `big`, each reader's first read done."""
    with _target(1, env) as t:
        _fill(t.bootstrap, "big", n)
        for r in READERS:  # warm-up: connections, the page cache
            CONSUME_READERS[r](t.bootstrap, "big", n)
        yield t


def run(args) -> None:
    quick = args.quick
    repeats = args.repeats or (1 if quick else 3)
    produce_n = QUICK_PRODUCE_RECORDS if quick else PRODUCE_RECORDS
    consume_n = QUICK_CONSUME_RECORDS if quick else CONSUME_RECORDS
    old_name = revision.describe(args.against)
    rep = Report("compare", quick, args.out,
                 {"old": old_name, "new": "working tree", "repeats": repeats,
                  "produce records": produce_n, "produce value bytes": PRODUCE_SIZE,
                  "consume records": consume_n, "consume value bytes": CONSUME_SIZE,
                  "min.insync.replicas (RF=3)": MIN_INSYNC})
    rep.log(f"{_load()} at the start")
    cells: dict[tuple[str, str], list[float]] = {}
    with revision.checked_out(args.against) as old_env:
        trees = [(old_name, old_env), ("new", None)]
        rep.log(f"old broker: {revision.broker_path(old_env)}; new broker: "
                f"{revision.broker_path(dict(os.environ))}")
        for r in range(repeats):
            for name, env in (trees if r % 2 == 0 else trees[::-1]):
                for rf in (1, 3):
                    mb_s, cpu = _produce(env, rf, produce_n, f"produce-rf{rf}-{r}")
                    cells.setdefault((name, f"produce RF={rf} MB/s"), []).append(mb_s)
                    cells.setdefault((name, f"produce RF={rf} broker CPU ms/MB"), []).append(cpu)
                    rep.log(f"{name:8} produce RF={rf}: {mb_s:8.2f} MB/s, broker CPU "
                            f"{cpu:6.2f} ms/MB")
            rep.log(f"{_load()} after produce round {r + 1}")
        with _filled(old_env, consume_n) as old_t, _filled(None, consume_n) as new_t:
            filled = [(old_name, old_t), ("new", new_t)]
            for r in range(repeats):
                for name, t in (filled if r % 2 == 0 else filled[::-1]):
                    for reader, (rate, cpu) in _consume(t, consume_n).items():
                        cells.setdefault((name, f"consume {reader} records/s"), []).append(rate)
                        cells.setdefault((name, f"consume {reader} broker CPU ms/MB"),
                                         []).append(cpu)
                        rep.log(f"{name:8} consume {reader}: {rate:12,.0f} records/s, broker "
                                f"CPU {cpu:6.2f} ms/MB")
            rep.log(f"{_load()} after the consume rounds")
    measures = sorted({m for _, m in cells})
    # Each run's figure is kept in the results file too, so sittings can be pooled: one
    # sitting's median still moves by 10-15 % on a shared machine.
    rows = [{"measure": m, "old": median(cells[(old_name, m)]), "new": median(cells[("new", m)]),
             "runs": len(cells[("new", m)]), "old_runs": cells[(old_name, m)],
             "new_runs": cells[("new", m)]} for m in measures]
    rep.section(f"{old_name} against the working tree, interleaved (median of runs)", rows,
                [("measure", "measure"), ("old", old_name), ("new", "working tree"),
                 ("runs", "runs each")])
    for row in rows:
        if "CPU" in row["measure"]:  # a cost: the old tree's over the new one's
            rep.ratio(f"{row['measure']} {old_name}/new", row["old"], row["new"],
                      "target >= 0.95")
        else:
            rep.ratio(f"{row['measure']} new/{old_name}", row["new"], row["old"],
                      "target >= 0.95")
    rep.finish()


def _more(parser) -> None:
    parser.add_argument("--against", metavar="REV", required=True,
                        help="a git revision (or another checkout's path) to measure the "
                             "working tree's broker against, interleaved")


def main(argv=None) -> None:
    run(main_args(argv, _more))


if __name__ == "__main__":
    main()
