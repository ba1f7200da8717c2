"""Another version of minilog's broker, run beside the working tree's: old-vs-new benchmarks.

On a shared machine absolute figures move with the neighbours' load, so a regression shows
only when the old and the new broker are measured in the same sitting, interleaved. A
benchmark takes `--against REV` (any git revision of this repository, or the path of another
checkout); `checked_out(REV)` extracts that revision into a temporary directory (`git archive`:
the repository's worktrees and branches are left alone) and yields the environment under
which `python -m minilog.broker` runs that tree's code with this interpreter and its packages:
a PYTHONPATH whose `minilog/` links each package folder of the tree (setup.py's mapping), found
before the editable install's import hook. The clients stay this tree's. The compiled record
kernel is copied over when its source is the same, else the tree's own is compiled: both sides
run a compiled kernel, each its own.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("broker", "connector", "console", "datasource", "jobs", "connect", "mirror")
# minilog.<name> -> <name>/, as setup.py maps them
KERNEL_SOURCE = Path("connector") / "_records_c.c"


def describe(rev: str) -> str:
    """A short name for `rev`: the commit's abbreviated hash, or the path as given."""
    if Path(rev).is_dir():
        return rev
    out = subprocess.run(["git", "rev-parse", "--short", f"{rev}^{{commit}}"], cwd=ROOT,
                         capture_output=True, text=True, check=False)
    if out.returncode:
        raise ValueError(f"not a git revision of {ROOT} nor a directory: {rev!r}")
    return out.stdout.strip()


def _extract(rev: str, into: Path) -> None:
    archive = subprocess.Popen(["git", "archive", "--format=tar", rev], cwd=ROOT,
                               stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", str(into)], stdin=archive.stdout, check=True)
    archive.stdout.close()
    if archive.wait():
        raise ValueError(f"git archive {rev} failed")


def _copy_kernel(tree: Path) -> bool:
    """Put a compiled record kernel into `tree`: this tree's when both have the same source,
    else the tree's own, compiled here (as its install would). False when neither can be."""
    source = tree / KERNEL_SOURCE
    if not source.exists():
        return False
    if source.read_bytes() == (ROOT / KERNEL_SOURCE).read_bytes():
        for built in (ROOT / "connector").glob("_records_c*.so"):
            shutil.copy2(built, tree / "connector" / built.name)
        return True
    from setuptools import Distribution, Extension
    from setuptools.command.build_ext import build_ext
    cmd = build_ext(Distribution({"ext_modules": [Extension("_records_c", [str(source)])]}))
    cmd.build_lib, cmd.build_temp = str(tree / "connector"), str(tree / "build-kernel")
    try:
        cmd.ensure_finalized()
        cmd.run()
    except Exception as e:  # noqa: BLE001 - no compiler: the pure-Python kernel, said below
        print(f"note: compiling {source}: {e}", file=sys.stderr)
        return False
    return True


@contextlib.contextmanager
def checked_out(rev: str) -> Iterator[dict[str, str]]:
    """The environment for broker processes of `rev` (a revision or a checkout's path)."""
    with tempfile.TemporaryDirectory(prefix="minilog-rev-") as tmp:
        tree = Path(rev).resolve() if Path(rev).is_dir() else Path(tmp) / "tree"
        if not Path(rev).is_dir():
            tree.mkdir()
            _extract(rev, tree)
            if not _copy_kernel(tree):
                print(f"note: {rev}'s record kernel could not be compiled; its brokers run the "
                      "pure-Python kernel", file=sys.stderr)
        shim = Path(tmp) / "path" / "minilog"
        shim.mkdir(parents=True)
        for name in PACKAGES:
            if (tree / name).is_dir():
                (shim / name).symlink_to(tree / name)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(shim.parent)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        yield env


def broker_path(env: dict[str, str]) -> str:
    """Where `python -m minilog.broker` imports the broker from under `env` (a check)."""
    out = subprocess.run([sys.executable, "-c",
                          "import minilog.broker as b; print(list(b.__path__)[0])"],
                         env=env, capture_output=True, text=True, check=True, timeout=60)
    return os.path.realpath(out.stdout.strip())


def sides(against: str | None, stack: contextlib.ExitStack) -> list[tuple[str, dict[str, str] | None]]:
    """[(name, environment of its broker processes)] of the trees a benchmark measures:
    `against`'s first when given (checked out for as long as `stack` lasts), then this tree's."""
    trees: list[tuple[str, dict[str, str] | None]] = [("new", None)]
    if against:
        trees.insert(0, (describe(against), stack.enter_context(checked_out(against))))
    return trees
