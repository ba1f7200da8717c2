"""`minilog cluster up|status|down`: a replicated cluster of broker processes on 127.0.0.1.

    minilog cluster up --brokers 3 [--controllers 3] --data-dir DIR [--port P] [--secure]
                       [-o key=value ...]
    minilog cluster status --data-dir DIR
    minilog cluster down --data-dir DIR

`up` starts one broker process per node (free ports, or P, P+1, ...), every one a voter of the
controller quorum (combined mode), or with `--controllers N` N dedicated controller processes
(DIR/controller-N) beside brokers that are only brokers; each broker is in DIR/broker-N with its
log in DIR/broker-N/broker.log, and every node serves Prometheus metrics. Beside them runs the
web console (`minilog console`, DIR/console.log; not with --no-console). It prints a line per
node saying where it listens and where its metrics are, and the console's URL, and returns
while they keep running. DIR/cluster.json remembers nodes, ports and process ids, so `up` on the
same DIR restarts the same cluster, `status` reports the nodes and their roles, the active
controller, under-replicated and offline partitions (a count and the first few; exit 1 when a
node is down or a partition offline), and `down` stops the processes (SIGTERM: brokers first,
each handing its leaderships off). What a cluster writes is its owner's alone: DIR is 0700, the
nodes run with a umask of 077, and cluster.json, the client settings and the nodes' secured
settings (DIR/security/*.properties) are 0600; no password is in a command line.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from minilog.broker.storage.dir_lock import DirectoryLock, DirectoryLocked, is_locked
from .local_cluster import STATE_FILE as STATE
from .local_cluster import LocalCluster, free_port, wait_for_port
from .private_files import write_private
from .secure_cluster import (
    CLIENT_PROPERTIES,
    LISTENER,
    SecureSetupError,
    client_settings,
    grant_cluster_action,
    secure_settings,
    write_client_properties,
    write_node_properties,
)

CONSOLE_LOG = "console.log"
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
    up.add_argument("--controllers", type=int, default=0, metavar="N",
                    help="dedicated controllers (default 0: every broker is a voter)")
    up.add_argument("--data-dir", required=True, metavar="DIR")
    up.add_argument("--port", type=int, metavar="P", help="first port (default: free ports)")
    up.add_argument("--override", "-o", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker property for every broker (repeatable)")
    up.add_argument("--secure", action="store_true",
                    help="SASL_SSL only (TLS with a generated CA, SCRAM-SHA-512), ACLs on, an "
                         "admin user whose settings go to DIR/client.properties")
    up.add_argument("--no-console", action="store_true",
                    help="do not start the web console (minilog console) beside the cluster")
    for name, text in (("status", "brokers, controller, under-replicated and offline partitions "
                                  "(exit 1 when a node is down or a partition offline)"),
                       ("down", "stop the brokers")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--data-dir", required=True, metavar="DIR")
    return parser


def _alive(pid):
    """Whether process `pid` runs: a killed broker stays a zombie until whoever adopted it
    reaps it, and a zombie serves nothing."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True  # no /proc here: kill(pid, 0) is all there is to know


def _read_state(data_dir):
    path = Path(data_dir) / STATE
    if not path.exists():
        raise _UserError(f"minilog cluster: no cluster in {data_dir} (run `minilog cluster up` first)")
    return json.loads(path.read_text())


def _nodes(state):
    """Every node of a saved cluster, brokers first (the order `down` stops them in)."""
    return state["brokers"] + state.get("controllers", [])


def _secured(args, data_dir):
    """(listener, arguments of every node, of each role, client settings) of a new secured
    cluster: the nodes' settings are in files only their owner reads, not on command lines."""
    try:
        settings, roles, client = secure_settings(data_dir, dedicated=args.controllers > 0)
    except SecureSetupError as e:
        raise _UserError(f"minilog cluster: {e}") from None
    extra, role_extra = write_node_properties(data_dir, settings, roles)
    return LISTENER, extra, role_extra, client


def _up(args, out):
    """Under the cluster directory's lock: two `up`s at once would both start its brokers."""
    try:
        lock = DirectoryLock(args.data_dir, what="`minilog cluster up`")
    except DirectoryLocked as e:
        raise _UserError(f"minilog cluster: {e}") from None
    try:
        return _up_locked(args, out)
    finally:
        lock.release()


def _running(cluster) -> dict:
    """{node id: pid} of the nodes whose data directory a process holds (its broker's lock):
    those run, whatever cluster.json says (a pid there may be stale, or reused)."""
    return {b.node_id: pid for b in cluster.nodes if (pid := is_locked(b.log_dir))}


def _up_locked(args, out):
    data_dir = Path(args.data_dir)
    os.umask(0o077)  # what the nodes write is theirs alone (Kafka's packaging runs it so too)
    data_dir.mkdir(parents=True, exist_ok=True)
    data_dir.chmod(0o700)
    path = data_dir / STATE
    extra = [x for item in args.override for x in ("-o", item)]
    console = None if args.no_console else {}
    if path.exists():
        state = json.loads(path.read_text())
        console = state.get("console") if console is not None else None
        nodes = _nodes(state)
        brokers, controllers = len(state["brokers"]), len(state.get("controllers", []))
        ports = [b["port"] for b in nodes]
        metrics_ports = [b.get("metrics_port") for b in nodes]
        extra = state.get("extra", []) + extra
        role_extra = state.get("role_extra", {})
        replicated = state.get("replicated", True)
        listener, client = state.get("listener", "PLAINTEXT"), client_settings(data_dir)
    else:
        if args.brokers < 1:
            raise _UserError("minilog cluster: --brokers must be at least 1")
        if args.controllers < 0:
            raise _UserError("minilog cluster: --controllers must be 0 (combined mode) or more")
        brokers, controllers = args.brokers, args.controllers
        ports = [args.port + i for i in range(brokers + controllers)] if args.port else None
        metrics_ports = None  # free ports: every node serves /metrics
        replicated = True
        listener, client, role_extra = "PLAINTEXT", {}, {}
        if args.secure:
            listener, secured, role_extra, client = _secured(args, data_dir)
            extra = secured + extra
    cluster = LocalCluster(brokers, data_dir=data_dir, extra=extra, ports=ports,
                           replicated=replicated, controllers=controllers, listener=listener,
                           metrics=True, metrics_ports=metrics_ports, role_extra=role_extra)
    new = not path.exists()
    running = _running(cluster)
    if running and (new or len(running) == len(cluster.nodes)):
        held = ", ".join(f"node {n} (pid {pid})" if pid > 0 else f"node {n}"
                         for n, pid in sorted(running.items()))
        raise _UserError(f"minilog cluster: the cluster in {data_dir} is already running: {held}"
                         + ("; its cluster.json is missing, stop those processes first"
                            if new else ""))
    if client and new:
        write_client_properties(data_dir, client, cluster.bootstrap)
    pids = dict(running)
    try:
        for group in (cluster.controllers, cluster.brokers):
            for b in group:
                if b.node_id not in running:  # a restart starts only the stopped ones
                    pids[b.node_id] = b.start().proc.pid
            if group is cluster.controllers and group and client and new:
                # brokers log in as a user that is not a super user: allow it what they need
                grant_cluster_action([b.port for b in group], client)
    except SecureSetupError as e:
        for b in cluster.nodes:
            b.kill()
        raise _UserError(f"minilog cluster: {e}") from None
    except RuntimeError as e:
        for b in cluster.nodes:
            b.kill()
        raise _UserError(f"minilog cluster: {e}") from None
    cluster.save_state(pids)
    if console is not None:
        console = _console(data_dir, cluster.bootstrap, console, client)
        saved = json.loads(path.read_text())
        write_private(path, json.dumps({**saved, "console": console}, indent=1))
    for role, nodes in (("controller", cluster.controllers), ("broker", cluster.brokers)):
        for b in nodes:
            how = "already running" if b.node_id in running else "listening"
            metrics = f", metrics {b.metrics_url}" if b.metrics_url else ""
            out.write(f"{role} {b.node_id} {how} on {b.bootstrap} (pid {pids[b.node_id]}, "
                      f"log {b.log_path}{metrics})\n")
    out.write(f"bootstrap servers: {cluster.bootstrap}\n")
    if client:
        properties = data_dir / CLIENT_PROPERTIES
        out.write(f"secured: {listener} only (TLS, SCRAM-SHA-512), ACLs on; the admin user's "
                  f"client settings are in {properties}\n"
                  f"  minilog topics list --command-config {properties}\n"
                  f"  kcat -F {properties} -L\n")
        if cluster.controllers:
            out.write("  brokers log in as 'broker', allowed CLUSTER_ACTION on the cluster by an "
                      "ACL (not a super user); controllers as 'controller', a super user\n")
    if console is not None:
        login = (f"; log in as a user of the cluster, e.g. admin, whose password is in "
                 f"{data_dir / CLIENT_PROPERTIES}") if client else ""
        out.write(f"console: http://127.0.0.1:{console['port']}/ (log {data_dir / CONSOLE_LOG}"
                  f"{login})\n")
    if not cluster.wait_until_live(JOIN_TIMEOUT_S, client):
        out.write(f"warning: not every broker joined the cluster within {JOIN_TIMEOUT_S}s; "
                  f"see `minilog cluster status` and the broker logs\n")


_CREDENTIALS = ("sasl.username", "sasl.password", "sasl.jaas.config")


def _console(data_dir, bootstrap, previous, client=None):
    """The web console of the cluster (`minilog console`, its own process, DIR/console.log),
    started unless `previous` ({"pid", "port"} from cluster.json) still runs; on its old port
    when it had one. A secured cluster's gets the `client` settings that reach it (TLS, SASL
    mechanism) but never the admin's credentials: each user logs in as one of the cluster's
    users and acts with that user's ACLs. {"pid", "port"}."""
    if previous and previous.get("pid") and _alive(previous["pid"]):
        return previous
    port = (previous or {}).get("port") or free_port()
    with open(data_dir / CONSOLE_LOG, "ab") as log:
        secured = [x for k, v in (client or {}).items() if k not in _CREDENTIALS
                   for x in ("-X", f"{k}={v}")]
        proc = subprocess.Popen([sys.executable, "-m", "minilog.connector.cli", "-b", bootstrap,
                                 *secured, "console", "--listen", f"127.0.0.1:{port}"],
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:  # the console's address, printed next, answers as soon as it is read
        wait_for_port(port, 60, proc)
    except (RuntimeError, TimeoutError) as e:
        raise _UserError(f"minilog cluster: the console did not start ({e}); see "
                         f"{data_dir / CONSOLE_LOG}") from None
    return {"pid": proc.pid, "port": port}


def _status(args, out):
    """What the processes show and what the controller knows, side by side and never
    contradicting: a broker whose process is gone but that the controller has not fenced yet
    is said to be so, and its replicas count as under-replicated (its leaderships as offline)
    before the controller shrinks the ISRs and moves the leaders."""
    from minilog.connector.client import AdminClient, KafkaError
    state = _read_state(args.data_dir)
    running = {b["node_id"] for b in _nodes(state) if b.get("pid") and _alive(b["pid"])}
    bootstrap = ",".join(f"127.0.0.1:{b['port']}" for b in state["brokers"]
                         if b["node_id"] in running)
    live = None
    if bootstrap:
        try:
            with AdminClient({**client_settings(args.data_dir), "bootstrap.servers": bootstrap,
                              "request.timeout.ms": 5000}) as admin:
                cluster = admin.describe_cluster(timeout=10)
                topics = admin.describe_topics(timeout=10)
            live = {b.node_id for b in cluster.brokers}
        except KafkaError as e:
            failure = e
    dedicated = bool(state.get("controllers"))
    for role, nodes in (("broker", state["brokers"]), ("controller", state.get("controllers", []))):
        for b in nodes:
            roles = role if dedicated else "broker,controller"
            out.write(f"{role} {b['node_id']}\t127.0.0.1:{b['port']}\t{roles}\t"
                      f"{_process_and_controller(b, role, running, live)}\n")
    console = state.get("console")
    if console and console.get("pid") and _alive(console["pid"]):
        out.write(f"console: http://127.0.0.1:{console['port']}/\n")
    if not bootstrap:
        out.write("no broker is running\n")
        return 1
    if live is None:
        out.write(f"cluster not answering: {failure}\n")
        return 1
    gone = live - running  # counted live by the controller, their process gone
    out.write(f"controller: {cluster.controller_id if cluster.controller_id >= 0 else 'none'}\n")
    voters = state.get("controllers") or state["brokers"]
    out.write(f"controller quorum: {','.join(str(b['node_id']) for b in voters)}"
              f"{' (dedicated controllers)' if dedicated else ' (every broker is a voter)'}\n")
    out.write(f"live brokers: {_ids(live - gone)}"
              f"{f' (and {_ids(gone)}: process gone, not fenced yet)' if gone else ''}\n")
    under, offline = [], []
    for name, t in topics.items():
        for p in t.partitions:
            if p.leader < 0 or p.leader in gone:
                offline.append((name, p.partition))
            elif len(p.isr) < len(p.replicas) or gone & set(p.isr):
                under.append((name, p.partition))
    why = f" (counting the replicas on {_ids(gone)}, whose process is gone)" if gone else ""
    out.write(f"under-replicated partitions: {len(under)}{why}{_summary(under)}\n")
    out.write(f"offline partitions: {len(offline)}"
              f"{f' (led by {_ids(gone)}, whose process is gone)' if gone and offline else ''}"
              f"{_summary(offline)}\n")
    # As scripts use `kafka-topics --under-replicated-partitions`: non-zero when a node is down
    # or a partition has no leader; under-replication alone follows a node down, or heals.
    stopped = {b["node_id"] for b in _nodes(state)} - running
    return 1 if stopped or offline else 0


SHOWN = 5  # partition names listed before the rest are only counted, by topic


def _summary(partitions: list) -> str:
    """': a-0 a-1 ...' for a few partitions; for many, the first few and a count per topic."""
    if not partitions:
        return ""
    names = " ".join(f"{t}-{p}" for t, p in partitions[:SHOWN])
    if len(partitions) <= SHOWN:
        return f": {names}"
    per_topic: dict = {}
    for t, _ in partitions:
        per_topic[t] = per_topic.get(t, 0) + 1
    counts = ", ".join(f"{t} {n}" for t, n in sorted(per_topic.items(), key=lambda x: -x[1]))
    return f": {names} and {len(partitions) - SHOWN} more (by topic: {counts})"


def _ids(nodes):
    return ",".join(map(str, sorted(nodes))) or "none"


def _process_and_controller(node, role, running, live):
    """One node's state: its process, and for a broker whether the controller counts it live."""
    if node["node_id"] not in running:
        if role == "broker" and live is not None and node["node_id"] in live:
            return "stopped (process gone; the controller has not fenced it yet)"
        return "stopped"
    shown = f"running (pid {node['pid']})"
    if role == "broker" and live is not None and node["node_id"] not in live:
        shown += ", not live for the controller (fenced, or still joining)"
    return shown


def _down(args, out):
    state = _read_state(args.data_dir)
    # Brokers first: each asks the controller to move its leaderships before it goes.
    for role, nodes in (("broker", state["brokers"]), ("controller", state.get("controllers", []))):
        pids = [(b["node_id"], b["pid"]) for b in nodes if b.get("pid") and _alive(b["pid"])]
        for _, pid in pids:
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for node, pid in pids:
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if _alive(pid):
                os.killpg(pid, signal.SIGKILL)
                out.write(f"{role} {node} did not stop in time: killed\n")
            else:
                out.write(f"{role} {node} stopped\n")
    console = state.get("console")
    if console and console.get("pid") and _alive(console["pid"]):
        os.kill(console["pid"], signal.SIGTERM)
        deadline = time.monotonic() + 10
        while _alive(console["pid"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _alive(console["pid"]):
            os.killpg(console["pid"], signal.SIGKILL)
        out.write("console stopped\n")
    if console:
        console["pid"] = None
    for b in _nodes(state):
        b["pid"] = None
    write_private(Path(args.data_dir) / STATE, json.dumps(state, indent=1))
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

