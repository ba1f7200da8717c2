"""Imports point one way: the command line and the jobs use the client, and nothing below
points back up. Read from the source (every `import`, module level or inside a function),
so a late import hidden in a function counts as much as one at the top."""
import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"connector": "minilog.connector", "broker": "minilog.broker",
            "datasource": "minilog.datasource", "jobs": "minilog.jobs",
            "console": "minilog.console", "connect": "minilog.connect"}


def _modules():
    """{dotted module name: its file} for every module minilog installs."""
    found = {}
    for folder, package in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package, *parts))] = path
    return found


def import_graph():
    """{module: set of project modules it imports}."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                named = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                named = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            targets |= {n for n in named if n in modules and n != name}
        graph[name] = targets
    return graph


def cycles_through(graph, members):
    """Every import path that leaves one of `members` and comes back to it."""
    found = []
    for start in sorted(members):
        stack = [(start, [start])]
        seen = set()
        while stack:
            node, path = stack.pop()
            for nxt in graph.get(node, ()):
                if nxt == start:
                    found.append(" -> ".join(path + [start]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, path + [nxt]))
    return found


def test_the_graph_reads_the_imports_it_should():
    """The reader itself: the CLI's dispatch to the demo, inside a function, is an edge."""
    graph = import_graph()
    assert "minilog.jobs.bank_demo" in graph["minilog.connector.cli"]
    assert "minilog.connector.client" in graph["minilog.jobs.bank_demo"]


def test_the_command_line_and_the_jobs_are_in_no_import_circle():
    graph = import_graph()
    members = {m for m in graph if re.fullmatch(r"minilog\.connector\.cli(_\w+)?", m)
               or m.startswith("minilog.jobs")}  # the CLI's modules, not the client package
    assert cycles_through(graph, members) == []
