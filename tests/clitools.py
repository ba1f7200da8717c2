"""`minilog` run as a user runs it, for the command-line tests: a real process, its exit status
and its output."""
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

# The `minilog` command pip installed beside this Python (the module, where it is not there).
_INSTALLED = Path(sys.executable).with_name("minilog")
CLI = [str(_INSTALLED)] if _INSTALLED.exists() else [sys.executable, "-m", "minilog.connector.cli"]
USAGE, FAILED = 2, 1  # exit statuses: a mistake in the command; a refusal by the cluster


def process_identity(pid):
    """(pid, start time) of a running process, None once it is gone or a zombie. A pid alone
    names a process only while it runs: once it ends, the system may give the pid to another
    (pid_max is 32768 here), e.g. a broker another test worker just started in its own session,
    which a killpg of the stale pid would take down."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else (pid, fields[19])  # field 22: start time


def kill_left(identities):
    """SIGKILL the process group of each of `identities` (see process_identity) whose process
    still runs; the pids that did."""
    left = [pid for pid, start in identities if process_identity(pid) == (pid, start)]
    for pid in left:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return left


def run(*args, input=None, timeout=60):
    return subprocess.run([*CLI, *map(str, args)], check=False, input=input, capture_output=True,
                          timeout=timeout)


def ok(*args, **kwargs):
    r = run(*args, **kwargs)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode()


def one_line_error(r, status):
    """The user-error contract: exit `status`, exactly one line on stderr, no traceback."""
    err = r.stderr.decode()
    assert (r.returncode, err.count("\n")) == (status, 1) and "Traceback" not in err, \
        (r.returncode, err)
    return err


class Interruptible:
    """A command in a process group of its own, its output read line by line as it comes: a
    test waits for a line, presses Ctrl-C (SIGINT to the group, as a terminal does) and sees
    what was printed after it. `args` is the command line; stderr merged into stdout with
    `merged=True` (spark-submit prints its Python driver's stderr on stdout anyway)."""

    def __init__(self, args, merged=False, **popen):
        self.proc = subprocess.Popen(
            [str(a) for a in args], stdout=subprocess.PIPE, text=True, start_new_session=True,
            stderr=subprocess.STDOUT if merged else subprocess.PIPE, **popen)
        self.out, self.err, self.pressed = [], [], None
        self._readers = [threading.Thread(target=self._read, args=(s, lines), daemon=True)
                         for s, lines in ((self.proc.stdout, self.out),
                                          (self.proc.stderr, self.err)) if s is not None]
        for r in self._readers:
            r.start()

    def _read(self, stream, lines):
        for line in stream:
            lines.append((time.monotonic(), line.rstrip("\n")))

    def wait_for(self, text, timeout=300.0):
        """The first output line containing `text` (fails if the process ends first)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for _, line in list(self.out) + list(self.err):
                if text in line:
                    return line
            if self.proc.poll() is not None and all(not r.is_alive() for r in self._readers):
                break
            time.sleep(0.1)
        raise AssertionError(f"no line with {text!r}; output: {self.text()[-3000:]}")

    def ctrl_c(self):
        self.pressed = time.monotonic()
        os.killpg(self.proc.pid, signal.SIGINT)

    def terminate(self):
        """SIGTERM to the command's own process only, as `kill PID` or a supervisor sends it
        (what is printed after it: `after_ctrl_c`)."""
        self.pressed = time.monotonic()
        os.kill(self.proc.pid, signal.SIGTERM)

    def finish(self, timeout=180.0):
        """The exit status, once the process ended and its output was read."""
        try:
            code = self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(30)
        for r in self._readers:
            r.join(30)
        return code

    def after_ctrl_c(self, stream="err"):
        """The lines printed on `stream` ("out" or "err") after Ctrl-C."""
        return [line for t, line in getattr(self, stream) if t >= self.pressed]

    def text(self):
        return "\n".join(line for _, line in sorted(self.out + self.err))


def nodes_stopped(text):
    """How many brokers and controllers `minilog cluster down` says it stopped (its console
    has a line of its own)."""
    return len(re.findall(r"^(?:broker|controller) \d+ stopped$", text, re.M))
