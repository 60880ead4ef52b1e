"""The Iceberg catalog as gobblin-py uses it, through pyiceberg: loaded once per process and properties, its faults told
from commit conflicts (an unreachable catalog is retried by the commit layer, a conflict here with backoff), its
namespaces and tables. pyiceberg is imported inside the functions (a heavy import)."""

from __future__ import annotations

import contextlib
import logging
import os
import random
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from gobblin_py.errors import CatalogUnavailableError, CommitError, is_environment_fault, os_fault
from gobblin_py.fs import Location

log = logging.getLogger(__name__)


_catalogs: dict[tuple[int, tuple[tuple[str, str], ...]], Any] = {}
_catalogs_lock = threading.Lock()


def load_catalog(properties: Mapping[str, str]) -> Any:
    """pyiceberg's catalog for `properties` (`name` names it, e.g. one configured in ~/.pyiceberg.yaml or
    PYICEBERG_CATALOG__<NAME>__* variables, which is where credentials belong); one per process and properties,
    made under a lock (a SQL catalog creates its tables on first use, and commit threads would race to)."""
    key = (os.getpid(), tuple(sorted(properties.items())))
    with _catalogs_lock:
        found = _catalogs.get(key)
        if found is None:
            found = _catalogs[key] = _load_catalog(dict(properties))
        return found


IDLE_IN_TRANSACTION_S = 15
"""Seconds a PostgreSQL SQL catalog's session of ours may sit idle inside a transaction before the server ends it
(`idle_in_transaction_session_timeout`): pyiceberg's commit holds the table's row `FOR UPDATE` for milliseconds, so a
session idle that long inside one is a driver frozen mid-commit (SIGSTOP, a paused pod), whose lock would otherwise
hold the next driver's commit of that table for good (CDC soak seed 1612506852). Its transaction rolls back whole."""


def _bounded_sessions(props: dict[str, str]) -> dict[str, str]:
    """A SQL catalog on PostgreSQL with `IDLE_IN_TRANSACTION_S` set on its sessions (libpq's `options` in the URI),
    unless the URI sets `options` itself."""
    uri = props.get("uri", "")
    if props.get("type", "sql") != "sql" or not uri.startswith(("postgresql", "postgres:")) or "options=" in uri:
        return props
    option = urllib.parse.quote(f"-c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_S * 1000}")
    return {**props, "uri": f"{uri}{'&' if '?' in uri else '?'}options={option}"}


def _load_catalog(props: dict[str, str]) -> Any:
    from pyiceberg.catalog import load_catalog as _load

    props = _bounded_sessions(props)
    name = props.pop("name", "gobblin_py")
    loaded: list[Any] = []
    try:  # another process (an executor, a concurrent job) may be creating the SQL catalog's tables right now
        with catalog_faults(catalog_label({"name": name, **props}), "loading it"):
            with_retries(f"Iceberg catalog {name!r}", 5, lambda: loaded.append(_load(name, **props)))
        return loaded[0]
    except CatalogUnavailableError:
        raise
    except Exception as exc:  # noqa: BLE001 - each catalog type raises its own
        raise CommitError(f"cannot load the Iceberg catalog {name!r} (type {props.get('type', '?')}): "
                          f"{type(exc).__name__}: {exc}; check publisher.catalog and the catalog's service") from exc


def catalog_label(props: Mapping[str, str]) -> str:
    """How messages name a catalog: `'gobblin_py' (sql, sqlite:////work/iceberg/catalog.db)`, a URI's password left out."""
    uri = re.sub(r"(//[^/:@]*):[^/@]*@", r"\1:***@", props.get("uri", ""))
    kind = props.get("type", "")
    return f"{props.get('name', 'gobblin_py')!r}" + (f" ({', '.join(x for x in (kind, uri) if x)})" if kind or uri else "")


_CONFLICT = re.compile(r"database (table )?is locked|\bbusy\b|deadlock|could not serialize|serialization failure|"
                       r"already exists|unique constraint|duplicate key", re.IGNORECASE)
_ACCESS = re.compile(r"read-?only|permission denied|access denied|not authori[sz]ed|forbidden|authentication failed|"
                     r"password", re.IGNORECASE)
_UNREACHABLE = re.compile(r"unable to open database file|connection refused|could not connect|connection failed|"
                          r"timed? ?out|no route to host|name or service not known|could not translate host name|"
                          r"server closed the connection|connection reset|network is unreachable|unavailable",
                          re.IGNORECASE)


def _sql_error(exc: BaseException) -> bool:
    return type(exc).__module__.startswith("sqlalchemy") and type(exc).__name__ in (
        "OperationalError", "InterfaceError", "DatabaseError", "InternalError")


def catalog_fault(exc: BaseException) -> str | None:
    """What stops the catalog when `exc` says it cannot be reached or used (`unreachable`, `refuses access`, `fails`),
    not that a concurrent commit won: None for a conflict (retried) or anything else (a bug, a bad table)."""
    from pyiceberg import exceptions as ice

    text = str(exc)
    rest = [getattr(ice, n) for n in ("ServiceUnavailableError", "ServerError", "UnauthorizedError", "ForbiddenError")
            if hasattr(ice, n)]
    if _sql_error(exc):
        if _CONFLICT.search(text):
            return None
    elif isinstance(exc, tuple(rest)):
        pass
    elif isinstance(exc, OSError) and is_environment_fault(exc):
        return "refuses access" if isinstance(exc, PermissionError) or _ACCESS.search(text) else \
            "is unreachable" if isinstance(exc, (ConnectionError, TimeoutError)) else "fails"
    elif type(exc).__module__.startswith("requests") and type(exc).__name__ in ("ConnectionError", "Timeout", "ConnectTimeout"):
        return "is unreachable"
    else:
        return None
    return "refuses access" if _ACCESS.search(text) else "is unreachable" if _UNREACHABLE.search(text) else "fails"


@contextlib.contextmanager
def catalog_faults(label: str, doing: str) -> Iterator[None]:
    """Inside: a catalog that cannot be reached or refuses access (`catalog_fault`) is a CatalogUnavailableError naming
    it and what failed, which a commit retries after `job.commit_retry_backoff`, never an internal error or a conflict."""
    try:
        yield
    except CatalogUnavailableError:
        raise
    except Exception as exc:  # noqa: BLE001 - only what `catalog_fault` recognises is translated
        how = catalog_fault(exc)
        if how is None:
            raise
        detail = os_fault(exc) if isinstance(exc, OSError) else f"{type(exc).__name__}: {_first_line(exc)}"
        raise CatalogUnavailableError(
            f"Iceberg catalog {label} {how} ({doing}): {detail}. Check the catalog's service, its database file and the "
            "permissions on it and its warehouse; a pending commit is retried after job.commit_retry_backoff") from exc


def _first_line(exc: BaseException) -> str:
    """A library error's own line (SQLAlchemy appends the statement and its parameters)."""
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), "")


def split_identifier(table: str) -> tuple[str, str]:
    """`ns.name` (or `a.b.name`) → (namespace, name)."""
    namespace, _, name = table.rpartition(".")
    return namespace, name


def ensure_namespace(catalog: Any, namespace: str) -> None:
    """Create `namespace` unless it exists; a concurrent committer creating it at the same time is no failure
    (each catalog reports that race its own way: a SQL catalog by a unique-key violation)."""
    try:
        catalog.create_namespace_if_not_exists(namespace)
    except Exception:  # noqa: BLE001 - re-raised unless the namespace is there now
        if not catalog.namespace_exists(namespace):
            raise


def load_table(catalog: Any, table: str) -> Any | None:
    from pyiceberg.exceptions import NoSuchTableError

    try:
        return catalog.load_table(table)
    except NoSuchTableError:
        return None


def retryable(exc: BaseException) -> bool:
    """A conflict with a concurrent committer (or a busy catalog database): reload the table and try again."""
    from pyiceberg.exceptions import (
        CommitFailedException,
        CommitStateUnknownException,
        NamespaceAlreadyExistsError,
        TableAlreadyExistsError,
    )

    if isinstance(exc, (CommitFailedException, CommitStateUnknownException, TableAlreadyExistsError, NamespaceAlreadyExistsError)):
        return True
    # a SQL catalog: the database busy, or a row a concurrent committer inserted first (the same new table); not the
    # database unreachable or read-only, which `catalog_faults` names (retrying it here only took seconds)
    if type(exc).__module__.startswith("sqlalchemy"):
        return type(exc).__name__ == "IntegrityError" or (type(exc).__name__ == "OperationalError" and bool(_CONFLICT.search(str(exc))))
    return False


def with_retries(what: str, attempts: int, action: Callable[[], None], sleep: Callable[[float], None] = time.sleep) -> None:
    """Run `action` until it succeeds, retrying a conflict (`retryable`) with jittered exponential backoff
    (0.1 s doubling, at most 5 s) up to `attempts` times; then CommitError naming `what` and the last conflict."""
    for attempt in range(1, attempts + 1):
        try:
            action()
            return
        except Exception as exc:  # noqa: BLE001 - only conflicts are retried, anything else goes up as it is
            if not retryable(exc):
                raise
            if attempt == attempts:
                raise CommitError(f"{what}: still conflicting with concurrent commits after {attempts} attempts "
                                  f"({type(exc).__name__}: {exc}); the commit stays pending and the next run retries it") from exc
            delay = min(5.0, 0.1 * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)
            log.info("%s: %s, retrying in %.2fs (attempt %d of %d)", what, type(exc).__name__, delay, attempt, attempts)
            sleep(delay)


def table_uri(location: str) -> str:
    """How the table refers to a location: `file://` for local paths (a reader resolves a bare path against its own
    default filesystem, e.g. HDFS under Spark), the URL otherwise."""
    loc = Location(location)
    return f"file://{loc}" if loc.is_local else str(loc)
