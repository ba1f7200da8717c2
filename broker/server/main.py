"""`minilog broker start`: run one broker from a properties file and/or flags."""
import asyncio
import errno
import logging
import signal
import sys

from minilog.connector.cli_parser import Parser

from ..storage.dir_lock import DirectoryLocked
from .config import BrokerConfig, ConfigError, read_properties
from .secure_connection import check_listeners
from .startup import bind_listener


def build_parser(prog="minilog broker"):
    parser = Parser(prog=prog, description="Run a minilog broker.")
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", help="start a broker in the foreground (SIGTERM stops it cleanly)")
    start.add_argument("config", nargs="?", help="a Kafka-style server.properties file")
    start.add_argument("--listen", metavar="HOST:PORT", help="listener address (default 127.0.0.1:9092)")
    start.add_argument("--data-dir", metavar="DIR", help="where partition logs are stored (log.dirs)")
    start.add_argument("--node-id", type=int, help="node.id of this broker")
    start.add_argument("--override", "-o", action="append", default=[], metavar="KEY=VALUE",
                       help="set any broker property, e.g. -o num.partitions=3 (repeatable)")
    start.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    return parser


def config_from_args(args):
    props = read_properties(args.config) if args.config else {}
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--override expects KEY=VALUE, got {item!r}")
        props[key.strip()] = value.strip()
    if args.listen:
        props["listeners"] = f"PLAINTEXT://{args.listen}"
    if args.data_dir:
        props["log.dirs"] = args.data_dir
    if args.node_id is not None:
        props["node.id"] = str(args.node_id)
    return BrokerConfig.from_props(props)


def _os_error(e):
    return f"{e.strerror or e}" + (f": {e.filename}" if e.filename else "")


def _cannot_listen(host, port, error):
    hint = " (is another broker running there?)" if error.errno == errno.EADDRINUSE else ""
    return f"cannot listen on {host}:{port}: {error.strerror or error}{hint}"


def main(argv=None, prog="minilog broker"):
    args = build_parser(prog).parse_args(argv)
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = config_from_args(args)
        check_listeners(config)
    except (ConfigError, ValueError) as e:
        print(f"minilog broker: {e}", file=sys.stderr)
        return 2
    host, port = config.listen_address
    # From the moment the port accepts connections a supervisor may send SIGTERM: note it, and
    # stop cleanly once started (recovery of the logs can take a while) instead of dying mid-way.
    signalled = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: signalled.append(signum))
    try:
        listener = bind_listener(host, port)  # first: a port in use leaves the data untouched
    except OSError as e:
        print(f"minilog broker: {_cannot_listen(host, port, e)}", file=sys.stderr)
        return 1
    try:
        from .broker import Broker
        broker = Broker(config, listener)
    except DirectoryLocked as e:  # another broker runs on the data directory: leave it be
        listener.close()
        print(f"minilog broker: {e}: stop it, or give this broker another data directory",
              file=sys.stderr)
        return 1
    except (ValueError, OSError) as e:  # e.g. a data directory of another cluster, or unwritable
        listener.close()
        print(f"minilog broker: {_os_error(e) if isinstance(e, OSError) else e}", file=sys.stderr)
        return 1 if isinstance(e, OSError) else 2
    try:
        asyncio.run(broker.run_until_signalled(signalled))
    except OSError as e:
        print(f"minilog broker: {_os_error(e)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return broker.exit_code
