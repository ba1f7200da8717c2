"""`minilog certs create`: a local certificate authority and a broker's TLS certificate, as PEM.

A TLS listener needs `ssl.keystore.location`, one PEM file with the broker's private key and
its certificate chain, and clients need the CA certificate that signed it (`ssl.ca.location`;
brokers too, as `ssl.truststore.location`, for mutual TLS). This makes both with `trustme`, as
`minilog cluster up --secure` does for its own cluster:

    minilog certs create --dir D --hosts broker1.example.com,10.0.0.5 [--name broker]

writes D/ca.pem (the CA certificate), D/ca-key.pem (its key, kept to sign more certificates:
run again with another --name and --hosts for the next broker) and D/NAME.pem (key and chain
for the hosts, readable by its owner only), and prints the settings that use them. A local
CA for development and tests: a production cluster takes its certificates from its own CA.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TextIO

from minilog.connector.cli_parser import Parser


class CertsError(Exception):
    """What stops the files from being made, in one line."""


def create(directory: Path, hosts: list[str], name: str = "broker") -> tuple[Path, Path]:
    """(CA certificate, key-and-chain file) for `hosts`, signed by the CA in `directory`
    (made there first if it has none). Never overwrites a certificate."""
    import trustme  # here: only this command and `cluster up --secure` need it
    ca_path, ca_key, cert_path = (directory / "ca.pem", directory / "ca-key.pem",
                                  directory / f"{name}.pem")
    if cert_path.exists():
        raise CertsError(f"{cert_path} exists: give another --name, or remove it first")
    if ca_path.exists() != ca_key.exists():
        raise CertsError(f"{ca_path if ca_path.exists() else ca_key} is there without "
                         f"{ca_key if ca_path.exists() else ca_path}: a CA needs both; use "
                         f"another --dir")
    directory.mkdir(parents=True, exist_ok=True)
    if ca_path.exists():
        ca = trustme.CA.from_pem(ca_path.read_bytes(), ca_key.read_bytes())
    else:
        ca = trustme.CA(organization_name="minilog local CA")
        ca.cert_pem.write_to_path(str(ca_path))
        _write_private(ca_key, ca.private_key_pem.bytes())
    _write_private(cert_path, ca.issue_cert(*hosts).private_key_and_cert_chain_pem.bytes())
    return ca_path, cert_path


def _write_private(path: Path, data: bytes) -> None:
    """A new file only its owner can read, from its first byte (it holds a private key)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def build_parser(prog: str = "minilog certs") -> Parser:
    parser = Parser(prog=prog, description="Make a local CA and TLS certificates (PEM).")
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    make = sub.add_parser("create", help="a CA (once per --dir) and a certificate for --hosts")
    make.add_argument("--dir", required=True, metavar="DIR", help="where the PEM files go")
    make.add_argument("--hosts", default="127.0.0.1,localhost", metavar="H1,H2",
                      help="the names and addresses clients reach the broker by "
                           "(default 127.0.0.1,localhost)")
    make.add_argument("--name", default="broker",
                      help="the certificate's file name, NAME.pem (default broker)")
    return parser


def main(argv: list[str] | None = None, prog: str = "minilog certs",
         out: TextIO = sys.stdout) -> int:
    args = build_parser(prog).parse_args(argv)
    hosts = [h.strip() for h in args.hosts.split(",") if h.strip()]
    if not hosts or "/" in args.name:
        print(f"{prog}: --hosts needs at least one name or address, --name a file name",
              file=sys.stderr)
        return 2
    try:
        ca, cert = create(Path(args.dir).resolve(), hosts, args.name)
    except (CertsError, OSError, ValueError) as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 1
    out.write(f"CA certificate: {ca}\n"
              f"{args.name} key and certificate chain for {', '.join(hosts)}: {cert}\n"
              f"broker settings (server.properties):\n"
              f"  listeners=SSL://{hosts[0]}:9093\n"
              f"  ssl.keystore.type=PEM\n"
              f"  ssl.keystore.location={cert}\n"
              f"  # mutual TLS: ssl.client.auth=required and ssl.truststore.location={ca}\n"
              f"client settings: security.protocol=SSL, ssl.ca.location={ca}\n")
    return 0
