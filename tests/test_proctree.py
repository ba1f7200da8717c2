"""The suite's bounded commands (tests/proctree.py) leave nothing behind when they time out:
a command that started a broker in a session of its own, as the benchmarks do, is stopped with
its broker, whether it cleans up on SIGTERM or ignores it."""
import subprocess
import sys

import pytest
from clitools import process_identity
from proctree import run_bounded

# Starts a broker the way the benchmarks do (its own session), says so, then hangs.
HANGS = """
import signal, sys, time
from minilog.connector.local_cluster import BrokerProcess
if sys.argv[1] == "ignore-sigterm":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
b = BrokerProcess(sys.argv[2]).start()
print(b.proc.pid, flush=True)
time.sleep(3600)
"""


@pytest.mark.parametrize("on_sigterm", ["default", "ignore-sigterm"])
def test_a_timed_out_command_is_stopped_with_the_broker_it_started(tmp_path, on_sigterm):
    with pytest.raises(subprocess.TimeoutExpired) as timed_out:
        run_bounded([sys.executable, "-c", HANGS, on_sigterm, str(tmp_path)], timeout=20,
                    grace=2)
    broker_pid = int(timed_out.value.stdout.split()[0]) if timed_out.value.stdout else None
    assert broker_pid is not None, timed_out.value.stderr
    assert process_identity(broker_pid) is None, f"broker {broker_pid} left running"
