"""A local minilog cluster of broker processes on 127.0.0.1, for demos, jobs and benchmarks.

Each broker runs as `python -m minilog.broker start` in its own process with its own data
directory (a temporary one unless given), so a demo exercises the same code as production.
More than one broker form a replicated cluster: every broker is a voter of the controller
quorum (`controller.quorum.voters`, KRaft's combined mode), their ports fixed up front. With
`controllers=N` the quorum is N dedicated controller processes instead (`process.roles=
controller`, listening on a CONTROLLER listener) and the brokers are only brokers.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .private_files import write_private

STATE_FILE = "cluster.json"  # in the data directory: what `minilog cluster` knows of a cluster


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, timeout=20.0, proc=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"broker exited with code {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout:.0f}s")


class BrokerProcess:
    """One broker process; `bootstrap` is its host:port. Restartable on the same port and data."""

    def __init__(self, data_dir, port=None, node_id=1, extra=(), listener="PLAINTEXT",
                 metrics_port=None, env=None):
        """`env`: the process's environment (None: this one's), e.g. a PYTHONPATH that runs
        another checkout of minilog beside this one (bench/revision.py)."""
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.node_id = node_id
        self.extra = list(extra)
        self.listener = listener  # CONTROLLER for a controller-only node
        self.more_listeners = ""  # e.g. "SASL_SSL://127.0.0.1:9093": served beside the first
        self.metrics_port = metrics_port  # serves Prometheus's /metrics there when set
        self.env = env
        self.proc = None

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    @property
    def metrics_url(self):
        return f"http://127.0.0.1:{self.metrics_port}/metrics" if self.metrics_port else None

    @property
    def log_path(self):
        return self.data_dir / "broker.log"

    @property
    def log_dir(self):
        """Where the broker keeps its partitions (`topic-N/` directories)."""
        return self.data_dir / "data"

    def argv(self):
        listen = (["--listen", self.bootstrap] if self.listener == "PLAINTEXT" else
                  ["-o", f"listeners={self.listener}://{self.bootstrap}"])
        metrics = ["-o", f"metrics.listener=http://127.0.0.1:{self.metrics_port}"] \
            if self.metrics_port else []
        if self.more_listeners:
            listen = ["-o", f"listeners={self.listener}://{self.bootstrap},{self.more_listeners}"]
        return [sys.executable, "-m", "minilog.broker", "start", *listen,
                "--data-dir", str(self.log_dir), "--node-id", str(self.node_id),
                *metrics, *self.extra]

    def start(self, timeout=20.0):
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True, env=self.env)
        try:
            wait_for_port(self.port, timeout, self.proc)
        except (RuntimeError, TimeoutError) as e:
            self.kill()
            raise RuntimeError(f"{e}; see {self.log_path}") from None
        return self

    def stop(self, timeout=60.0):
        """SIGTERM, as an operator would; SIGKILL if it does not exit in time (generous: a
        clean stop on a loaded machine can take seconds, and a kill makes the next start
        recover its logs)."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode if self.proc else None

    def kill(self):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def restart(self):
        self.stop()
        return self.start()

    def log(self):
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


class LocalCluster:
    """`with LocalCluster() as cluster:` starts brokers; leaving the block stops and cleans up.

    Brokers are nodes 1..size; dedicated controllers (`controllers=N`) are the nodes after them.
    `metrics_ports` (one per node, in that order; None for free ports when `metrics`) turn on
    each node's Prometheus endpoint (`metrics.listener`).
    """

    def __init__(self, size=1, data_dir=None, extra=(), ports=None, replicated=None,
                 controllers=0, listener="PLAINTEXT", metrics=False, metrics_ports=None,
                 role_extra=None, env=None):
        """`listener`: the brokers' one listener's protocol (SASL_SSL for a secured cluster,
        whose settings are in `extra`); `role_extra`: more arguments for the nodes of one
        role ({"broker": [...], "controller": [...]}, e.g. each role's login); `env`: the nodes' environment (see `BrokerProcess`)."""
        self._tmp = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="minilog-cluster-")
            data_dir = self._tmp.name
        self.data_dir = Path(data_dir)
        ports = list(ports) if ports else [free_port() for _ in range(size + controllers)]
        if replicated is None:
            replicated = size > 1 or controllers > 0
        self.replicated, self.extra, self.listener = replicated, list(extra), listener
        self.role_extra = {role: list(args) for role, args in (role_extra or {}).items()}
        if metrics and not metrics_ports:
            metrics_ports = [free_port() for _ in range(size + controllers)]
        metrics_ports = list(metrics_ports or [None] * (size + controllers))
        ids = range(1, size + controllers + 1)
        voters = list(zip(ids, ports))[size:] if controllers else list(zip(ids, ports))
        common = ["-o", "controller.quorum.voters=" +
                  ",".join(f"{n}@127.0.0.1:{p}" for n, p in voters)] if replicated else []
        roles = {"broker": [], "controller": []}
        if controllers:  # the controllers create __consumer_offsets, at most on every broker
            common += ["-o", f"offsets.topic.replication.factor={min(3, size)}",
                       "-o", f"transaction.state.log.replication.factor={min(3, size)}"]
            roles = {"broker": ["-o", "process.roles=broker"],
                     "controller": ["-o", "process.roles=controller"]}
        roles = {role: args + self.role_extra.get(role, []) for role, args in roles.items()}
        self.brokers = [BrokerProcess(self.data_dir / f"broker-{i + 1}", port=ports[i],
                                      node_id=i + 1, extra=[*common, *roles["broker"], *extra],
                                      listener=listener, metrics_port=metrics_ports[i],
                                      env=env)
                        for i in range(size)]
        self.controllers = [BrokerProcess(self.data_dir / f"controller-{n}", port=p, node_id=n,
                                          extra=[*common, *roles["controller"], *extra],
                                          listener="CONTROLLER",
                                          metrics_port=metrics_ports[n - 1], env=env)
                            for n, p in voters] if controllers else []

    @property
    def nodes(self):
        return self.controllers + self.brokers

    @property
    def bootstrap(self):
        return ",".join(b.bootstrap for b in self.brokers)

    def start(self):
        try:
            for b in self.nodes:
                b.start()
        except BaseException:
            self.stop()
            raise
        return self

    def wait_until_live(self, timeout=60.0, client=None):
        """Whether every broker registered and caught up within `timeout` (the controller
        unfenced it): until then a topic with a replica on each broker cannot be placed.
        `client`: the settings to reach a secured cluster."""
        from minilog.connector.client import AdminClient, KafkaError
        deadline = time.monotonic() + timeout
        with AdminClient({**(client or {}), "bootstrap.servers": self.bootstrap}) as admin:
            while time.monotonic() < deadline:
                try:
                    if len(admin.describe_cluster(timeout=5).brokers) >= len(self.brokers):
                        return True
                except KafkaError:
                    pass
                time.sleep(0.2)
        return False

    def save_state(self, pids=None):
        """Write DATA_DIR/cluster.json: the nodes, their ports and process ids (`pids`
        {node_id: pid}, default those this object started) and the settings to start them
        again with. `minilog cluster status|down|up --data-dir DATA_DIR` work from it, so a
        cluster started here (the demo's `--keep`) is an ordinary `minilog cluster`."""
        if pids is None:
            pids = {b.node_id: b.proc.pid for b in self.nodes if b.proc and b.proc.poll() is None}

        def saved(nodes):
            return [{"node_id": b.node_id, "port": b.port, "pid": pids.get(b.node_id),
                     "metrics_port": b.metrics_port} for b in nodes]
        state = {"brokers": saved(self.brokers), "controllers": saved(self.controllers),
                 "extra": self.extra, "replicated": self.replicated, "listener": self.listener,
                 "role_extra": self.role_extra}
        self.data_dir.mkdir(parents=True, exist_ok=True)
        path = self.data_dir / STATE_FILE
        write_private(path, json.dumps(state, indent=1))
        return path

    def broker(self, node_id):
        """The node (broker or controller) with this id."""
        return next(b for b in self.nodes if b.node_id == node_id)

    def stop(self):
        for b in self.brokers + self.controllers:  # brokers hand off leadership first
            b.stop()
        if self._tmp:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
