"""`minilog console`: its options, checked, and the console served (minilog.console) until
Ctrl-C. `cli.py` builds the parser and reports errors."""
from collections.abc import Callable
from typing import TextIO


def add_parser(sub, common) -> None:
    p = sub.add_parser("console", parents=[common],
                       help="the web console: brokers, topics, groups and lag, records")
    p.add_argument("--listen", default="127.0.0.1:8080", metavar="HOST:PORT",
                   help="where the console serves its pages (default 127.0.0.1:8080)")
    p.add_argument("--lag-interval", type=float, default=5.0, metavar="SECONDS",
                   help="how often each group's lag is sampled for its history (default 5)")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="a Host name the console answers to beside its listen address "
                        "(repeatable; others are refused, against DNS rebinding)")
    p.add_argument("--read-only", action="store_true",
                   help="show everything, change nothing (no topic creation, deletion, configs)")
    p.add_argument("--no-login", action="store_true",
                   help="on a SASL cluster, serve every visitor with the --command-config "
                        "user instead of asking each to log in")
    p.add_argument("--allow-remote-without-login", action="store_true",
                   help="listen beyond loopback although nobody logs in")
    p.add_argument("--connect", action="append", default=[], metavar="URL",
                   help="a Kafka Connect worker's REST URL (minilog connect's `listeners`), "
                        "whose connectors the Connect page shows (repeatable)")


def run(args, out: TextIO, conf: dict, error: Callable[[str], Exception]) -> None:
    """Serve the console for the cluster `conf` reaches; `error(message)` is what a bad
    option raises (one line at the CLI)."""
    from minilog.console.server import Options, serve
    if args.lag_interval <= 0:
        raise error("--lag-interval must be positive")
    for url in args.connect:
        if not url.startswith(("http://", "https://")):
            raise error(f"--connect expects a worker's REST URL, e.g. http://127.0.0.1:8083, "
                        f"got {url!r}")
    options = Options(tuple(args.allow_host), args.read_only, args.no_login,
                      args.allow_remote_without_login, tuple(args.connect))
    try:
        serve(conf, args.listen, out, args.lag_interval, options)
    except ValueError as e:
        raise error(str(e)) from None
