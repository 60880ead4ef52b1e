"""Faults of an Iceberg catalog (issue 26, item 14): a catalog down or refusing access is named as such, with the
catalog's name and where it is, never as an internal error or "still conflicting with concurrent commits"; the commit
stays pending, is retried after job.commit_retry_backoff, and commits once the catalog is back."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from builtin.test_iceberg_publisher import iceberg_job, table_ids
from support.jobs import EXAMPLE_DATA, write_job

from gobblin_py.builtin.publishers.iceberg.catalog import catalog_label, retryable
from gobblin_py.testing.crash import cli

pytest.importorskip("pyiceberg")
pytest.importorskip("duckdb")

RUN = ["run", "job.yaml", "--in-process"]


def _closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_catalog_that_is_down_is_named_unreachable_not_a_conflict(tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    job = iceberg_job(tmp_path)
    job["publisher"]["catalog"] = {"name": "shared", "type": "sql", "uri": f"postgresql+psycopg://gobblin@127.0.0.1:{_closed_port()}/cat"}
    write_job(tmp_path, job)
    done = cli(RUN, tmp_path)
    text = done.stdout + done.stderr
    assert done.returncode == 1, text
    assert "Iceberg catalog 'shared' (sql, postgresql+psycopg://gobblin@127.0.0.1:" in text and " is unreachable " in text, text
    assert "Connection refused" in text
    assert "conflicting" not in text and "internal error" not in text and "Traceback" not in text


def test_a_read_only_catalog_is_named_not_retried_as_a_conflict_and_commits_once_it_is_writable(
        tmp_path: Path, mount) -> None:
    catalog_dir = tmp_path / "catalog"
    catalog_dir.mkdir()
    job = iceberg_job(tmp_path, commit_retry_backoff=0)
    job["publisher"]["catalog"] = {"name": "shared", "type": "sql", "uri": f"sqlite:///{catalog_dir / 'catalog.db'}"}
    write_job(tmp_path, job)
    assert cli(RUN, tmp_path).returncode == 0
    for name in ("clicks-2026-01-01.jsonl", "clicks-2026-01-02.jsonl"):  # the same records again, under new names
        shutil.copy(EXAMPLE_DATA / "clicks" / name, tmp_path / "data" / "clicks" / f"again-{name}")
    mount(["--bind", str(catalog_dir)], catalog_dir)
    remount = subprocess.run(["mount", "-o", "remount,ro,bind", str(catalog_dir)], check=False, capture_output=True, text=True)
    if remount.returncode:
        pytest.skip(f"cannot remount read-only here ({remount.stderr.strip()})")

    failed = cli(RUN, tmp_path)
    text = failed.stdout + failed.stderr
    assert failed.returncode == 1, text
    assert f"Iceberg catalog 'shared' (sql, sqlite:///{catalog_dir / 'catalog.db'}) refuses access (committing to the table)" in text, text
    assert "readonly database" in text
    assert "conflicting" not in text and "internal error" not in text and "Traceback" not in text
    [pending] = json.loads(cli(["inspect-commits", "job.yaml", "--json"], tmp_path).stdout)
    assert (pending["dataset"], pending["attempts"], pending["fault"]) == ("clicks", 1, "environment")

    subprocess.run(["umount", str(catalog_dir)], check=True)  # writable again
    assert cli(RUN, tmp_path).returncode == 0
    from pyiceberg.catalog import load_catalog

    table = load_catalog("shared", type="sql", uri=f"sqlite:///{catalog_dir / 'catalog.db'}").load_table("db.clicks")
    counts = table_ids(table)
    assert set(Counter(counts.values())) == {1, 2}, "the copied files' records twice, each other record once"


def test_only_a_busy_database_or_a_lost_race_is_retried_as_a_conflict() -> None:
    from sqlalchemy.exc import IntegrityError, OperationalError

    assert retryable(OperationalError("UPDATE", {}, Exception("database is locked")))
    assert retryable(IntegrityError("INSERT", {}, Exception("UNIQUE constraint failed: iceberg_tables.table_name")))
    assert not retryable(OperationalError("UPDATE", {}, Exception("attempt to write a readonly database")))
    assert not retryable(OperationalError("connect", {}, Exception("connection failed: Connection refused")))
    assert catalog_label({"name": "c", "type": "sql", "uri": "postgresql://me:s3cret@db:5432/cat"}) == \
        "'c' (sql, postgresql://me:***@db:5432/cat)"
