"""`minilog cluster up|status|down`: a replicated cluster of broker processes on 127.0.0.1.

    minilog cluster up --brokers 3 --data-dir DIR [--port P] [-o key=value ...]
    minilog cluster status --data-dir DIR
    minilog cluster down --data-dir DIR

`up` starts one broker process per node (free ports, or P, P+1, ...), every one a voter of the
controller quorum, each in DIR/broker-N with its log in DIR/broker-N/broker.log, prints a line
per broker saying where it listens, and returns while they keep running. DIR/cluster.json
remembers nodes, ports and process ids, so `up` on the same DIR restarts the same cluster,
`status` reports brokers, the controller, under-replicated and offline partitions, and `down`
stops the processes (SIGTERM: each hands its leaderships off first).
"""
import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from .local_cluster import LocalCluster

STATE = "cluster.json"
JOIN_TIMEOUT_S = 60


class _UserError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise _UserError(f"{self.prog}: {message} (see {self.prog} --help)")


def build_parser(prog="minilog cluster"):
    parser = _Parser(prog=prog, description="Run a replicated minilog cluster on 127.0.0.1.")
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = sub.add_parser("up", help="start the brokers (or restart a stopped cluster's)")
    up.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    up.add_argument("--data-dir", required=True, metavar="DIR")
    up.add_argument("--port", type=int, metavar="P", help="first port (default: free ports)")
    up.add_argument("--override", "-o", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker property for every broker (repeatable)")
    for name, text in (("status", "brokers, controller, under-replicated and offline partitions"),
                       ("down", "stop the brokers")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--data-dir", required=True, metavar="DIR")
    return parser


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read_state(data_dir):
    path = Path(data_dir) / STATE
    if not path.exists():
        raise _UserError(f"minilog cluster: no cluster in {data_dir} (run `minilog cluster up` first)")
    return json.loads(path.read_text())


def _up(args, out):
    data_dir = Path(args.data_dir)
    path = data_dir / STATE
    extra = [x for item in args.override for x in ("-o", item)]
    running = {}
    if path.exists():
        state = json.loads(path.read_text())
        running = {b["node_id"]: b["pid"] for b in state["brokers"]
                   if b.get("pid") and _alive(b["pid"])}
        if len(running) == len(state["brokers"]):
            raise _UserError(f"minilog cluster: the cluster in {data_dir} is already running")
        ports = [b["port"] for b in state["brokers"]]
        extra = state.get("extra", []) + extra
    else:
        if args.brokers < 1:
            raise _UserError("minilog cluster: --brokers must be at least 1")
        ports = [args.port + i for i in range(args.brokers)] if args.port else None
    cluster = LocalCluster(len(ports) if ports else args.brokers, data_dir=data_dir,
                           extra=extra, ports=ports, replicated=True)
    pids = dict(running)
    try:
        for b in cluster.brokers:
            if b.node_id not in running:  # a restart starts only the stopped ones
                pids[b.node_id] = b.start().proc.pid
    except RuntimeError as e:
        for b in cluster.brokers:
            b.kill()
        raise _UserError(f"minilog cluster: {e}") from None
    state = {"brokers": [{"node_id": b.node_id, "port": b.port, "pid": pids[b.node_id]}
                         for b in cluster.brokers], "extra": extra}
    data_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state, indent=1))
    for b in cluster.brokers:
        how = "already running" if b.node_id in running else "listening"
        out.write(f"broker {b.node_id} {how} on {b.bootstrap} (pid {pids[b.node_id]}, "
                  f"log {b.log_path})\n")
    out.write(f"bootstrap servers: {cluster.bootstrap}\n")
    if not cluster.wait_until_live(JOIN_TIMEOUT_S):
        out.write(f"warning: not every broker joined the cluster within {JOIN_TIMEOUT_S}s; "
                  f"see `minilog cluster status` and the broker logs\n")


def _status(args, out):
    from minilog.connector.client import AdminClient, KafkaError
    state = _read_state(args.data_dir)
    bootstrap = ",".join(f"127.0.0.1:{b['port']}" for b in state["brokers"]
                         if b.get("pid") and _alive(b["pid"]))
    for b in state["brokers"]:
        running = b.get("pid") and _alive(b["pid"])
        out.write(f"broker {b['node_id']}\t127.0.0.1:{b['port']}\t"
                  f"{'running (pid %d)' % b['pid'] if running else 'stopped'}\n")
    if not bootstrap:
        out.write("no broker is running\n")
        return 1
    try:
        with AdminClient({"bootstrap.servers": bootstrap, "request.timeout.ms": 5000}) as admin:
            cluster = admin.describe_cluster(timeout=10)
            topics = admin.describe_topics(timeout=10)
    except KafkaError as e:
        out.write(f"cluster not answering: {e}\n")
        return 1
    live = sorted(b.node_id for b in cluster.brokers)
    out.write(f"controller: {cluster.controller_id if cluster.controller_id >= 0 else 'none'}\n")
    out.write(f"live brokers: {','.join(map(str, live))}\n")
    under, offline = [], []
    for name, t in topics.items():
        for p in t.partitions:
            if p.leader < 0:
                offline.append(f"{name}-{p.partition}")
            elif len(p.isr) < len(p.replicas):
                under.append(f"{name}-{p.partition}")
    out.write(f"under-replicated partitions: {len(under)}{': ' + ' '.join(under) if under else ''}\n")
    out.write(f"offline partitions: {len(offline)}{': ' + ' '.join(offline) if offline else ''}\n")
    return 0


def _down(args, out):
    state = _read_state(args.data_dir)
    pids = [(b["node_id"], b["pid"]) for b in state["brokers"] if b.get("pid") and _alive(b["pid"])]
    for _, pid in pids:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 20
    for node, pid in pids:
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _alive(pid):
            os.killpg(pid, signal.SIGKILL)
            out.write(f"broker {node} did not stop in time: killed\n")
        else:
            out.write(f"broker {node} stopped\n")
    for b in state["brokers"]:
        b["pid"] = None
    (Path(args.data_dir) / STATE).write_text(json.dumps(state, indent=1))
    return 0


def main(argv=None, prog="minilog cluster"):
    try:
        args = build_parser(prog).parse_args(argv)
        return {"up": _up, "status": _status, "down": _down}[args.action](args, sys.stdout) or 0
    except _UserError as e:
        print(str(e), file=sys.stderr)
        return 2
    except (OSError, ValueError) as e:
        print(f"minilog cluster: {e}", file=sys.stderr)
        return 1

