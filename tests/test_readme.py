"""The README's Python examples run as written against a real broker."""
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_python_example_runs(broker, index):
    code = BLOCKS[index].replace("127.0.0.1:9092", broker.bootstrap)
    exec(compile(code, f"README.md python block {index}", "exec"), {})  # noqa: S102 - the README's own code


def test_readme_has_the_two_quick_start_commands():
    text = README.read_text()
    assert "pip install -e . && minilog demo" in text
    assert "pip install -e '.[test]' && python -m pytest" in text
    ci = (README.parent / ".ci" / "run").read_text()
    assert "pip install -e '.[test]' && python -m pytest" in ci
