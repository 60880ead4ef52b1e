"""The `mysql_cdc` source's settings (the url without a password, `password_env`, the tables, the snapshot's chunks)
and how to open a connection with them; shared by the planner (`source.py`), the reader (`extractor.py`) and the binlog
and snapshot readers, so none of them imports another's module."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gobblin_py.api import Settings
from gobblin_py.api.secrets import check_credentials
from gobblin_py.builtin.extras import require
from gobblin_py.errors import ConfigError, SourceError, UnreachableError

REMEDY = "Check that the server is running and source.url is right; the next run resumes from the committed positions."
ACCESS_DENIED, UNKNOWN_DATABASE = 1045, 1049


class SnapshotSettings(BaseModel):
    """How a table without a committed position is read whole before its changes."""

    model_config = ConfigDict(extra="forbid")
    chunk_rows: int = Field(default=50_000, ge=1, description="rows per snapshot chunk (by primary key): one short "
                                                              "SELECT, and the binlog between its low and high positions "
                                                              "applied to it in memory")
    chunks_per_run: int = Field(default=16, ge=1, description="snapshot chunks a run reads at most per table (each a "
                                                              "task); the rest wait for the next runs, the committed "
                                                              "chunks kept")


class MysqlCdcSettings(Settings):
    """Where the server is, which tables to capture, and how a table's first read is chunked."""

    url: str = Field(description="mysql://user@host:3306/database or mariadb://… (no password: see password_env)")
    password_env: str | None = Field(default=None, description="the environment variable holding the password")
    tables: list[str] = Field(description="database-qualified tables (shop.orders), one dataset of change records each; "
                                          "each needs a primary key")
    server_id: int = Field(default=5_400_000, ge=1, le=2**32 - 2**21,
                           description="the lowest replica server id the binlog readers use (each reader takes this plus "
                                       "a random number below 2^20): keep the range clear of your replicas' ids")
    snapshot: SnapshotSettings = Field(default_factory=SnapshotSettings, description="the first read of a table")
    connect_timeout_s: int = Field(default=10, ge=1, description="seconds to wait for a connection to the server")

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("mysql", "mariadb") or not parts.hostname:
            raise ValueError("give mysql://user@host:port/database (or mariadb://…)")
        return value

    @field_validator("tables")
    @classmethod
    def _tables(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("list at least one table (database.table)")
        for t in value:
            if t.count(".") != 1 or any(c in t for c in "/\\\x00`\"") or not all(t.split(".")):
                raise ValueError(f"{t!r}: give each table database-qualified and unquoted (shop.orders)")
        if len(set(value)) != len(value):
            raise ValueError("a table is listed more than once")
        return value

    @model_validator(mode="after")
    def _environment(self) -> MysqlCdcSettings:
        require("pymysqlreplication", "the mysql_cdc source needs mysql-replication", "jdbc")
        check_credentials(self.url, self.password_env)  # here, where the error does not echo the value
        return self

    @property
    def endpoint(self) -> str:
        parts = urlsplit(self.url)
        return f"MySQL {parts.hostname}:{parts.port or 3306}"

    def connection_args(self) -> dict[str, Any]:
        """What pymysql (and the binlog reader) connect with; the password read from `password_env`."""
        parts = urlsplit(self.url)
        return {"host": parts.hostname, "port": parts.port or 3306, "user": unquote(parts.username or ""),
                "password": read_password(self.password_env) or "", "connect_timeout": self.connect_timeout_s}


def read_password(password_env: str | None) -> str | None:
    """The password from the variable `password_env` names (None without one); a ConfigError when it is not set here."""
    if not password_env:
        return None
    password = os.environ.get(password_env)
    if password is None:
        raise ConfigError(f"source.password_env: the environment variable {password_env} is not set here (on a cluster, "
                          "pass it to the executors too)")
    return password


def connect(s: MysqlCdcSettings, in_task: bool = False) -> Any:
    """An autocommit pymysql connection in UTC; a failure named (wrong password, unreachable) with the password cut out
    of every message: unreachable in a task is an UnreachableError (retried), else a SourceError."""
    import pymysql

    from gobblin_py.builtin.sources.mysql_cdc.tls import PreferredTls

    args = s.connection_args()
    password = args.pop("password")
    try:
        return PreferredTls(password=password, autocommit=True, charset="utf8mb4", init_command="SET time_zone = '+00:00'",
                               program_name="gobblin-py mysql_cdc", **args)
    except pymysql.err.Error as exc:
        text = str(exc).replace(password, "***") if password else str(exc)
        code = exc.args[0] if exc.args else None
        if code == ACCESS_DENIED:
            raise ConfigError(f"{s.endpoint}: user {args['user']!r} was refused ({text}); check the user in source.url "
                              f"and the password in ${s.password_env or '(no password_env given)'}") from None
        if in_task:
            raise UnreachableError(f"{s.endpoint}: {text}", s.endpoint, REMEDY) from None
        raise SourceError(f"{s.endpoint}: cannot connect: {text}. {REMEDY}") from None


def query(conn: Any, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
    """The rows of one statement, bytes decoded (MySQL 8 hands some information_schema text over as bytes)."""
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return [tuple(v.decode() if isinstance(v, (bytes, bytearray)) else v for v in row) for row in cur.fetchall()]
