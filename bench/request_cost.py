"""request_cost: the brokers' CPU per acknowledged Produce request, RF=1 and RF=3.

Latency at linger.ms=0 is decided by what one Produce request costs a broker: librdkafka then
sends a request per record, 10,000 a second at 10,000 records/s, and a broker that spends most
of a core on them backs up at the first burst (docs/BENCHMARKS.md, "latency"). Latency on a
shared machine moves with the neighbours; the CPU a broker spends per request does much less.

confluent-kafka produces `--records` records of 100 B, acks=all, linger.ms=0, paced at
`--rate` records/s (below saturation, so most requests carry one record), into a fresh
one-partition topic: RF=1 on one broker, RF=3 (min.insync.replicas=2) on a three-broker cluster
as `minilog cluster up` starts it. The brokers' CPU (all threads, `cluster.process_cpu_seconds`)
over the run, less what they spend idle over as long (measured just before), is divided by the
Produce requests librdkafka counted (its statistics). RF=3 counts the three brokers: the
leader's work plus the followers' fetches, also shown per broker (the leader first).

`--against REV` measures that revision's brokers beside this tree's, runs interleaved.
"""
import contextlib
import json
import os
import time

from . import cluster, revision
from .report import main_args, median

SIZE = 100
RATE, RECORDS, QUICK_RECORDS = 4_000, 12_000, 1_000
IDLE_SECONDS, QUICK_IDLE_SECONDS = 1.0, 0.2


def _cpus(pids):
    return [cluster.process_cpu_seconds(pid) for pid in pids]


def _produce(bootstrap, topic, records, rate):
    """Produce paced records, acks=all, linger.ms=0; the Produce requests librdkafka sent."""
    import confluent_kafka
    stats = []
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                                  "log_level": 3, "statistics.interval.ms": 100,
                                  "stats_cb": stats.append})
    value, t0 = bytes(SIZE), time.monotonic()
    for sent in range(records):
        p.produce(topic, value)
        p.poll(0)
        time.sleep(max(0.0, t0 + (sent + 1) / rate - time.monotonic()))
    if p.flush(60):
        raise RuntimeError("records not acknowledged within 60 s")
    before, deadline = len(stats), time.monotonic() + 10
    while len(stats) == before and time.monotonic() < deadline:  # counts after the last ack
        p.poll(0.05)
    if len(stats) == before:
        raise RuntimeError("no statistics from librdkafka")
    brokers = json.loads(stats[-1])["brokers"]
    return sum(b.get("req", {}).get("Produce", 0) for b in brokers.values())


def _one_run(target, rf, run, args):
    """{"us_per_request", "us_per_record", "requests"} of one run on `target`."""
    pids = target["pids"]
    topic = f"cost-rf{rf}-{run}-{time.monotonic_ns()}"
    cluster.create_topic(target["bootstrap"], topic, 1,
                         {"min.insync.replicas": 2} if rf > 1 else None, rf)
    time.sleep(args.idle)  # the topic's creation settles
    idle0, t0 = _cpus(pids), time.monotonic()
    time.sleep(args.idle)
    idle_rates = [(b - a) / (time.monotonic() - t0) for a, b in zip(idle0, _cpus(pids))]
    cpu0, t0 = _cpus(pids), time.monotonic()
    requests = _produce(target["bootstrap"], topic, args.records, args.rate)
    took = time.monotonic() - t0
    busy = [b - a - idle * took for a, b, idle in zip(cpu0, _cpus(pids), idle_rates)]
    return {"us_per_request": sum(busy) / requests * 1e6,
            "us_per_record": sum(busy) / args.records * 1e6, "requests": requests,
            "us_per_request_each": sorted((x / requests * 1e6 for x in busy), reverse=True)}


@contextlib.contextmanager
def _started(rf, env=None):
    """{"bootstrap", "pids"} of one broker (RF=1) or a three-broker cluster (RF=3)."""
    if rf == 1:
        with cluster.running("minilog", env=env) as b:
            yield {"bootstrap": b.bootstrap, "pids": [b.pid]}
    else:
        with cluster.running_cluster(3, env=env) as c:
            yield {"bootstrap": c.bootstrap, "pids": [n.proc.pid for n in c.nodes]}


def _summary(name, rf, runs):
    per_req = [r["us_per_request"] for r in runs]
    return (f"{name:>10} RF={rf}: {median(per_req):7.1f} µs/request "
            f"(runs {', '.join(f'{x:.0f}' for x in per_req)}), "
            f"{median([r['us_per_record'] for r in runs]):7.1f} µs/record, "
            f"{median([r['requests'] for r in runs]):.0f} requests a run"
            + ("" if rf == 1 else ", per broker (busiest first) " + " + ".join(
                f"{median([r['us_per_request_each'][i] for r in runs]):.0f}" for i in range(3))))


def main(argv=None):
    def more(parser):
        parser.add_argument("--against", metavar="REV",
                            help="a git revision (or a checkout's path) measured beside this tree")
        parser.add_argument("--rate", type=int, default=RATE, help="records/s (default %(default)s)")
        parser.add_argument("--rf", type=int, choices=(1, 3), action="append",
                            help="replication factor(s) to measure (default 1 and 3)")
    args = main_args(argv, more)
    args.repeats = args.repeats or (1 if args.quick else 3)
    args.records = QUICK_RECORDS if args.quick else RECORDS
    args.idle = QUICK_IDLE_SECONDS if args.quick else IDLE_SECONDS
    print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"{args.records} records at {args.rate}/s per run", flush=True)
    with contextlib.ExitStack() as stack:
        sides = revision.sides(args.against, stack)
        for rf in args.rf or (1, 3):
            with contextlib.ExitStack() as up:
                targets = [(name, up.enter_context(_started(rf, env))) for name, env in sides]
                runs = {name: [] for name, _ in sides}
                for r in range(args.repeats):
                    for name, target in (targets if r % 2 == 0 else targets[::-1]):
                        runs[name].append(_one_run(target, rf, r, args))
                for name, _ in sides:
                    print(_summary(name, rf, runs[name]), flush=True)
    print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())} at the end")


if __name__ == "__main__":
    main()
