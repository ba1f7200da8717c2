"""A command run with its whole process tree bounded: whatever ends the test (the command's own
timeout, pytest-timeout's, a failed assertion, Ctrl-C), nothing it started stays behind.

A benchmark or `minilog cluster up` starts brokers in sessions of their own (so that a terminal's
Ctrl-C reaches the command, which stops them in order): killing the command alone orphans them,
and they ran for an hour after a timed-out test. So the tree is stopped as a user would stop it
first (SIGTERM: the command's `finally` blocks stop their brokers), then every process still in
it is killed with its process group, found by parent links while the command runs (an orphan
has no parent link left to find it by).
"""
import os
import signal
import subprocess
import time

from clitools import process_identity

GRACE_S = 30.0  # for the command's own cleanup after SIGTERM, on a loaded machine


def _children_map() -> dict:
    """{parent pid: [child pid, ...]} of every process, from /proc."""
    children: dict = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()  # noqa: SIM115 - one read
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    return children


def tree(pid: int) -> list:
    """Identities (clitools.process_identity) of `pid` and all its descendants, parents first."""
    children, found, todo = _children_map(), [], [pid]
    while todo:
        p = todo.pop(0)
        identity = process_identity(p)
        if identity is not None:
            found.append(identity)
        todo.extend(children.get(p, []))
    return found


def kill_tree(identities: list) -> list:
    """SIGKILL each process of `identities` still running as itself, with its process group
    where it leads one (never the caller's own group), and wait until they are gone; the pids
    that were still running."""
    own_group = os.getpgrp()
    left = [pid for pid, start in identities if process_identity(pid) == (pid, start)]
    for pid in left:
        try:
            if os.getpgid(pid) == pid and pid != own_group:
                os.killpg(pid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10  # SIGKILL is not instant: gone (or a zombie) on return
    while time.monotonic() < deadline and any(
            process_identity(pid) == (pid, start) for pid, start in identities):
        time.sleep(0.05)
    return left


def _wait_gone(identities: list, seconds: float) -> None:
    """Wait up to `seconds` for `identities` to exit: a broker sent SIGTERM just before its
    parent exited is stopping, not leaked (on a loaded machine that takes seconds)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(
            process_identity(pid) == (pid, start) for pid, start in identities[1:]):
        time.sleep(0.1)


def run_bounded(args, timeout: float, grace: float = GRACE_S,
                **popen) -> subprocess.CompletedProcess:
    """subprocess.run(args, capture_output=True, text=True, timeout=timeout), its process tree
    stopped on every way out: on its timeout (TimeoutExpired, with all the output, is raised
    after that) or any exception in the caller meanwhile (pytest-timeout's), SIGTERM, `grace`
    seconds for the command's own cleanup, then SIGKILL for all of the tree still running.
    The result's `leftover`: pids of its tree that outlived it (killed then), a leak when it
    exited by itself."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, **popen)
    known, out, err, timed_out = [], "", "", False
    deadline = time.monotonic() + timeout
    try:
        while True:  # reading the pipes, and noting the tree each second while it grows
            known += [i for i in tree(proc.pid) if i not in known]
            try:
                out, err = proc.communicate(timeout=min(1.0, max(0.0, deadline -
                                                                 time.monotonic())))
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    timed_out = True
                    break
    finally:
        if proc.poll() is None:
            known += [i for i in tree(proc.pid) if i not in known]
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        else:  # exited by itself: what it stopped may still be finishing its own shutdown
            _wait_gone(known, grace)
        leftover = kill_tree(known)
        if proc.stdout is not None and not proc.stdout.closed:
            out, err = proc.communicate(timeout=30)  # all of it: the pipes kept what came
    if timed_out:
        raise subprocess.TimeoutExpired(args, timeout, output=out, stderr=err)
    result = subprocess.CompletedProcess(args, proc.returncode, out, err)
    result.leftover = [pid for pid in leftover if pid != proc.pid]
    return result


def _cmdline(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(
            errors="replace")
    except OSError:
        return ""


MARKS = ("-m minilog.broker", "-m minilog.connector.cli", "-m bench", "tansu")


def left_by(pid: int, marks=MARKS) -> list:
    """Identities of the trees of `pid`'s children still running whose command line has one
    of `marks`: brokers, consoles and benchmarks a test started and did not stop (not Spark's
    JVM, which lives until the interpreter exits)."""
    found = []
    for child in _children_map().get(pid, []):
        if any(m in _cmdline(child) for m in marks):
            found += tree(child)
    return found
