"""The type checker over the packages where state lives (mypy.ini names them, strict).

minilog's folders install as `minilog.*` through setup.py's package map, which mypy cannot
follow from a checkout: the test builds a `minilog/` of links to the folders in a temporary
directory and points MYPYPATH at it. mypy's cache goes there too, so a run never reads a
cache another tree (or another version of this one) wrote.
"""
import configparser
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "mypy.ini"
FOLDERS = ["connector", "broker", "datasource", "jobs", "console", "connect"]


def configured(option):
    """The dotted names mypy.ini lists under `option` (packages, modules) for mypy to check."""
    config = configparser.ConfigParser()
    config.read(CONFIG)
    return [p.strip() for p in config["mypy"].get(option, "").split(",") if p.strip()]


def files_of(name, package):
    """The .py files of package or module `minilog.x.y` in this checkout."""
    path = ROOT.joinpath(*name.split(".")[1:])
    return sorted(path.rglob("*.py")) if package else [path.with_suffix(".py")]


def run_mypy(tmp_path):
    links = tmp_path / "minilog"
    links.mkdir()
    for folder in FOLDERS:
        (links / folder).symlink_to(ROOT / folder, target_is_directory=True)
    env = {**os.environ, "MYPYPATH": str(tmp_path)}
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(CONFIG),
         "--cache-dir", str(tmp_path / "cache"), "--show-error-codes"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_the_typed_packages_pass_mypy_strict(tmp_path):
    packages, modules = configured("packages"), configured("modules")
    assert packages, "mypy.ini checks no package"
    result = run_mypy(tmp_path)
    output = (result.stdout + result.stderr).replace(str(tmp_path / "minilog") + os.sep, "")
    assert result.returncode == 0, f"mypy found errors:\n{output}"
    # A config that checks nothing passes too: every file of the packages must have been read.
    checked = re.search(r"(?:checked|found in) (\d+) source files?", output)
    expected = len({f for name in packages for f in files_of(name, True)}
                   | {f for name in modules for f in files_of(name, False)})
    assert checked and int(checked.group(1)) >= expected, output
