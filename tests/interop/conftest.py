"""kafkajs, installed once into a cache folder for the interop tests that run it."""
import shutil
import subprocess
from pathlib import Path

import pytest

NODE_DIR = Path(__file__).parent / ".node"


@pytest.fixture(scope="module")
def kafkajs():
    if not shutil.which("node") or not shutil.which("npm"):
        pytest.skip("Node.js is not installed")
    if not (NODE_DIR / "node_modules" / "kafkajs").is_dir():
        NODE_DIR.mkdir(exist_ok=True)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent", "--prefix",
                        str(NODE_DIR), "kafkajs@2.2.4"], check=True, timeout=180)
    return NODE_DIR / "node_modules"
