"""The README's Python examples run as written against a real broker."""
import pytest
from readme import ROOT, blocks, quick_start_commands

BLOCKS = blocks("python")


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_python_example_runs(broker, index):
    code = BLOCKS[index].replace("127.0.0.1:9092", broker.bootstrap)
    exec(compile(code, f"README.md python block {index}", "exec"), {})  # noqa: S102 - the README's own code


def test_ci_runs_the_readme_test_command():
    # the first command is run for real by tests/test_fresh_install.py
    assert quick_start_commands()[1] in (ROOT / ".ci" / "run").read_text()
