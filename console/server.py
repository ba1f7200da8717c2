"""Run the console: bind the listen address first (a port in use is one line, not a traceback
from inside the server), then serve the app with uvicorn on that socket until Ctrl-C."""
from __future__ import annotations

import socket
from typing import Any, TextIO

import uvicorn

from .app import LAG_SAMPLE_INTERVAL_S, create_app

DEFAULT_LISTEN = "127.0.0.1:8080"


class ListenError(OSError):
    """The console cannot listen where it was asked to: the message says why."""


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"--listen expects HOST:PORT, e.g. {DEFAULT_LISTEN}, got {text!r}")
    return host, int(port)


def bind(host: str, port: int) -> socket.socket:
    try:
        sock = socket.create_server((host, port), reuse_port=False)
    except OSError as e:
        raise ListenError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    sock.set_inheritable(True)
    return sock


def serve(config: dict[str, Any], listen: str, out: TextIO,
          sample_interval: float = LAG_SAMPLE_INTERVAL_S) -> None:
    """Serve the console for the cluster `config` reaches, printing its URL first."""
    host, port = parse_listen(listen)
    sock = bind(host, port)
    port = sock.getsockname()[1]
    out.write(f"console at http://{host}:{port}/ (cluster {config['bootstrap.servers']}); "
              f"Ctrl-C stops it\n")
    out.flush()
    app = create_app(config, sample_interval)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    server.run(sockets=[sock])
