"""rebalance: a consumer group of 8 growing to 16 members, classic eager vs KIP-848.

One minilog broker, one topic of 32 partitions fed at a steady 2,000 records/s (to each
partition in turn) by a producer thread; confluent-kafka consumers, each polled by its own
thread, all in this process. 8 members start a quarter second apart (so their heartbeats are
not in step, as in a real deployment), share the partitions (4 each) and consume; then 8 more
join, again one every quarter second (a rolling scale-up); the rebalance is over when all 16
hold 2 partitions each. Measured, per protocol, in the same run:
- rebalance time: from the start of the first new member to that moment;
- time no member consumed: the longest interval, from the start of the new members to one
  second after the end of the rebalance, in which no member received a record (the producer
  never stops, so any such interval is consumption stopped, not a lack of data);
- partition pause: per partition, the longest interval in that window with no record of it
  read, the mean and the worst over the partitions (eager members stop one by one, as each
  learns of the rebalance from its heartbeat, so the group as a whole may never stop while
  every partition does);
- partition-seconds stopped: over all partitions, the sum of the intervals with no record of
  the partition read longer than 0.5 s (or twice the longest such interval of the steady 2 s
  before, if more: fetch cadence alone pauses a partition that long; 16 consumers starting
  on two cores stall everything for a tenth of a second now and then), and how many
  partitions had one.

Two scenarios: consumers without rebalance callbacks (librdkafka revokes in the background),
and consumers whose `on_revoke` takes one second (flushing state before giving partitions up,
as a stateful application does): an eager rebalance cannot finish before every member's has
run, while KIP-848 waits only for the members that give partitions up (full runs only).

Classic: `partition.assignment.strategy=range` (eager: every member revokes everything before
rejoining), heartbeat.interval.ms=1000. KIP-848: `group.protocol=consumer`, the broker's
uniform assignor, group.consumer.heartbeat.interval.ms=1000: the same cadence, so the
difference is the protocol's. With --quick: 2 growing to 4 members on 8 partitions.
"""
import threading
import time

from . import cluster
from .report import Report, bars, main_args, median

RATE = 2000
STEADY_S = 2.0
STAGGER_S = 0.25
STOPPED_S = 0.5
REVOKE_S = 1.0
HEARTBEAT_MS = 1000
PROTOCOLS = {
    "classic eager": {"group.protocol": "classic", "partition.assignment.strategy": "range",
                      "heartbeat.interval.ms": HEARTBEAT_MS, "session.timeout.ms": 10000},
    "KIP-848": {"group.protocol": "consumer"},
}


class _Member:
    """A confluent-kafka consumer polled by a thread; receive times go to the shared list."""

    def __init__(self, conf, topic, stamps, revoke_s):
        from confluent_kafka import Consumer
        self.consumer = Consumer(conf)

        def on_revoke(_consumer, partitions):
            if partitions:
                time.sleep(revoke_s)  # the application's work before letting them go
        self.consumer.subscribe([topic], on_revoke=on_revoke) if revoke_s else \
            self.consumer.subscribe([topic])
        self.held = 0
        self._stamps = stamps
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            msg = self.consumer.poll(0.05)
            if msg is not None and not msg.error():
                self._stamps.append((time.monotonic(), msg.partition()))
            self.held = len(self.consumer.assignment())

    def close(self):
        self._stop.set()
        self._thread.join(30)
        self.consumer.close()


def _produce(bootstrap, topic, partitions, stop):
    """Records to every partition in turn (not sticky batches), so each partition's stream is
    steady and a pause in reading it is the consumers'."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 3})
    i, t0 = 0, time.monotonic()
    while not stop.is_set():
        due = t0 + i / RATE
        now = time.monotonic()
        if due > now:
            time.sleep(min(due - now, 0.01))
            continue
        try:
            p.produce(topic, b"%d" % i, partition=i % partitions)
            i += 1
        except BufferError:
            p.poll(0.01)
        p.poll(0)
    p.flush(30)


def _wait(members, each, timeout=120.0):
    deadline = time.monotonic() + timeout
    while not all(m.held == each for m in members):
        if time.monotonic() > deadline:
            raise TimeoutError(f"members hold {[m.held for m in members]}, wanted {each} each")
        time.sleep(0.01)
    return time.monotonic()


def _one_run(bootstrap, name, conf, first, partitions, revoke_s, run):
    topic = f"rebalance-{name.replace(' ', '-')}-{revoke_s:g}-{run}"
    cluster.create_topic(bootstrap, topic, partitions)
    stamps, stop = [], threading.Event()
    producer = threading.Thread(target=_produce, args=(bootstrap, topic, partitions, stop),
                                daemon=True)
    producer.start()
    conf = {"bootstrap.servers": bootstrap, "group.id": topic, "auto.offset.reset": "latest",
            "log_level": 3, **conf}
    members = []
    try:
        for _ in range(first):
            members.append(_Member(conf, topic, stamps, revoke_s))
            time.sleep(STAGGER_S)
        _wait(members, partitions // first)
        time.sleep(STEADY_S)  # steady consumption first: the baseline of the pauses
        t0 = time.monotonic()
        for _ in range(first):
            members.append(_Member(conf, topic, stamps, revoke_s))
            time.sleep(STAGGER_S)
        t1 = _wait(members, partitions // (2 * first))
        time.sleep(1.0)
        everything = list(stamps)
    finally:
        stop.set()
        for m in members:
            m.close()
        producer.join(30)
    def gaps(start, end):
        """Per partition, the intervals without a record of it read, in [start, end]."""
        seen = [s for s in everything if start <= s[0] <= end]
        return [_gaps([t for t, p in seen if p == part], start, end)
                for part in range(partitions)]
    steady_max = max(max(g) for g in gaps(t0 - STEADY_S, t0))
    threshold = max(STOPPED_S, 2 * steady_max)
    during = [[g for g in part if g > threshold] for part in gaps(t0, t1 + 1.0)]
    return {"rebalance_s": t1 - t0,
            "idle_s": max(_gaps([t for t, _ in everything], t0, t1 + 1.0)),
            "stopped_s": sum(map(sum, during)), "paused": sum(1 for part in during if part),
            "pause_max_s": max((max(part) for part in during if part), default=0.0),
            "steady_max_s": steady_max}


def _gaps(times, start, end):
    window = [start] + sorted(t for t in times if start <= t <= end) + [end]
    return [b - a for a, b in zip(window, window[1:])]


def run(args):
    quick = args.quick
    first, partitions = (2, 8) if quick else (8, 32)
    repeats = args.repeats or (1 if quick else 3)
    rep = Report("rebalance", quick, args.out, {
        "members": f"{first} -> {2 * first}", "partitions": partitions, "rate": RATE,
        "heartbeat_ms": HEARTBEAT_MS, "repeats": repeats})
    overrides = {"group.consumer.heartbeat.interval.ms": HEARTBEAT_MS,
                 "group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 1}
    scenarios = (0.0,) if quick else (0.0, REVOKE_S)
    columns = [("protocol", "protocol"), ("rebalance_s", "rebalance s"),
               ("idle_s", "no member consumed, s"),
               ("stopped_s", "partition-seconds stopped"),
               ("paused", "partitions stopped"), ("pause_max_s", "longest stop, s"),
               ("steady_max_s", "steady gap max, s")]
    results = {}
    with cluster.running("minilog", overrides) as broker:
        for revoke_s in scenarios:
            rows = results[revoke_s] = []
            for name, conf in PROTOCOLS.items():
                runs = [_one_run(broker.bootstrap, name, conf, first, partitions, revoke_s, i)
                        for i in range(repeats)]
                for i, one in enumerate(runs):
                    rep.log(f"{name}, on_revoke {revoke_s:g} s, run {i + 1}: "
                            + ", ".join(f"{k}={v:.3g}" for k, v in one.items()))
                rows.append({"protocol": name,
                             **{k: median([r[k] for r in runs]) for k in runs[0]}})
            what = "no rebalance callbacks" if not revoke_s else f"on_revoke takes {revoke_s:g} s"
            rep.section(f"group of {first} growing to {2 * first} members, {what} "
                        f"(median of {repeats})", rows, columns)
            classic, modern = rows
            tag = "" if not revoke_s else f" (on_revoke {revoke_s:g} s)"
            rep.ratio(f"rebalance time classic/KIP-848{tag}", classic["rebalance_s"],
                      modern["rebalance_s"])
            rep.ratio(f"longest time no member consumed classic/KIP-848{tag}",
                      classic["idle_s"], modern["idle_s"])
    rows = [dict(r, protocol=f"{r['protocol']}, on_revoke {s:g} s")
            for s, rs in results.items() for r in rs]

    def draw(plt):
        bars(plt, [r["protocol"] for r in rows],
             {"rebalance, s": [r["rebalance_s"] for r in rows],
              "partition-seconds stopped": [r["stopped_s"] for r in rows]},
             "seconds", f"{first} → {2 * first} members, {partitions} partitions")
    rep.plot("times", draw)
    rep.finish()


def main(argv=None):
    run(main_args(argv))


if __name__ == "__main__":
    main()
