"""Imports inside `datasource/` point one way: no module imports, even lazily inside a
function, a module that imports it back (directly or through others)."""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "datasource"


def sibling_imports(path: Path) -> set[str]:
    """The modules of the package that `path` imports, wherever in the file the import is."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                out.add(node.module.split(".")[0])
            else:
                out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "minilog.datasource."):
            out.add(node.module.split(".")[2])
    return out


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of `graph`, as the modules around it, or None."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return path[path.index(module):] + [module]
        if module in done:
            return None
        for dep in sorted(graph.get(module, ())):
            found = visit(dep, path + [module])
            if found:
                return found
        done.add(module)
        return None

    for module in sorted(graph):
        found = visit(module, [])
        if found:
            return found
    return None


def test_datasource_modules_import_each_other_one_way():
    graph = {p.stem: sibling_imports(p) for p in PACKAGE.glob("*.py")}
    assert "options" in graph and "values" in graph["options"]
    assert cycle(graph) is None, " -> ".join(cycle(graph))


def test_the_cycle_check_finds_a_cycle():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) is not None
