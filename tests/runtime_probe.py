"""Run by a fresh install's Python: does `pip install .` alone bring what minilog imports?

Imports every shipped module, checks that each third-party module they import belongs to a
distribution minilog itself requires (not one that only happens to come along, as numpy comes
with pandas), and that the Spark stack the connector and the demo run on is complete. Prints
"runtime imports ok", or raises.
"""
import ast
import importlib
import pkgutil
import re
import sys
from importlib.metadata import packages_distributions, requires

import minilog.broker
import minilog.connector
import minilog.datasource
import minilog.jobs

PACKAGES = (minilog.broker, minilog.connector, minilog.datasource, minilog.jobs)


def shipped_modules():
    for package in PACKAGES:
        yield package
        for found in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not found.name.endswith(".__main__"):
                yield importlib.import_module(found.name)


def third_party_imports(module):
    tree = ast.parse(open(module.__file__, "rb").read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top not in sys.stdlib_module_names and top != "minilog":
                yield top


def normal(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def main():
    declared = {normal(re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0])
                for r in requires("minilog") or () if "extra ==" not in r}
    owners = packages_distributions()
    for module in shipped_modules():
        if not module.__file__.endswith(".py"):
            continue
        for top in third_party_imports(module):
            dists = {normal(d) for d in owners.get(top, [top])}
            assert dists & declared, f"{module.__name__} imports {top}, which setup.py does not require"
    from minilog.connector import compression
    assert compression.available() == ["none", "gzip", "snappy", "lz4", "zstd"], compression.available()
    import pyspark.sql.datasource  # noqa: F401
    import pyspark_minilog  # noqa: F401 - how pyspark finds format("minilog") by name
    from pyspark.sql.pandas.utils import require_minimum_pandas_version, require_minimum_pyarrow_version
    require_minimum_pandas_version()
    require_minimum_pyarrow_version()
    print("runtime imports ok")


if __name__ == "__main__":
    main()
