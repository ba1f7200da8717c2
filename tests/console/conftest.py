"""Consoles for the console's tests: `minilog console` as a user starts it, in its own process
(and session) on a free port, killed by its pid at teardown whatever the test did."""
import os
import signal
import subprocess
import sys
from dataclasses import dataclass

import pytest
from brokers import free_port, wait_for_port


@dataclass
class ConsoleProcess:
    proc: subprocess.Popen
    port: int
    log: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def open_fds(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))


def console_argv(bootstrap, *args, options=()):
    """`minilog -b BOOTSTRAP [OPTIONS...] console ARGS...`."""
    return [sys.executable, "-m", "minilog.connector.cli", "-b", bootstrap, *options,
            "console", *args]


@pytest.fixture
def start_console(tmp_path):
    """start_console(bootstrap, *console_args, options=(global flags)) -> ConsoleProcess,
    listening on 127.0.0.1 unless `--listen` is among the args."""
    started = []

    def start(bootstrap, *args, options=()):
        port = free_port()
        if "--listen" not in args:
            args = ("--listen", f"127.0.0.1:{port}", *args)
        log = tmp_path / f"console-{len(started)}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(console_argv(bootstrap, *args, options=options), stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        started.append(proc)
        try:
            wait_for_port(port, 60, proc)
        except RuntimeError:
            raise AssertionError(f"the console exited: {log.read_text()}") from None
        return ConsoleProcess(proc, port, str(log))
    yield start
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
