"""PEM files into an `ssl.SSLContext`, with errors that name the setting, the file and the fix.

`ssl` reports a missing file as `[Errno 2] No such file or directory` without the name, and a
certificate without its key as `[SSL] PEM lib (_ssl.c:3926)`. Broker (`ssl.keystore.location`,
`ssl.truststore.location`) and client (`ssl.ca.location`, `ssl.certificate.location`) load
their files here, so each failure is one line: which setting, which file, what it must hold.
"""
from __future__ import annotations

import os
import ssl

KEY_AND_CHAIN = ("the PEM file must contain the private key and the certificate chain (this "
                 "host's certificate first, then any intermediate CA's), e.g. as "
                 "`minilog certs create` writes it or `cat key.pem cert.pem > broker.pem`")


class PemFileError(ValueError):
    """A PEM setting that cannot be loaded; the message names the setting and the file."""


def _readable(setting: str, path: str) -> str:
    """The file's text, or PemFileError for a missing or unreadable one."""
    if not os.path.exists(path):
        raise PemFileError(f"{setting}: no such file {path}")
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except IsADirectoryError:
        raise PemFileError(f"{setting}: {path} is a directory, not a PEM file") from None
    except OSError as e:
        raise PemFileError(f"{setting}: cannot read {path}: {e.strerror or e}") from None


def load_key_and_chain(ctx: ssl.SSLContext, setting: str, path: str,
                       password: str | None = None, key_path: str | None = None,
                       key_setting: str = "") -> None:
    """`ctx.load_cert_chain` of `path` (the key in it, or in `key_path`)."""
    text = _readable(setting, path)
    key_text = _readable(key_setting, key_path) if key_path else text
    if "CERTIFICATE-----" not in text:
        raise PemFileError(f"{setting}: {path} holds no certificate: {KEY_AND_CHAIN}")
    if "PRIVATE KEY-----" not in key_text:
        where = f"{key_setting}: {key_path}" if key_path else f"{setting}: {path}"
        raise PemFileError(f"{where} holds no private key: {KEY_AND_CHAIN}")
    try:
        ctx.load_cert_chain(path, key_path, password=password)
    except ssl.SSLError as e:
        raise PemFileError(f"{setting}: {path}: {_why(e, 'ENCRYPTED' in key_text, password)}") \
            from None


def _why(e: ssl.SSLError, encrypted: bool, password: str | None) -> str:
    if "KEY_VALUES_MISMATCH" in str(e):
        return "the private key does not match the certificate"
    if encrypted:
        return ("the private key is encrypted: set ssl.key.password" if not password else
                "ssl.key.password does not decrypt the private key")
    return (f"it does not load ({e.reason or e}): the key must be the certificate's own, and "
            f"{KEY_AND_CHAIN}")


def load_ca(ctx: ssl.SSLContext, setting: str, path: str) -> None:
    """`ctx.load_verify_locations` of the CA certificates in `path`."""
    text = _readable(setting, path)
    if "CERTIFICATE-----" not in text:
        raise PemFileError(f"{setting}: {path} holds no PEM certificate (it must contain the "
                           f"CA certificates to trust, e.g. the ca.pem of `minilog certs "
                           f"create`)")
    try:
        ctx.load_verify_locations(cafile=path)
    except ssl.SSLError as e:
        raise PemFileError(f"{setting}: {path}: its certificates do not load "
                           f"({e.reason or e})") from None
