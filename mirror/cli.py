"""`minilog mirror mm2.properties`'s command line: one argument, one readable line for a bad
file (exit 2), Ctrl-C and SIGTERM as the jobs take them (130, 143)."""
from __future__ import annotations

import argparse
import sys

from minilog.connector.client import ConfigError, KafkaError
from minilog.connector.properties import PropertiesError

from .config import MirrorConfigError


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="minilog mirror", allow_abbrev=False,
        description="MirrorMaker 2 on Spark: copy topics and translate consumer groups' "
                    "offsets between clusters, exactly once, from MM2's properties file")
    p.add_argument("properties", metavar="mm2.properties", nargs="?",
                   help="MirrorMaker 2's settings: clusters = A, B; A.bootstrap.servers; "
                        "A->B.enabled = true; A->B.topics; ...")
    p.add_argument("--clusters", nargs="+", metavar="CLUSTER",
                   help="the target clusters this process serves (MirrorMaker's --clusters): "
                        "only the flows into them run; all enabled flows without it")
    return p


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The arguments in either order: `--clusters B mm2.properties` as well as
    `mm2.properties --clusters B` (`--clusters` takes every word after it, the file too)."""
    p = parser()
    args = p.parse_args(argv)
    if args.properties is None and args.clusters and len(args.clusters) > 1:
        args.properties = args.clusters.pop()
    if args.properties is None:
        p.error("the following arguments are required: mm2.properties")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    from pyspark.errors import StreamingQueryException

    from .main import run  # pyspark only once the arguments are read
    try:
        return run(args.properties, sys.stdout, args.clusters)
    except StreamingQueryException as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"minilog mirror: a flow's query failed: {first}", file=sys.stderr)
        return 1
    except (MirrorConfigError, PropertiesError, ConfigError) as e:
        print(f"minilog mirror: {e}", file=sys.stderr)
        return 2
    except KafkaError as e:
        print(f"minilog mirror: {e}", file=sys.stderr)
        return 1
