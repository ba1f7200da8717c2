"""The README as the tests read it: its code blocks, and the two Quick start commands."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def blocks(lang, text=None):
    """The bodies of the README's ```lang fenced blocks, in order."""
    return re.findall(rf"```{lang}\n(.*?)```", README.read_text() if text is None else text,
                      re.DOTALL)


def quick_start_commands():
    """The Quick start's commands as written: [run the demo, run the tests]."""
    section = README.read_text().split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    commands = [block.strip() for block in blocks("bash", section)]
    assert len(commands) == 2, f"the Quick start should show two commands, not {commands}"
    return commands
