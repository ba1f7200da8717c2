"""With flush.messages=1, a rolled segment's directory entry is fsynced before the append
that created it returns (Kafka's LocalLog.flush), so a power loss cannot take an acknowledged
segment away. Watched with strace: the fsync calls themselves, not a stand-in."""
import re
import shutil
import subprocess
import sys

import pytest

_SCRIPT = """
import os, sys
from minilog.broker.storage.log import Log, LogConfig
from minilog.connector.batch import split_batches
from minilog.connector.records import encode_batch

lg = Log(sys.argv[1], LogConfig(segment_bytes=1024, flush_messages=1))
for i in range(40):
    data = encode_batch([(1000 + i, None, b"v" * 200, [])])
    (_, h), = split_batches(data)
    lg.append([(data, h)])
    os.write(1, b"appended\\n")  # a marker in the trace: this append has returned
os._exit(0)  # no close(): it would fsync everything anyway
"""


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_a_new_segment_is_durable_by_name_when_its_append_returns(tmp_path):
    part = tmp_path / "t-0"
    proc = subprocess.Popen(["strace", "-ff", "-o", str(tmp_path / "trace"),
                             "-e", "trace=openat,fsync,write,close",
                             sys.executable, "-c", _SCRIPT, str(part)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert proc.wait(120) == 0
    # One trace file per thread; the main thread (appends, flushes, markers) has the lowest id.
    main = min(tmp_path.glob("trace.*"), key=lambda p: int(p.suffix[1:]))
    dir_fds, pending, segments = set(), None, 0
    for call in main.read_text().splitlines():
        opened = re.match(r'openat\(AT_FDCWD, "([^"]+)", ([^,)]+).*= (\d+)$', call)
        if opened and opened[1] == str(part) and "O_CREAT" not in opened[2]:
            dir_fds.add(opened[3])
        elif opened and opened[1].endswith(".log") and "O_CREAT" in opened[2]:
            pending, segments = opened[1], segments + 1
        elif (m := re.match(r"fsync\((\d+)", call)) and m[1] in dir_fds:
            pending = None
        elif (m := re.match(r"close\((\d+)", call)):
            dir_fds.discard(m[1])
        elif call.startswith("write(1, \"appended"):
            assert pending is None, f"an append returned before {pending}'s name was fsynced"
    assert segments > 3  # the log rolled several times
