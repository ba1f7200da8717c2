"""A real Prometheus (Debian's `prometheus` package) on 127.0.0.1 for tests: a generated config
scraping the given targets every second, queried through its HTTP API; and `scrape`, one read
of a broker's /metrics."""
import json
import shutil
import subprocess
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

from brokers import free_port
from clustertools import wait_for
from prometheus_client.parser import text_string_to_metric_families

BINARY = shutil.which("prometheus")
SKIP_REASON = "Prometheus is not installed (apt-get install prometheus; CI installs it)"


def scrape(broker):
    """{(name, frozenset(labels)): value} of every sample `broker` (with a `metrics_port`)
    serves at /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics",
                                timeout=10) as r:
        text = r.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


class Prometheus:
    """`targets`: host:port of /metrics endpoints, scraped as job `minilog`."""

    def __init__(self, targets):
        self._tmp = tempfile.TemporaryDirectory(prefix="minilog-prometheus-")
        self.dir = Path(self._tmp.name)
        self.port = free_port()
        self.targets = list(targets)
        self.proc = None

    @property
    def log_path(self):
        return self.dir / "prometheus.log"

    def start(self):
        config = self.dir / "prometheus.yml"
        config.write_text(json.dumps({  # YAML is a superset of JSON
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s",
                       "evaluation_interval": "1s"},
            "scrape_configs": [{"job_name": "minilog", "static_configs": [
                {"targets": self.targets}]}]}))
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [BINARY, f"--config.file={config}", f"--storage.tsdb.path={self.dir / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}",
                 "--storage.tsdb.retention.time=1h", "--query.lookback-delta=5s"],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(lambda: self._ready(), f"Prometheus to be ready (see {self.log_path})", 60)
        return self

    def _ready(self):
        if self.proc.poll() is not None:
            raise AssertionError(f"Prometheus exited: {self.log_path.read_text()[-2000:]}")
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
            return r.status == 200

    def query(self, promql):
        """{frozenset(labels.items()): value} of an instant query's vector result."""
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode(
            {"query": promql})
        with urllib.request.urlopen(url, timeout=10) as r:
            answer = json.load(r)
        assert answer["status"] == "success", answer
        return {frozenset(s["metric"].items()): float(s["value"][1])
                for s in answer["data"]["result"]}

    def value(self, promql):
        """The single value of a query that aggregates to one series, None if it has none."""
        result = self.query(promql)
        assert len(result) <= 1, result
        return next(iter(result.values()), None)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._tmp.cleanup()
