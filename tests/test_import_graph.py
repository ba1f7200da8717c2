"""Imports point one way: the command line and the jobs use the client, and nothing below
points back up. Read from the source (every `import`, module level or inside a function),
so a late import hidden in a function counts as much as one at the top."""
import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"connector": "minilog.connector", "broker": "minilog.broker",
            "datasource": "minilog.datasource", "jobs": "minilog.jobs",
            "console": "minilog.console", "connect": "minilog.connect",
            "mirror": "minilog.mirror"}


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


def _type_checking_only(tree):
    """The nodes under `if TYPE_CHECKING:`: names for annotations, imported by the type
    checker only, so no dependency at run time and no circle (a shard naming its coordinator's
    type, which constructs it)."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for child in node.body for n in ast.walk(child)}
    return skipped


def import_graph():
    """{module: set of project modules it imports at run time}."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        tree = ast.parse(path.read_text(), str(path))
        typing_only = _type_checking_only(tree)
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
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


# -- the broker's packages --------------------------------------------------------------------
# Kafka's parts, lowest first: a package imports only packages listed before it, except the
# entries of ALLOWED_UPWARD (each with its reason). The docs show this table (`package_table`).
BROKER_PACKAGES = ["config", "storage", "raft", "metadata", "replication", "coordinator",
                   "coordinator/group",
                   "coordinator/transaction", "security", "server", "server/handlers"]
BROKER_PACKAGE_ROLES = {
    "config": "the broker's settings as Kafka names them: keys, types, defaults, listeners",
    "storage": "the log: segments, indexes, loading, cleaning, producer state, checkpoints",
    "raft": "the Raft quorum of `__cluster_metadata` and its log",
    "metadata": "the metadata image and records, their stores, the controller",
    "replication": "partitions, the replica manager, fetchers, the ISR",
    "coordinator": "the coordinator runtime whose shards the coordinators are: replay, writes, "
                   "elections, the internal topics' partitioning",
    "coordinator/group": "classic and KIP-848 groups, `__consumer_offsets`",
    "coordinator/transaction": "transactions, `__transaction_state`, markers",
    "security": "SASL, SCRAM, TLS contexts, ACLs, the authorizer",
    "server": "the broker process: its configuration, socket server, listeners served, metrics",
    "server/handlers": "one function per API, registered by key (the handler registry)",
}
HANDLER_REGISTRY = "minilog.broker.server.handlers"
ALLOWED_UPWARD = {
    ("server", "server/handlers"): "the socket server dispatches to the handler registry, whose "
                                   "handlers use the server's config and controller router",
}
# Modules outside broker/ that may import it: the CLI's `minilog broker start`, and the
# local cluster's use of the data-directory lock.
ENTRY_POINTS = {("minilog.connector.cli", "minilog.broker.server.main"),
                ("minilog.connector.cli_cluster", "minilog.broker.storage.dir_lock")}


def broker_package(module):
    """`broker/<package>` of a broker module (`coordinator/group`, `server/handlers`), else None."""
    parts = module.split(".")
    if parts[:2] != ["minilog", "broker"] or len(parts) < 3:
        return None
    for depth in (2, 1):
        candidate = "/".join(parts[2:2 + depth])
        if candidate in BROKER_PACKAGES and (len(parts) > 2 + depth
                                             or (ROOT / "broker" / candidate).is_dir()):
            return candidate
    return None


def package_dependencies(graph=None):
    """{broker package: the broker packages it imports}."""
    graph = graph or import_graph()
    deps = {p: set() for p in BROKER_PACKAGES}
    for module, targets in graph.items():
        source = broker_package(module)
        for target in targets:
            to = broker_package(target)
            if source and to and to != source:
                deps[source].add(to)
    return deps


def package_table():
    """The Markdown table README's Layout and docs/ARCHITECTURE.md show, from the imports."""
    deps = package_dependencies()
    rows = ["| package | what it holds | imports |", "|---|---|---|"]
    for package in BROKER_PACKAGES:
        names = ", ".join(f"`{d}`" for d in BROKER_PACKAGES if d in deps[package]) or "nothing"
        rows.append(f"| `broker/{package}/` | {BROKER_PACKAGE_ROLES[package]} | {names} |")
    return "\n".join(rows)


def upward_list():
    """The imports against the order, each with its reason, as docs/ARCHITECTURE.md lists them."""
    return "\n".join(f"- `{source}` -> `{target}`: {reason}"
                     for (source, target), reason in ALLOWED_UPWARD.items())


def generated_block(doc, name):
    """The text between `<!-- NAME -->` and `<!-- /NAME -->` in a doc."""
    found = re.search(rf"<!-- {name} -->\n(.*?)\n<!-- /{name} -->", doc.read_text(), re.DOTALL)
    assert found, f"{doc.name} has no <!-- {name} --> block"
    return found.group(1)


def test_the_docs_show_the_packages_and_their_imports_as_the_code_has_them():
    """README's Layout and docs/ARCHITECTURE.md show `package_table()`; on failure, paste the
    expected text printed here."""
    table = package_table()
    for doc in (ROOT / "README.md", ROOT / "docs" / "ARCHITECTURE.md"):
        assert generated_block(doc, "broker-packages") == table, f"{doc.name}:\n{table}"
    assert generated_block(ROOT / "docs" / "ARCHITECTURE.md", "broker-upward") == upward_list()


def test_every_broker_package_is_in_the_table():
    found = {str(p.parent.relative_to(ROOT / "broker")) for p in (ROOT / "broker").rglob("__init__.py")
             if p.parent != ROOT / "broker"}
    assert found == set(BROKER_PACKAGES)
    assert not [p.name for p in (ROOT / "broker").glob("*.py")
                if p.name not in ("__init__.py", "__main__.py")], "a module outside the packages"


def test_broker_packages_import_only_those_below_them():
    deps = package_dependencies()
    upward = sorted((source, target) for source, targets in deps.items() for target in targets
                    if BROKER_PACKAGES.index(target) > BROKER_PACKAGES.index(source)
                    and (source, target) not in ALLOWED_UPWARD)
    assert upward == []
    gone = sorted(set(ALLOWED_UPWARD) - {(s, t) for s, targets in deps.items() for t in targets})
    assert gone == [], "no longer imported: take these out of ALLOWED_UPWARD (and the docs)"


def test_every_listed_exception_goes_against_the_order():
    """An entry of ALLOWED_UPWARD names an import from a package to one listed after it;
    an import downward needs no reason, and listing one would tell the docs' reader that the
    order is broken where it is not."""
    downward = sorted((s, t) for s, t in ALLOWED_UPWARD
                      if BROKER_PACKAGES.index(t) <= BROKER_PACKAGES.index(s))
    assert downward == []


def test_the_broker_imports_nothing_by_name():
    """An `importlib.import_module` of a project module is an import this graph cannot see
    (the Raft node once reached the metadata records that way, upward and unlisted)."""
    found = [str(path.relative_to(ROOT)) for name, path in _modules().items()
             if name.startswith("minilog.broker") and "import_module(" in path.read_text()]
    assert found == []


def test_storage_imports_no_other_part_of_the_broker():
    """The log knows nothing of replication, metadata or coordinators: they pass in what they
    decide (the high watermark, the leader epoch)."""
    assert package_dependencies()["storage"] == set()


def test_only_the_server_imports_the_handlers():
    deps = package_dependencies()
    assert {p for p, targets in deps.items() if "server/handlers" in targets} <= {"server"}


def test_outside_broker_only_the_entry_points_import_it():
    graph = import_graph()
    found = {(m, t) for m, targets in graph.items() if not m.startswith("minilog.broker")
             for t in targets if t.startswith("minilog.broker")}
    assert found <= ENTRY_POINTS


def test_the_broker_is_in_no_import_circle_but_the_handler_registrys():
    """The registry's package imports every handler module and each handler imports the
    registry's decorator from it: that circle is the registry's design. No other may return
    (broker.py -> metrics.py -> broker.py was one)."""
    graph = {m: {t for t in targets if t.startswith("minilog.broker") and t != HANDLER_REGISTRY}
             for m, targets in import_graph().items()
             if m.startswith("minilog.broker") and m != HANDLER_REGISTRY}
    assert cycles_through(graph, set(graph)) == []
