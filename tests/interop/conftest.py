"""kafkajs, installed once into a cache folder for the interop tests that run it.

Two test modules use it, and pytest-xdist may start both at once on a fresh clone: the install
holds a file lock, so the second waits for the first instead of running npm into the same
folder (npm exits 217 and the other finds a half-written module)."""
import fcntl
import shutil
import subprocess
from pathlib import Path

import pytest

NODE_DIR = Path(__file__).parent / ".node"


@pytest.fixture(scope="module")
def kafkajs():
    if not shutil.which("node") or not shutil.which("npm"):
        pytest.skip("Node.js is not installed")
    NODE_DIR.mkdir(exist_ok=True)
    with open(NODE_DIR / "install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (NODE_DIR / "node_modules" / "kafkajs" / "package.json").is_file():
            subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent", "--prefix",
                            str(NODE_DIR), "kafkajs@2.2.4"], check=True, timeout=180)
    return NODE_DIR / "node_modules"
