"""The README's Quick start on a fresh machine: a brand-new virtualenv, a clean copy of the repo.

The virtualenv has no system site packages, so whatever the commands need must come from
`setup.py`. The commands are read from README.md, not copied here: change the README and this
runs the new text. pip's cache saves the downloads, yet pip's two installs are still over half
the time: pip byte-compiles all it installs (pyspark, pandas, pyarrow: 3,700 .py files, ~20 s of
CPU), so it is told not to (PIP_COMPILE=0; PIP_NO_COMPILE=1 would mean --compile to pip). The
commands still run as written; what they import compiles when imported. Run it alone with
`python -m pytest -m fresh_install`.
"""
import os
import shutil
import subprocess
import sys

import pytest
from readme import ROOT, quick_start_commands

pytestmark = [pytest.mark.fresh_install, pytest.mark.timeout(1200)]

# What the demo prints once its replayed balances check out (jobs/bank_demo.py).
VERIFIED = "balances verified"


def clean_copy(dest):
    """The repository's files as a clone would have them (plus uncommitted, not ignored, edits)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, check=True, capture_output=True).stdout
    dest.mkdir()
    for name in filter(None, listed.decode().split("\0")):
        source = ROOT / name
        if source.is_file():  # listed but deleted in the work tree: a clone would not have it
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def fresh_venv(path):
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP") and not k.startswith("PYSPARK_")}
    env["VIRTUAL_ENV"] = str(path)  # what `source bin/activate` does
    env["PIP_COMPILE"] = "0"  # pip's --no-compile: see the module's docstring
    env["PATH"] = f"{path / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def run(command, cwd, env, timeout=900):
    r = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, check=False,
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"`{command}` exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


@pytest.fixture
def repo(tmp_path):
    return clean_copy(tmp_path / "minilog")


def test_the_quick_start_commands_run_in_order_in_one_fresh_virtualenv(repo, tmp_path):
    """As a reader follows the Quick start: the first command runs the demo and installs the
    runtime's imports, then the second, in the same virtualenv, installs what the tests import
    (its extras only add to the first's requirements, so alone it installs them too)."""
    first, second = quick_start_commands()[:2]
    env = fresh_venv(tmp_path / "venv")
    out = run(first, repo, env)
    assert VERIFIED in out, out[-3000:]
    assert "runtime imports ok" in run("python tests/runtime_probe.py", repo, env)
    install = second.split("&&")[0].strip()
    assert install.startswith("pip install"), install
    run(install, repo, env)
    out = run("python -m pytest --collect-only -q", repo, env)  # imports every test module
    assert "tests collected" in out, out[-2000:]
