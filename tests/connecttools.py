"""A Kafka Connect worker (`minilog connect worker.properties`) as a test process, and its REST
API called as users call it: plain HTTP and JSON through urllib, statuses and bodies as they are.

The worker starts a Spark JVM and Python workers of its own; every process it starts carries a
marker in its environment (sparkprocs), so kill -9 and teardown reach all of them, and nothing
else.
"""
import json
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from brokers import free_port
from sparkprocs import MarkedProcess, environment
from waiting import wait_until

START_TIMEOUT_S = 240.0


def worker_properties(bootstrap, port, checkpoints, group="connect-cluster", **more):
    """Kafka's connect-distributed.properties, pointed at `bootstrap`, for one worker."""
    props = {"bootstrap.servers": bootstrap, "group.id": group,
             "config.storage.topic": f"{group}-configs", "offset.storage.topic": f"{group}-offsets",
             "status.storage.topic": f"{group}-status",
             "config.storage.replication.factor": "1", "offset.storage.replication.factor": "1",
             "status.storage.replication.factor": "1",
             "key.converter": "org.apache.kafka.connect.storage.StringConverter",
             "value.converter": "org.apache.kafka.connect.storage.StringConverter",
             "listeners": f"http://127.0.0.1:{port}",
             "spark.sql.streaming.checkpointLocation": str(checkpoints), **more}
    return "".join(f"{k}={v}\n" for k, v in props.items())


class ConnectWorker(MarkedProcess):
    """One worker process on a free port, restartable with the same properties."""

    def __init__(self, directory, bootstrap, **more):
        self.dir = Path(directory)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.properties = self.dir / "worker.properties"
        self.properties.write_text(worker_properties(bootstrap, self.port,
                                                     self.dir / "checkpoints", **more))
        self.proc = None
        self.mark = None

    @property
    def log(self):
        return (self.dir / "worker.log").read_text(errors="replace")

    def start(self):
        self.mark = uuid.uuid4().hex
        with open(self.dir / "worker.log", "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "minilog.connector.cli", "connect", str(self.properties)],
                env=environment(self.mark), stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)
        wait_until(self._answers, START_TIMEOUT_S, f"the worker at {self.url} to answer "
                   f"(log: {self.dir / 'worker.log'})", interval=0.5)
        return self

    def _answers(self):
        if self.proc.poll() is not None:
            raise AssertionError(f"the worker exited with {self.proc.returncode}:\n{self.log}")
        try:
            return request(self.url, "GET", "/", timeout=5)[0] == 200
        except OSError:
            return False

    def call(self, method, path, body=None, raw=None):
        return request(self.url, method, path, body, raw)


def task_state(worker, name):
    """The state of the connector's task 0, or None while it has none."""
    status, body = worker.call("GET", f"/connectors/{name}/status")
    return body["tasks"][0]["state"] if status == 200 and body["tasks"] else None


def progress(worker, name):
    """The `progress` of the connector's task 0 in its status ({} while it has none)."""
    status, body = worker.call("GET", f"/connectors/{name}/status")
    return body["tasks"][0].get("progress", {}) if status == 200 and body["tasks"] else {}


def append_lines(path, first, count):
    """Lines `first`.. appended to a FileStreamSource's file (non-ASCII and a tab in each, which
    a pipeline must carry as they are); the lines, as the file's reader will see them."""
    lines = [f"line {i}: ünïcödé, tab\there" for i in range(first, first + count)]
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(f"{line}\n" for line in lines))
    return lines


def lines_of(path):
    """A FileStreamSink's file as lines so far ([] before it exists)."""
    try:
        return Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []


def request(url, method, path, body=None, raw=None, timeout=60):
    """(status, decoded JSON body or None) of one HTTP call; `raw` sends bytes as they are."""
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=method,
                                 headers={"Content-Type": "application/json",
                                          "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, text = resp.status, resp.read()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read()
    return status, json.loads(text) if text else None


def curl(url, method, path, body=None, timeout=60):
    """(status, decoded JSON body or None) of one call made with curl, as a Connect user makes
    it from a shell."""
    args = ["curl", "-sS", "--max-time", str(timeout), "-o", "-", "-w", "\n%{http_code}",
            "-X", method, "-H", "Content-Type: application/json", f"{url}{path}"]
    if body is not None:
        args += ["--data", json.dumps(body)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout + 30, check=True)
    text, status = done.stdout.rsplit("\n", 1)
    return int(status), json.loads(text) if text else None
