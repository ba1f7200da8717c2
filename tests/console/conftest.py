"""Fixtures of the console's tests: `minilog console` as a user starts it, in its own process
(and session) on a free port, killed by its pid at teardown whatever the test did; headless
Chromium."""
import os
import signal
import subprocess

import pytest
from brokers import free_port, wait_for_port
from consoletools import ConsoleProcess, console_argv, headless_chromium


@pytest.fixture
def start_console(tmp_path):
    """start_console(bootstrap, *console_args, options=(global flags)) -> ConsoleProcess,
    listening on 127.0.0.1."""
    started = []

    def start(bootstrap, *args, options=()):
        port = free_port()
        log = tmp_path / f"console-{len(started)}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                console_argv(bootstrap, "--listen", f"127.0.0.1:{port}", *args, options=options),
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
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


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium through selenium, one per test module."""
    driver = headless_chromium()
    yield driver
    driver.quit()
