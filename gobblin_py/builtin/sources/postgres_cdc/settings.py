"""The `postgres_cdc` source's settings (the url without a password, `password_env`, the slot, the publication) and
how to open a connection with them; shared by the planner (`source.py`), the reader (`extractor.py`) and the slot's
commit step (`slot.py`), so none of them imports another's module."""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import unquote, urlsplit

from pydantic import Field, field_validator, model_validator

from gobblin_py.api import Settings
from gobblin_py.api.secrets import check_credentials
from gobblin_py.builtin.extras import require
from gobblin_py.errors import ConfigError, SourceError, UnreachableError

IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]{0,62}")
"""A slot's name (PostgreSQL allows only lower-case letters, digits and _), and what we allow for a publication's."""

REMEDY = "Check that the database is running and source.url is right; the next run resumes from the committed positions."


class PostgresCdcSettings(Settings):
    url: str = Field(description="postgresql://user@host:5432/database (no password: see password_env)")
    password_env: str | None = Field(default=None, description="the environment variable holding the password")
    slot: str = Field(description="the logical replication slot (plugin pgoutput) this job alone reads and advances")
    publication: str = Field(description="the publication whose tables are captured, one dataset (schema.table) each")
    tables: list[str] | None = Field(
        default=None, description="schema-qualified tables (public.orders) for create_publication; when the publication "
                                  "exists, the run checks it holds exactly these")
    create_publication: bool = Field(default=False, description="create the publication FOR TABLE `tables` when it is "
                                                                "missing (else a missing publication is an error)")
    create_slot: bool = Field(default=True, description="create the slot when it is missing (a first run: every table is "
                                                        "snapshotted)")
    max_changes: int | None = Field(
        default=None, ge=1, description="about how many changes one run (or checkpoint) reads at most: the run's end "
                                        "is moved back to the commit of the transaction that reaches it (a transaction "
                                        "is never split); unset: everything committed when the run plans")
    snapshot_chunk_rows: int | None = Field(
        default=None, ge=1, description="snapshot a table in chunks of about this many rows by its primary key, each "
                                        "its own task and short transaction, over as many runs as it takes, while its "
                                        "changes stream (docs/sources/postgres_cdc.md); unset: in one transaction")
    snapshot_chunks_per_run: int = Field(default=64, ge=1, description="at most this many chunks of a table are read "
                                                                       "per run (the rest in the next runs)")
    fetch_rows: int = Field(default=10_000, ge=1, description="rows per round trip of a snapshot's server-side cursor")
    statement_timeout: str | int = Field(default="15min", description="timeout of every query: 300ms, 30s, 15min (0: none)")
    connect_timeout_s: int = Field(default=10, ge=1, description="seconds to wait for a connection to the database")
    busy_wait_s: float = Field(default=30.0, ge=0, description="how long to wait for the slot while another session "
                                                               "holds it (a commit advancing it) before failing")

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("postgresql", "postgres"):
            raise ValueError("give postgresql://user@host:port/database")
        if not parts.hostname or not parts.path.strip("/"):
            raise ValueError("give postgresql://user@host:port/database")
        return value

    @field_validator("slot")
    @classmethod
    def _slot(cls, value: str) -> str:
        if not IDENTIFIER.fullmatch(value):
            raise ValueError(f"{value!r} is not a replication slot name (lower-case letters, digits and _, up to 63)")
        return value

    @field_validator("publication")
    @classmethod
    def _publication(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$]{0,62}", value):
            raise ValueError(f"{value!r}: give the publication's name (letters, digits, _ and $, up to 63)")
        return value

    @field_validator("tables")
    @classmethod
    def _tables(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        for t in value:
            if t.count(".") != 1 or any(c in t for c in "/\\\x00\"") or not all(t.split(".")):
                raise ValueError(f"{t!r}: give each table schema-qualified and unquoted (public.orders)")
        if len(set(value)) != len(value):
            raise ValueError("a table is listed more than once")
        return value

    @model_validator(mode="after")
    def _environment(self) -> PostgresCdcSettings:
        require("psycopg", "the postgres_cdc source needs psycopg 3", "jdbc")
        check_credentials(self.url, self.password_env)  # here, where the error does not echo the value
        if self.create_publication and not self.tables:
            raise ValueError("create_publication needs tables: the schema-qualified tables to publish")
        return self

    @property
    def endpoint(self) -> str:
        parts = urlsplit(self.url)
        return f"PostgreSQL {parts.hostname}:{parts.port or 5432}"

    @property
    def database(self) -> str:
        return unquote(urlsplit(self.url).path.strip("/"))


def read_password(password_env: str | None) -> str | None:
    """The password from the variable `password_env` names (None without one); a ConfigError when it is not set here."""
    if not password_env:
        return None
    password = os.environ.get(password_env)
    if password is None:
        raise ConfigError(f"source.password_env: the environment variable {password_env} is not set here (on a cluster, "
                          "pass it to the executors too)")
    return password


def connect(url: str, password_env: str | None, timeout_s: int = 10, statement_timeout: str | int = "15min",
            in_task: bool = False, **kwargs: Any) -> Any:
    """An autocommit psycopg connection; a failure named (wrong password, no database, unreachable) with the
    password cut out of every message: unreachable in a task is an UnreachableError (retried), else a SourceError."""
    import psycopg

    password = read_password(password_env)
    parts = urlsplit(url)
    where = f"PostgreSQL {parts.hostname}:{parts.port or 5432}, database {unquote(parts.path.strip('/'))}"
    try:
        return psycopg.connect(url, password=password, connect_timeout=timeout_s, autocommit=True,
                               application_name="gobblin-py cdc", options=f"-c statement_timeout={statement_timeout}",
                               **kwargs)
    except psycopg.Error as exc:
        text = str(exc).replace(password, "***") if password else str(exc)
        text = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
        if "password authentication failed" in text or getattr(exc, "sqlstate", None) in ("28P01", "28000"):
            raise ConfigError(f"{where}: user {unquote(parts.username or '')!r} was refused ({text}); check the user in "
                              f"source.url and the password in ${password_env or '(no password_env given)'}") from None
        if "does not exist" in text and "database" in text:
            raise ConfigError(f"{where}: {text}; check source.url") from None
        if in_task:
            raise UnreachableError(f"{where}: {text}", where, REMEDY) from None
        raise SourceError(f"{where}: cannot connect: {text}. {REMEDY}") from None


def open_source(s: PostgresCdcSettings, in_task: bool = False) -> Any:
    """A connection with the source's settings."""
    return connect(s.url, s.password_env, s.connect_timeout_s, s.statement_timeout, in_task)


def lsn_int(text: str) -> int:
    """`0/16B3748` as the 64-bit integer it stands for (watermarks and `_lsn` are integers: they order by value)."""
    hi, _, lo = text.partition("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def lsn_text(value: int) -> str:
    """The 64-bit LSN as PostgreSQL writes it (`0/16B3748`), for messages and SQL."""
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"


def flushed_after_sync_commit(conn: Any) -> int:
    """The flushed WAL position once a transaction of our own has committed synchronously: every commit that returned
    (became visible) before this call has its commit record below it. The transaction writes a transactional logical
    message, which pgoutput leaves out, so there is WAL of its own to flush. `conn` is left in autocommit."""
    conn.autocommit = False
    try:
        conn.execute("SET LOCAL synchronous_commit = on")
        conn.execute("SELECT pg_logical_emit_message(true, 'gobblin-py', '')")
        conn.commit()
    finally:
        conn.autocommit = True
    return lsn_int(conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0])
