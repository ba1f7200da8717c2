"""compare: the working tree's broker against another revision's, in one sitting.

A rebuilt broker (new metadata image and loader, coordinator runtime, Raft core) must cost no
more than the one it replaces. On a shared machine absolute figures move with the neighbours'
load, so both brokers are measured here interleaved (old, new; then new, old), each run on a
fresh broker or cluster of its tree (`revision.checked_out`), with this tree's clients:

- produce: confluent-kafka, idempotent, acks=all, 1 KB values, to one broker (RF=1) and to a
  three-broker cluster (RF=3, min.insync.replicas=2): MB/s from first send to last ack;
- consume: one partition of 100 B records read to its end by confluent-kafka and by minilog's
  Arrow path (records/s).

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

PRODUCE_RECORDS, QUICK_PRODUCE_RECORDS = 50_000, 5_000
CONSUME_RECORDS, QUICK_CONSUME_RECORDS = 500_000, 50_000
READERS = ("confluent consume", "minilog poll_arrow")
MIN_INSYNC = 2


def _load() -> str:
    return "load %.1f %.1f %.1f" % os.getloadavg()


@contextlib.contextmanager
def _target(rf: int, env: dict | None):
    """A fresh broker (rf=1) or three-broker cluster of the tree `env` runs; its bootstrap."""
    if rf == 1:
        with cluster.running("minilog", env=env) as b:
            yield b.bootstrap
    else:
        with cluster.running_cluster(rf, env=env) as c:
            yield c.bootstrap


def _produce(env: dict | None, rf: int, n: int, topic: str) -> float:
    with _target(rf, env) as bootstrap:
        config = {"min.insync.replicas": str(MIN_INSYNC)} if rf > 1 else None
        cluster.create_topic(bootstrap, topic, 1, config, replication_factor=rf)
        return _throughput(bootstrap, topic, n)


def _consume(env: dict | None, n: int) -> dict[str, float]:
    with _target(1, env) as bootstrap:
        _fill(bootstrap, "big", n)
        for r in READERS:  # warm-up: connections, the page cache
            CONSUME_READERS[r](bootstrap, "big", n)
        return {r: n / CONSUME_READERS[r](bootstrap, "big", n) for r in READERS}


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
                    mb_s = _produce(env, rf, produce_n, f"produce-rf{rf}-{r}")
                    cells.setdefault((name, f"produce RF={rf} MB/s"), []).append(mb_s)
                    rep.log(f"{name:8} produce RF={rf}: {mb_s:8.2f} MB/s")
                for reader, rate in _consume(env, consume_n).items():
                    cells.setdefault((name, f"consume {reader} records/s"), []).append(rate)
                    rep.log(f"{name:8} consume {reader}: {rate:12,.0f} records/s")
            rep.log(f"{_load()} after round {r + 1}")
    measures = sorted({m for _, m in cells})
    rows = [{"measure": m, "old": median(cells[(old_name, m)]), "new": median(cells[("new", m)]),
             "runs": len(cells[("new", m)])} for m in measures]
    rep.section(f"{old_name} against the working tree, interleaved (median of runs)", rows,
                [("measure", "measure"), ("old", old_name), ("new", "working tree"),
                 ("runs", "runs each")])
    for row in rows:
        rep.ratio(f"{row['measure']} new/{old_name}", row["new"], row["old"], "target >= 0.95")
    rep.finish()


def _more(parser) -> None:
    parser.add_argument("--against", metavar="REV", required=True,
                        help="a git revision (or another checkout's path) to measure the "
                             "working tree's broker against, interleaved")


def main(argv=None) -> None:
    run(main_args(argv, _more))


if __name__ == "__main__":
    main()
