"""postgres_cdc into an Iceberg table kept equal to the source by key (`mode: upsert`): after every run — killed at
commit points or not — the table read back with pyiceberg holds exactly the source table's rows (`SELECT … ORDER BY
id`), and the slot stands at the committed watermark."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cdc.cdc_jobs import cdc_job, run, slot_position
from support.jobs import write_job

from gobblin_py.state.store import StateStore
from gobblin_py.testing.crash import SIGKILLED, cli

SETUP = """
CREATE TABLE public.acct (id int PRIMARY KEY, owner text NOT NULL, balance bigint, note text);
INSERT INTO public.acct SELECT i, 'o' || i, i * 10, NULL FROM generate_series(1, 40) AS i;
"""


def upsert_job(tmp: Path, pg: Any, db: str) -> dict[str, Any]:
    job = cdc_job(tmp, pg, db, tables=["public.acct"], create_publication=True)
    job["writer"] = {"class": "parquet"}
    job["publisher"] = {"class": "iceberg", "table": "db.acct", "warehouse": str(tmp / "warehouse"), "mode": "upsert",
                        "key": ["id"], "order_by": ["_lsn", "_seq"],
                        "delete_when": {"column": "_op", "equals": ["delete"]},
                        "truncate_when": {"column": "_op", "equals": ["truncate"]}}
    return job


def table_rows(tmp: Path) -> list[tuple[Any, ...]]:
    from pyiceberg.catalog import load_catalog

    catalog = load_catalog("gobblin_py", type="sql", uri=f"sqlite:///{tmp / 'work' / 'iceberg' / 'catalog.db'}")
    rows = catalog.load_table("db.acct").scan(selected_fields=("id", "owner", "balance", "note")).to_arrow().to_pylist()
    return sorted((r["id"], r["owner"], r["balance"], r["note"]) for r in rows)


def source_rows(conn: Any) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in conn.execute("SELECT id, owner, balance, note FROM public.acct ORDER BY id").fetchall()]


def change(conn: Any, rng: random.Random, next_id: list[int]) -> None:
    """A few transactions of random inserts, updates (a key several times in one), deletes and a re-insert."""
    for _ in range(rng.randint(2, 5)):
        with conn.transaction():
            ids = [r[0] for r in conn.execute("SELECT id FROM public.acct").fetchall()]
            for _ in range(rng.randint(1, 6)):
                what = rng.random()
                if what < 0.3 or not ids:
                    conn.execute("INSERT INTO public.acct VALUES (%s, %s, %s, %s)",
                                 (next_id[0], f"n{next_id[0]}", rng.randint(0, 999), None))
                    ids.append(next_id[0])
                    next_id[0] += 1
                elif what < 0.75:
                    key = rng.choice(ids)
                    for n in range(rng.randint(1, 3)):  # the same key updated again in the same transaction
                        conn.execute("UPDATE public.acct SET balance = balance + %s, note = %s WHERE id = %s",
                                     (n + 1, f"t{n}", key))
                elif what < 0.9:
                    key = ids.pop(rng.randrange(len(ids)))
                    conn.execute("DELETE FROM public.acct WHERE id = %s", (key,))
                else:
                    key = rng.choice(ids)  # deleted and inserted again, other values
                    conn.execute("DELETE FROM public.acct WHERE id = %s", (key,))
                    conn.execute("INSERT INTO public.acct VALUES (%s, %s, %s, %s)", (key, f"again{key}", -1, "re"))


def assert_equal(tmp: Path, conn: Any, rows: Callable[[Path], list[tuple[Any, ...]]] | None = None) -> None:
    """The table (read by `rows`, default pyiceberg) holds the source's rows, and the slot is at the watermark."""
    assert (rows or table_rows)(tmp) == source_rows(conn)
    marks = StateStore(tmp / "work", "c").watermarks()
    assert slot_position(conn) == min(int(m["lsn"]) for m in marks.values())


def test_the_table_equals_the_source_by_key_after_every_run(tmp_path: Path, pg: Any, db: str) -> None:
    pytest.importorskip("pyiceberg")
    conn = pg.connect(db)
    conn.execute(SETUP)
    equal_after_every_run(tmp_path, conn, upsert_job(tmp_path, pg, db), table_rows)


def equal_after_every_run(tmp: Path, conn: Any, job: dict[str, Any], rows: Callable[[Path], list[tuple[Any, ...]]],
                          before_run: Callable[[int], None] = lambda round_: None) -> None:
    """Four runs, random changes before each but the first (`before_run(round)` too): after each, the table (read by
    `rows`) equals the source."""
    rng, next_id = random.Random(3), [1000]
    for round_ in range(4):
        if round_:
            change(conn, rng, next_id)
        before_run(round_)
        done = run(tmp, job)
        assert done.succeeded, done.error
        assert_equal(tmp, conn, rows)


def test_a_truncate_empties_the_table_and_the_changes_after_it_apply(tmp_path: Path, pg: Any, db: str) -> None:
    """TRUNCATE between runs, and inside a transaction between inserts and updates: what the table held before the
    commit's last truncate goes, the changes after it (in `_lsn, _seq`) stay, in one snapshot."""
    pytest.importorskip("pyiceberg")
    conn = pg.connect(db)
    conn.execute(SETUP)
    truncates_apply(tmp_path, conn, upsert_job(tmp_path, pg, db), table_rows)


def truncates_apply(tmp: Path, conn: Any, job: dict[str, Any], rows: Callable[[Path], list[tuple[Any, ...]]]) -> None:
    """TRUNCATE inside a transaction between inserts and updates, then alone: after each run the table (read by
    `rows`) holds only what came after the last truncate."""
    assert run(tmp, job).succeeded
    assert_equal(tmp, conn, rows)
    with conn.transaction():
        conn.execute("INSERT INTO public.acct VALUES (100, 'before', 1, NULL)")
        conn.execute("UPDATE public.acct SET note = 'gone' WHERE id = 3")
        conn.execute("TRUNCATE public.acct")
        conn.execute("INSERT INTO public.acct VALUES (3, 'after', 2, NULL), (101, 'after', 3, NULL)")
        conn.execute("UPDATE public.acct SET balance = 30 WHERE id = 3")
    conn.execute("INSERT INTO public.acct VALUES (102, 'later', 4, NULL)")
    done = run(tmp, job)
    assert done.succeeded, done.error
    assert_equal(tmp, conn, rows)
    assert [r[0] for r in rows(tmp)] == [3, 101, 102]
    conn.execute("TRUNCATE public.acct")  # a truncate alone: the table ends empty
    done = run(tmp, job)
    assert done.succeeded, done.error
    assert rows(tmp) == [] == source_rows(conn)


def test_a_table_snapshotted_again_after_a_reset_loses_the_rows_deleted_meanwhile(tmp_path: Path, pg: Any, db: str) -> None:
    """`state reset` then deletes: the new snapshot is not a change stream, so nothing says the rows went; its leading
    truncate record empties the table before the snapshot's rows, and the table equals the source again."""
    from support.jobs import run_cli

    pytest.importorskip("pyiceberg")
    conn = pg.connect(db)
    conn.execute(SETUP)
    job = upsert_job(tmp_path, pg, db)
    assert run(tmp_path, job).succeeded
    done = run_cli("state", "reset", "job.yaml", "--dataset", "public.acct", "--yes", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    conn.execute("DELETE FROM public.acct WHERE id <= 10; UPDATE public.acct SET note = 'x' WHERE id = 20")
    done = run(tmp_path, job)
    assert done.succeeded, done.error
    assert_equal(tmp_path, conn)
    assert [r[0] for r in table_rows(tmp_path)] == list(range(11, 41))


@pytest.mark.crash
def test_killed_at_every_commit_point_the_table_still_equals_the_source(tmp_path_factory: Any, pg: Any, db: str) -> None:
    pytest.importorskip("pyiceberg")
    conn = pg.connect(db)
    conn.execute(SETUP)
    tmp = tmp_path_factory.mktemp("cdc-upsert")
    killed_at_each_boundary(tmp, conn, upsert_job(tmp, pg, db), table_rows)


def killed_at_each_boundary(tmp: Path, conn: Any, job: dict[str, Any], rows: Callable[[Path], list[tuple[Any, ...]]]) -> None:
    """Changes, then the CLI killed at a boundary of the sequence, then a run: the table (read by `rows`) equals the
    source, for each boundary."""
    rng, next_id = random.Random(11), [1000]
    write_job(tmp, job)
    assert cli(["run", "job.yaml", "--in-process"], tmp).returncode == 0
    # the sequence: the table's commit, the watermarks, the slot's advance, the state. Every point of each is killed
    # in tests/cdc/test_cdc_crash.py and tests/commit/test_iceberg_upsert_crash.py; here, the boundaries between them
    for point in ["commit.after_store_write", *(f"commit.after_step:{n}" for n in (1, 2, 3)), "recovery.before_commit"]:
        change(conn, rng, next_id)
        if point.startswith("recovery."):
            assert cli(["run", "job.yaml", "--in-process"], tmp, crash_at="commit.after_step:1").returncode == SIGKILLED
        crashed = cli(["run", "job.yaml", "--in-process"], tmp, crash_at=point)
        assert crashed.returncode == SIGKILLED, f"{point}: {crashed.stdout}{crashed.stderr}"
        again = cli(["run", "job.yaml", "--in-process"], tmp)
        assert again.returncode == 0, f"{point}: {again.stdout}{again.stderr}"
        assert_equal(tmp, conn, rows)


@pytest.mark.crash
def test_continuous_runs_killed_at_random_while_the_source_changes_keep_the_table_equal(
        tmp_path_factory: Any, pg: Any, db: str) -> None:
    """`run --continuous` (a checkpoint every 0.3 s) SIGKILLed at random times and at commit points while another
    session changes the table all along: a reader at each kill sees every key at most once, and once the changes stop
    one more run leaves the table equal to the source and the slot at the committed watermark."""
    import os
    import subprocess
    import sys
    import threading
    import time

    from gobblin_py.crashpoints import ENV, WINDOW_ENV

    pytest.importorskip("pyiceberg")
    conn = pg.connect(db)
    conn.execute(SETUP)
    tmp = tmp_path_factory.mktemp("cdc-continuous")
    job = upsert_job(tmp, pg, db)
    job["job"]["checkpoint_interval"] = 0.3
    write_job(tmp, job)
    rng = random.Random(29)
    stop = threading.Event()
    failed: list[BaseException] = []

    def keep_changing() -> None:
        writer, local, next_id = pg.connect(db), random.Random(7), [1000]
        try:
            while not stop.is_set():
                change(writer, local, next_id)
                time.sleep(0.05)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failed.append(exc)
        finally:
            writer.close()

    events = tmp / "work" / "events" / "c.jsonl"

    def checkpoints() -> int:
        return events.read_text().count('"CheckpointCommitted"') if events.exists() else 0

    thread = threading.Thread(target=keep_changing, daemon=True)
    thread.start()
    killed = 0
    try:
        for n, crash_at in enumerate([None, "commit.after_step:1", None, "commit.after_step:3", None, None]):
            env = {k: v for k, v in os.environ.items() if k not in (ENV, WINDOW_ENV)}
            env[WINDOW_ENV] = "0.02"  # every crash point pauses: a random kill lands in a commit more often
            if crash_at:
                env[ENV] = crash_at
            seen = checkpoints()
            proc = subprocess.Popen([sys.executable, "-m", "gobblin_py.cli.main", "run", "job.yaml", "--continuous",
                                     "--in-process"], cwd=tmp, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            try:
                deadline = time.monotonic() + 120
                while crash_at is None and checkpoints() <= seen and proc.poll() is None:
                    assert time.monotonic() < deadline, "no checkpoint committed in 120 s"
                    time.sleep(0.05)
                if crash_at is None:
                    time.sleep(rng.uniform(0.0, 1.2))
                    proc.kill()
                proc.wait(timeout=120)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            assert proc.returncode == SIGKILLED, f"kill {n}: exit {proc.returncode}: {proc.stderr.read().decode()[-2000:]}"
            proc.stderr.close()
            killed += 1
            keys = [r[0] for r in table_rows(tmp)]
            assert len(keys) == len(set(keys)), f"kill {n}: a key is in the table twice"
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not failed, failed
    assert killed == 6 and checkpoints() >= 4, f"{checkpoints()} checkpoints committed in 6 continuous runs"
    again = cli(["run", "job.yaml", "--in-process"], tmp)
    assert again.returncode == 0, again.stdout + again.stderr
    assert_equal(tmp, conn)


def docs_upsert_example() -> dict[str, Any]:
    """The `writer:` and `publisher:` of docs/sources/postgres_cdc.md's Iceberg upsert example, as the page shows them."""
    import re

    import yaml

    page = (Path(__file__).resolve().parents[2] / "docs" / "sources" / "postgres_cdc.md").read_text()
    section = page.split("## Tables kept equal to the source: Iceberg upsert", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.DOTALL)
    assert block is not None, "the upsert example is gone from docs/sources/postgres_cdc.md"
    return yaml.safe_load(block.group(1))


def test_the_docs_cdc_upsert_example_runs_as_written(tmp_path: Path, pg: Any, db: str) -> None:
    """docs/sources/postgres_cdc.md's example (`table: db.{dataset}`) with two tables: before the fix every run was
    refused ('db.public.orders': a SQL catalog has one-level namespaces). Each table lands in `db.public_<table>` and
    equals the source by key after a first load and after inserts, updates, deletes and a truncate."""
    from pyiceberg.catalog import load_catalog

    conn = pg.connect(db)
    conn.execute("CREATE TABLE public.orders (id int PRIMARY KEY, item text, qty int);"
                 "CREATE TABLE public.audit (id bigint PRIMARY KEY, what text);"
                 "INSERT INTO public.orders SELECT i, 'i' || i, i FROM generate_series(1, 20) AS i;"
                 "INSERT INTO public.audit SELECT i, 'a' || i FROM generate_series(1, 5) AS i")
    job = cdc_job(tmp_path, pg, db, tables=["public.orders", "public.audit"], create_publication=True)
    job.update(docs_upsert_example())
    job["publisher"]["warehouse"] = str(tmp_path / job["publisher"]["warehouse"])

    def assert_equal() -> None:
        catalog = load_catalog("gobblin_py", type="sql", uri=f"sqlite:///{tmp_path / 'work' / 'iceberg' / 'catalog.db'}")
        for table, columns in (("orders", "id, item, qty"), ("audit", "id, what")):
            names = [c.strip() for c in columns.split(",")]
            rows = catalog.load_table(f"db.public_{table}").scan(selected_fields=tuple(names)).to_arrow().to_pylist()
            assert sorted(tuple(r[c] for c in names) for r in rows) == \
                [tuple(r) for r in conn.execute(f"SELECT {columns} FROM public.{table} ORDER BY id").fetchall()]

    done = run(tmp_path, job)
    assert done.succeeded, [(d.dataset, d.message) for d in done.datasets]
    assert_equal()
    conn.execute("UPDATE public.orders SET qty = 0 WHERE id <= 3; DELETE FROM public.orders WHERE id > 18;"
                 "INSERT INTO public.audit VALUES (6, 'six'); TRUNCATE public.audit; INSERT INTO public.audit VALUES (7, 'x')")
    done = run(tmp_path, job)
    assert done.succeeded, [(d.dataset, d.message) for d in done.datasets]
    assert_equal()


@pytest.mark.parametrize("missing", ["truncate_when", "delete_when"])
def test_without_the_change_markers_the_job_is_refused_before_anything_runs(tmp_path: Path, pg: Any, db: str,
                                                                            missing: str) -> None:
    """A CDC source's deletes and truncates are changes an upsert table must apply as such. Without `delete_when` a
    delete was upserted as a row holding only the key (the deleted row kept, every run committed); without
    `truncate_when` the first load failed on the snapshot's leading truncate, advising a `required_fields` policy
    that would drop every truncate. Now the job is refused at validation, naming the exact setting; with it given,
    the same job runs and the table equals the source."""
    from gobblin_py.config import load_job
    from gobblin_py.errors import ConfigError

    conn = pg.connect(db)
    conn.execute(SETUP)
    job = upsert_job(tmp_path, pg, db)
    del job["publisher"][missing]
    with pytest.raises(ConfigError) as refused:
        load_job(write_job(tmp_path, job))
    marker = missing.removesuffix("_when")
    assert f"publisher.{missing}" in str(refused.value) and f"{missing}: {{column: _op, equals: [{marker}]}}" in str(refused.value)
    assert "required_fields" not in str(refused.value)
    assert not (tmp_path / "work" / "iceberg").exists()
    conn.execute("DELETE FROM public.acct WHERE id = 3")
    done = run(tmp_path, upsert_job(tmp_path, pg, db))
    assert done.succeeded, done.error
    assert_equal(tmp_path, conn)
