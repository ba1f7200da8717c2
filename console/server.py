"""Run the console: decide its policy (login, allowed Host names, read-only), refuse an open
console beyond loopback, bind the listen address first (a port in use is one line, not a
traceback from inside the server), then serve the app with uvicorn on that socket until Ctrl-C.

Users log in whenever the cluster is secured with SASL (`security.protocol` SASL_PLAINTEXT or
SASL_SSL): the console then acts as each user, and credentials in its own settings serve no
page. `--no-login` serves every visitor with the console's own settings instead, which, like
any console without a login, listens only on a loopback address unless
`--allow-remote-without-login` says otherwise.
"""
from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any, TextIO

import uvicorn

from .app import LAG_SAMPLE_INTERVAL_S, create_app
from .guard import Policy, default_hosts, host_name, is_loopback
from .login import mechanisms

DEFAULT_LISTEN = "127.0.0.1:8080"
_SECRETS = ("sasl.username", "sasl.password", "sasl.jaas.config")


class ListenError(OSError):
    """The console cannot listen where it was asked to: the message says why."""


@dataclass(frozen=True)
class Options:
    allow_hosts: tuple[str, ...] = ()  # beside the listen address's names
    read_only: bool = False
    no_login: bool = False
    allow_remote_without_login: bool = False
    connect_urls: tuple[str, ...] = ()  # Kafka Connect workers' REST URLs, for /connect


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"--listen expects HOST:PORT, e.g. {DEFAULT_LISTEN}, got {text!r}")
    return host.strip("[]"), int(port)


def policy_for(config: dict[str, Any], host: str, options: Options) -> Policy:
    """The console's policy; ValueError (one line) for an open console beyond loopback."""
    sasl = str(config.get("security.protocol", "")).upper().startswith("SASL_")
    login = sasl and not options.no_login
    if not login and not is_loopback(host) and not options.allow_remote_without_login:
        why = "--no-login" if sasl else "the cluster is not secured with SASL"
        raise ValueError(f"refusing to listen on {host} without a login ({why}): anyone who "
                         f"reaches it would act with the console's own client settings; "
                         f"listen on 127.0.0.1, or pass --allow-remote-without-login")
    hosts = default_hosts(host) | {host_name(h) for h in options.allow_hosts}
    return Policy(login, mechanisms(config), frozenset(hosts), options.read_only)


def bind(host: str, port: int) -> socket.socket:
    try:
        sock = socket.create_server((host, port), reuse_port=False,
                                    family=socket.AF_INET6 if ":" in host else socket.AF_INET)
    except OSError as e:
        raise ListenError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    sock.set_inheritable(True)
    return sock


def serve(config: dict[str, Any], listen: str, out: TextIO,
          sample_interval: float = LAG_SAMPLE_INTERVAL_S, options: Options = Options()) -> None:
    """Serve the console for the cluster `config` reaches, printing its URL first."""
    host, port = parse_listen(listen)
    policy = policy_for(config, host, options)
    if policy.login:  # users log in: the console's own credentials serve nobody
        config = {k: v for k, v in config.items() if k not in _SECRETS}
    sock = bind(host, port)
    port = sock.getsockname()[1]
    how = (f"users log in with the cluster's SASL users ({', '.join(policy.mechanisms)})"
           if policy.login else "no login")
    out.write(f"console at http://{host}:{port}/ (cluster {config['bootstrap.servers']}; "
              f"{how}{'; read-only' if policy.read_only else ''}); Ctrl-C stops it\n")
    out.flush()
    app = create_app(config, policy, sample_interval, options.connect_urls)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    server.run(sockets=[sock])
