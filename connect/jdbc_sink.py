"""The JDBC sink's settings over PostgreSQL (psycopg): each micro-batch and the Kafka offsets it
reaches written in one database transaction, so the table is exactly once whenever the worker
dies.

Confluent's `io.confluent.connect.jdbc.JdbcSinkConnector` settings: `connection.url`
(`jdbc:postgresql://host:port/db`, with `connection.user`/`connection.password` or `?user=`),
`table.name.format` (`${topic}`), `insert.mode` insert | upsert, `pk.mode` none | record_key |
record_value, `pk.fields`, `auto.create`, `delete.enabled` (a tombstone deletes the key's row).
Values are Connect structs as JsonConverter writes them with `schemas.enable=true`; keys under
`pk.mode=record_key` are a primitive (StringConverter, or a JSON primitive: one column,
`pk.fields` names it) or a struct (its fields).

Offsets live beside the data in `__connect_offsets` (connector, topic, partition, offset): a
batch's rows at or below the stored offset of their partition were written before (a replayed
batch, or a query whose checkpoint was lost) and are skipped inside the same transaction.
"""
from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from pyspark.sql import DataFrame

OFFSETS_TABLE = "__connect_offsets"
_TYPES = {"int8": "SMALLINT", "int16": "SMALLINT", "int32": "INT", "int64": "BIGINT",
          "float32": "REAL", "float64": "DOUBLE PRECISION", "boolean": "BOOLEAN",
          "string": "TEXT", "bytes": "BYTEA"}


class JdbcSinkError(ValueError):
    """A record or setting the sink cannot write (Connect's ConnectException): the task fails."""


def conninfo(config: dict[str, str]) -> dict[str, Any]:
    url = config["connection.url"]
    if not url.startswith("jdbc:postgresql://"):
        raise JdbcSinkError(f"connection.url must be jdbc:postgresql://HOST:PORT/DATABASE, "
                            f"got {url!r}: this worker writes to PostgreSQL only")
    parts = urlsplit(url[len("jdbc:"):])
    params = dict(parse_qsl(parts.query))
    out = {"host": parts.hostname or "localhost", "port": parts.port or 5432,
           "dbname": parts.path.lstrip("/") or "postgres"}
    user = config.get("connection.user") or params.get("user")
    password = config.get("connection.password") or params.get("password")
    if user:
        out["user"] = user
    if password:
        out["password"] = password
    return out


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _struct(text: str | None, what: str) -> tuple[list[dict], dict] | None:
    """(schema fields, payload) of a JsonConverter envelope; None for a tombstone."""
    if text is None:
        return None
    try:
        envelope = json.loads(text)
        schema, payload = envelope["schema"], envelope["payload"]
    except (ValueError, TypeError, KeyError):
        raise JdbcSinkError(f"Sink connector requires records with a non-null Struct value and "
                            f"non-null Struct schema (the {what} is not JsonConverter's "
                            f"envelope with schemas.enable=true)") from None
    if payload is None:
        return None
    if schema.get("type") != "struct":
        return [{"field": None, "type": schema.get("type")}], {None: payload}
    return schema["fields"], payload


class JdbcSinkWriter:
    """The `foreachBatch` function of one JDBC sink connector."""

    def __init__(self, name: str, config: dict[str, str]) -> None:
        self.name = name
        self.conninfo = conninfo(config)
        self.table_format = config.get("table.name.format", "${topic}")
        self.mode = config.get("insert.mode", "insert")
        self.pk_mode = config.get("pk.mode", "none")
        self.pk_fields = [f.strip() for f in config.get("pk.fields", "").split(",") if f.strip()]
        self.auto_create = config.get("auto.create", "false") == "true"
        self.delete_enabled = config.get("delete.enabled", "false") == "true"
        self._created: set[str] = set()
        self._sql: dict[tuple, str] = {}  # statements' text by kind, table and columns

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        import psycopg
        # offsets are the topic's as read (a RegexRouter may have renamed `topic`, the table)
        origin = df["original_topic"] if "original_topic" in df.columns else df["topic"]
        batch = df.select("topic", origin.alias("original_topic"), "partition", "offset",
                          df["key"].cast("string").alias("key"),
                          df["value"].cast("string").alias("value")).toArrow()
        # one Python list per column (not a dict per row): the loop below is the sink's per-record
        # work, kept to parsing the value and picking its statement
        topics, origins, partitions, offsets, keys, values = (
            batch.column(i).to_pylist() for i in range(batch.num_columns))
        with psycopg.connect(**self.conninfo) as conn, conn.cursor() as cur:
            cur.execute(f"CREATE TABLE IF NOT EXISTS {OFFSETS_TABLE} (connector TEXT, topic "
                        f"TEXT, partition INT, \"offset\" BIGINT, PRIMARY KEY (connector, topic, "
                        f"partition))")
            cur.execute(f"SELECT topic, partition, \"offset\" FROM {OFFSETS_TABLE} WHERE "
                        f"connector = %s FOR UPDATE", (self.name,))
            done = {(t, p): o for t, p, o in cur.fetchall()}
            reached = {}
            # consecutive rows with the same statement go together, in the records' order
            same_sql, params = None, []
            for topic, tp, offset, key, value in zip(topics, zip(origins, partitions), offsets,
                                                     keys, values):
                if offset <= done.get(tp, -1):
                    continue  # written by an earlier transaction
                statement = self._statement(cur, topic, key, value)
                if offset > reached.get(tp, -1):
                    reached[tp] = offset
                if statement is None:
                    continue
                if statement[0] is not same_sql:
                    if params:
                        _write(cur, same_sql, params)
                    same_sql, params = statement[0], []
                params.append(statement[1])
            if params:
                _write(cur, same_sql, params)
            for (topic, partition), offset in reached.items():
                cur.execute(f"INSERT INTO {OFFSETS_TABLE} VALUES (%s, %s, %s, %s) ON CONFLICT "
                            f"(connector, topic, partition) DO UPDATE SET \"offset\" = "
                            f"EXCLUDED.\"offset\"", (self.name, topic, partition, offset))
            # leaving the block commits the rows and the offsets together

    def _key_columns(self, key: str | None) -> dict[str, Any]:
        if self.pk_mode != "record_key":
            return {}
        if key is None:
            raise JdbcSinkError(f"Sink connector '{self.name}' is configured with "
                                f"'pk.mode=record_key' but received a record with a null key")
        try:
            parsed = json.loads(key)
        except ValueError:
            parsed = key
        if isinstance(parsed, dict) and "schema" in parsed and "payload" in parsed:
            parsed = parsed["payload"]
        if isinstance(parsed, dict):
            return {f: parsed[f] for f in (self.pk_fields or parsed)}
        return {(self.pk_fields or ["__connect_key"])[0]: parsed}

    def _statement(self, cur: Any, topic: str, key: str | None,
                   text: str | None) -> tuple[str, list[Any]] | None:
        """The statement writing one record and its parameters (None: nothing to write). A
        table `auto.create` makes is created here, before the statement that needs it. The
        statement's text is the same object for every record of one table and set of columns
        (`_insert_sql`), so the caller groups records by identity."""
        table = self.table_format.replace("${topic}", topic)
        keys = self._key_columns(key)
        value = _struct(text, "value")
        if value is None:
            if not self.delete_enabled:
                raise JdbcSinkError("Sink connector requires records with a non-null Struct "
                                    "value (a tombstone needs delete.enabled=true)")
            if table in self._created or self._exists(cur, table):
                return self._delete_sql(table, tuple(keys)), list(keys.values())
            return None
        fields, payload = value
        columns = dict(keys)
        for f in fields:
            if f["field"] is not None:
                columns.setdefault(f["field"], payload.get(f["field"]))
        if self.pk_mode == "record_value":
            keys = {k: columns[k] for k in self.pk_fields}
        if self.auto_create and table not in self._created:
            self._create(cur, table, fields, keys)
        return self._insert_sql(table, tuple(columns), tuple(keys)), list(columns.values())

    def _delete_sql(self, table: str, keys: tuple[str, ...]) -> str:
        return self._sql.setdefault(("delete", table, keys), (
            f"DELETE FROM {_ident(table)} WHERE "
            + " AND ".join(f"{_ident(k)} = %s" for k in keys)))

    def _insert_sql(self, table: str, columns: tuple[str, ...], keys: tuple[str, ...]) -> str:
        """Insert mode: COPY of `columns` into `table` (PostgreSQL's bulk load: a key already
        there fails the batch as an INSERT would); upsert: INSERT ... ON CONFLICT. Made once
        per table and columns."""
        known = self._sql.get(("insert", table, columns, keys))
        if known is not None:
            return known
        names = ", ".join(_ident(c) for c in columns)
        if self.mode != "upsert":
            sql = f"COPY {_ident(table)} ({names}) FROM STDIN"
        else:
            marks = ", ".join(["%s"] * len(columns))
            rest = [c for c in columns if c not in keys]
            sql = (f"INSERT INTO {_ident(table)} ({names}) VALUES ({marks}) "
                   f"ON CONFLICT ({', '.join(_ident(k) for k in keys)}) DO ") + (
                "UPDATE SET " + ", ".join(f"{_ident(c)} = EXCLUDED.{_ident(c)}" for c in rest)
                if rest else "NOTHING")
        return self._sql.setdefault(("insert", table, columns, keys), sql)

    @staticmethod
    def _exists(cur: Any, table: str) -> bool:
        cur.execute("SELECT to_regclass(%s)", (_ident(table),))
        return cur.fetchone()[0] is not None

    def _create(self, cur: Any, table: str, fields: list[dict], keys: dict) -> None:
        """auto.create: the table from the record's schema, the key columns its primary key."""
        types = {f["field"]: _TYPES.get(f["type"], "TEXT") for f in fields}
        for k, v in keys.items():
            types.setdefault(k, "BIGINT" if isinstance(v, int) else "TEXT")
        cols = [f"{_ident(c)} {t}" + ("" if f_optional(fields, c) or c in keys else " NOT NULL")
                for c, t in types.items()]
        if keys:
            cols.append(f"PRIMARY KEY ({', '.join(_ident(k) for k in keys)})")
        cur.execute(f"CREATE TABLE IF NOT EXISTS {_ident(table)} ({', '.join(cols)})")
        self._created.add(table)


def _write(cur: Any, sql: str, params: list[list[Any]]) -> None:
    """Rows that share one statement: a COPY streams them all in one command; any other
    statement goes through executemany (psycopg pipelines it: one round trip for many rows)."""
    if sql.startswith("COPY "):
        with cur.copy(sql) as copy:
            for row in params:
                copy.write_row(row)
    else:
        cur.executemany(sql, params)


def f_optional(fields: list[dict], name: str) -> bool:
    return next((bool(f.get("optional", False)) for f in fields if f["field"] == name), True)
