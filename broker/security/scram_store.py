"""Where a broker keeps SCRAM credentials: in its metadata (`scram_metadata.py`), and, on each
node of a cluster, the `sasl.scram` seeds in a JSON file of their own.

`sasl.scram` seeds it on start, in the syntax of Kafka's `kafka-storage format --add-scram`:
`SCRAM-SHA-256=[name=alice,password=secret]`, several separated by `;`: a seed creates a
credential only where none was ever set, so a password changed or a credential deleted with
AlterUserScramCredentials stays so across restarts with the same settings. Credentials are
stored salted (`scram_credentials.py`); the file is replaced atomically on each change.
"""
from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from minilog.connector.private_files import write_private

from ..config.broker_keys import ConfigError
from .scram_credentials import ScramCredentials, from_password
from .scram_metadata import MetadataScramCredentials, credential_record

if TYPE_CHECKING:  # the broker's configuration, built by the server from the keys above
    from ..server.config import BrokerConfig

FILE_NAME = "__scram_credentials.json"
_ENTRY = re.compile(r"\s*(SCRAM-SHA-256|SCRAM-SHA-512)\s*=\s*\[(.*)\]\s*", re.IGNORECASE)


def parse_bootstrap(spec: str) -> list:
    """[(mechanism, user, password)] of a `sasl.scram` value."""
    out = []
    for number, item in enumerate((i for i in spec.split(";") if i.strip()), 1):
        match = _ENTRY.fullmatch(item)
        fields = dict(f.split("=", 1) for f in match.group(2).split(",") if "=" in f) \
            if match else {}
        if not match or "name" not in fields or "password" not in fields:
            raise ConfigError(f"sasl.scram entries look like "
                              f"SCRAM-SHA-256=[name=alice,password=secret]; entry "
                              f"{number} does not (its text is "
                              f"not shown: it may hold a password)")
        out.append((match.group(1).upper(), fields["name"].strip(), fields["password"]))
    return out


def open_scram_credentials(config: BrokerConfig, store: Any, seeds_file: bool) -> Any:
    """The broker's credentials, those of the metadata (`store`). A node of a quorum of
    several keeps its `sasl.scram` seeds in this file, a fallback for users the metadata never
    set (every node has its own, and may be seeded before any controller runs); a single
    broker (the only voter of its quorum) commits them as records instead, once it leads
    (`scram_seed_records`), as `kafka-storage format --add-scram` puts them in the metadata."""
    if seeds_file:
        return MetadataScramCredentials(store, _open_file(config))
    parse_bootstrap(config["sasl.scram"] or "")  # a bad value: one error before anything starts
    return MetadataScramCredentials(store, ScramCredentials())


def scram_seed_records(config: BrokerConfig, image: Any) -> list:
    """The records of the `sasl.scram` seeds whose credential was never set in `image` (one
    rotated or deleted since stands)."""
    return [credential_record(u, m, from_password(m, p))
            for m, u, p in parse_bootstrap(config["sasl.scram"] or "")
            if (u, m) not in image.scram]


def _open_file(config: BrokerConfig) -> ScramCredentials:
    path = config.data_dir / FILE_NAME

    def save(store: ScramCredentials) -> None:
        write_private(path, json.dumps(store.to_json()))

    store = ScramCredentials()
    if path.exists():
        store.load_json(json.loads(path.read_text()))
    for mechanism, user, password in parse_bootstrap(config["sasl.scram"] or ""):
        if not store.ever_set(user, mechanism):  # rotated or deleted since: theirs stands
            store.upsert(user, mechanism, from_password(mechanism, password))
    config.data_dir.mkdir(parents=True, exist_ok=True)
    store.on_change(save)
    if config["sasl.scram"]:
        save(store)
    return store
