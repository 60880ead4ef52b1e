"""No secret reaches a file the tool writes: a PostgreSQL → Parquet → Iceberg job given its secrets the ways the docs
say (the database password through `password_env`, a catalog credential through pyiceberg's environment), killed with
its commit record pending, then run again: neither secret is in any file under the job's directories (commit
records, state, events, the catalog, data, error files) or in what the command printed."""

from __future__ import annotations

from pathlib import Path

import pytest
from jdbc.jdbc_jobs import jdbc_job
from support.jobs import write_job

from gobblin_py.demo.pg_server import PASSWORD
from gobblin_py.testing.crash import SIGKILLED, cli

pytest.importorskip("pyiceberg")
CATALOG_SECRET = "catalog-credential-7f3a91"


def _leaks(root: Path, secrets: list[str]) -> list[str]:
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        found += [f"{path.relative_to(root)} holds {s[:3]}…" for s in secrets if s.encode() in data]
    return found


def test_no_secret_in_any_file_the_job_writes_or_in_its_output(tmp_path: Path, pg, db, monkeypatch) -> None:
    with pg.connect(db) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, ts timestamptz NOT NULL, v text)")
        conn.execute("INSERT INTO t SELECT i, '2026-01-01'::timestamptz + i * interval '1 minute', 'v' || i "
                     "FROM generate_series(1, 500) i")
    job = jdbc_job(tmp_path, pg, db, [{"table": "public.t", "watermark_column": "ts", "primary_key": "id"}])
    job["writer"] = {"class": "parquet"}
    job["publisher"] = {"class": "iceberg", "table": "db.t", "warehouse": str(tmp_path / "warehouse")}
    job["job"]["commit_parallelism"] = 1
    write_job(tmp_path, job)
    monkeypatch.setenv("PYICEBERG_CATALOG__GOBBLIN_PY__CREDENTIAL", CATALOG_SECRET)  # the children inherit it
    secrets = [PASSWORD, CATALOG_SECRET]
    run = ["run", "job.yaml", "--in-process"]
    killed = cli(run, tmp_path, crash_at="commit.after_step:1")
    assert killed.returncode == SIGKILLED, killed.stdout + killed.stderr
    assert list((tmp_path / "work" / "commits").rglob("*.json")), "a commit record is pending"
    assert not _leaks(tmp_path, secrets), _leaks(tmp_path, secrets)
    done = cli(run, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not any(s in done.stdout + done.stderr + killed.stdout + killed.stderr for s in secrets)
    assert not _leaks(tmp_path, secrets), _leaks(tmp_path, secrets)
    assert list((tmp_path / "warehouse").rglob("*.parquet")), "the job published its rows"


def test_a_password_is_cut_from_a_drivers_message_also_as_its_connection_url_carries_it() -> None:
    """ConnectorX takes the password inside a URL, percent-quoted; a message repeating that URL kept a password with
    a character URLs quote (`@`, `/`, `%`) whole, since only its plain form was cut."""
    from gobblin_py.errors import scrub

    password = "p@ss/w%rd"
    said = "cannot connect to mysql://gobblin:p%40ss%2Fw%25rd@127.0.0.1:3306/db; password p@ss/w%rd refused"
    assert scrub(said, password) == "cannot connect to mysql://gobblin:***@127.0.0.1:3306/db; password *** refused"
    assert scrub(said, None) == said
