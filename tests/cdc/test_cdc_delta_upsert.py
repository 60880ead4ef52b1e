"""postgres_cdc into a Delta table kept equal to the source by key (`publisher: {class: delta, mode: upsert}`): after
every run — killed at a commit boundary or not — the table read back by delta-rs and by DuckDB (over the files its
log lists) holds exactly the source table's rows (`SELECT … ORDER BY id`), each Delta commit is one MERGE carrying
the commit's id and the app transaction, and the slot stands at the committed watermark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cdc.cdc_jobs import PASSWORD_ENV, cdc_job, run
from cdc.test_cdc_iceberg_upsert import SETUP, equal_after_every_run, killed_at_each_boundary, truncates_apply
from cdc.test_cdc_iceberg_upsert import assert_equal as equal
from support.jobs import run_cli, write_job

from gobblin_py.demo.pg_server import PASSWORD
from gobblin_py.state.store import StateStore

deltalake = pytest.importorskip("deltalake")
duckdb = pytest.importorskip("duckdb")

COLUMNS = ("id", "owner", "balance", "note")


def upsert_job(tmp: Path, pg: Any, db: str, **publisher: Any) -> dict[str, Any]:
    job = cdc_job(tmp, pg, db, tables=["public.acct"], create_publication=True)
    job["writer"] = {"class": "parquet"}
    settings = {"class": "delta", "table_uri": str(tmp / "lake" / "{dataset}"), "mode": "upsert", "key": ["id"],
                "order_by": ["_lsn", "_seq"], "delete_when": {"column": "_op", "equals": ["delete"]},
                "truncate_when": {"column": "_op", "equals": ["truncate"]}, **publisher}
    job["publisher"] = {k: v for k, v in settings.items() if v is not None}
    return job


def table(tmp: Path) -> Any:
    return deltalake.DeltaTable(str(tmp / "lake" / "public.acct"))


def table_rows(tmp: Path) -> list[tuple[Any, ...]]:
    """The table's rows as delta-rs reads them; DuckDB, over the Parquet files the log lists, reads the same."""
    t = table(tmp)
    rows = sorted(tuple(r[c] for c in COLUMNS) for r in t.to_pyarrow_table(columns=list(COLUMNS)).to_pylist())
    files = t.file_uris()
    seen = duckdb.sql(f"SELECT {', '.join(COLUMNS)} FROM read_parquet({files!r}, union_by_name = true) ORDER BY id"
                      ).fetchall() if files else []
    assert seen == rows, "DuckDB reads other rows than delta-rs"
    return rows


def assert_equal(tmp: Path, conn: Any) -> None:
    equal(tmp, conn, table_rows)


def merges(tmp: Path) -> list[dict[str, Any]]:
    """The table's commits that applied a run's changes (newest first)."""
    return [h for h in table(tmp).history() if "gobblin-py.upsert" in h]


def test_the_table_equals_the_source_by_key_after_every_run(tmp_path: Path, pg: Any, db: str) -> None:
    """Inserts, updates (a key several times in one transaction), deletes, a key deleted and inserted again, and a
    primary key updated: one MERGE per run, carrying the commit id and the app's next transaction version."""
    conn = pg.connect(db)
    conn.execute(SETUP)

    def key_update(round_: int) -> None:
        if round_ == 2:  # a primary key updated: the old key deleted, the new one inserted
            conn.execute("UPDATE public.acct SET id = 500 WHERE id = (SELECT min(id) FROM public.acct)")

    equal_after_every_run(tmp_path, conn, upsert_job(tmp_path, pg, db), table_rows, key_update)
    applied = merges(tmp_path)
    assert len(applied) == 4 and all(h["operation"] in ("MERGE", "WRITE") for h in applied)
    assert len({h["gobblin-py.commit-id"] for h in applied}) == 4
    assert table(tmp_path).transaction_version("gobblin-py/c/public.acct") == 4
    assert 500 in [r[0] for r in table_rows(tmp_path)]


def test_a_truncate_empties_the_table_and_the_changes_after_it_apply(tmp_path: Path, pg: Any, db: str) -> None:
    """TRUNCATE inside a transaction between inserts and updates: what the table held before it goes, the changes
    after it (in `_lsn, _seq`) stay, in the same MERGE; a truncate alone leaves the table empty."""
    conn = pg.connect(db)
    conn.execute(SETUP)
    truncates_apply(tmp_path, conn, upsert_job(tmp_path, pg, db), table_rows)
    assert [h["operation"] for h in merges(tmp_path)] == ["MERGE", "MERGE", "MERGE"]


@pytest.mark.crash
def test_killed_at_every_commit_boundary_the_table_still_equals_the_source(tmp_path_factory: Any, pg: Any, db: str) -> None:
    """SIGKILL at each boundary of the sequence (record written; the MERGE done; the watermarks; the slot's advance;
    during the recovery of a killed commit), then a run: nothing lost, nothing doubled, one MERGE per commit."""
    conn = pg.connect(db)
    conn.execute(SETUP)
    tmp = tmp_path_factory.mktemp("cdc-delta-upsert")
    killed_at_each_boundary(tmp, conn, upsert_job(tmp, pg, db), table_rows)
    ids = [h["gobblin-py.commit-id"] for h in merges(tmp)]
    assert len(ids) == len(set(ids)), "a commit was merged twice"


@pytest.mark.parametrize("missing", ["truncate_when", "delete_when"])
def test_without_the_change_markers_the_job_is_refused_before_anything_runs(tmp_path: Path, pg: Any, db: str,
                                                                            missing: str) -> None:
    from gobblin_py.config import load_job
    from gobblin_py.errors import ConfigError

    conn = pg.connect(db)
    conn.execute(SETUP)
    job = upsert_job(tmp_path, pg, db, **{missing: None})
    with pytest.raises(ConfigError) as refused:
        load_job(write_job(tmp_path, job))
    marker = missing.removesuffix("_when")
    assert f"publisher.{missing}" in str(refused.value) and f"{missing}: {{column: _op, equals: [{marker}]}}" in str(refused.value)
    assert not (tmp_path / "lake").exists()


def test_a_key_column_the_output_lacks_fails_the_dataset_naming_it_and_moves_nothing(tmp_path: Path, pg: Any, db: str) -> None:
    conn = pg.connect(db)
    conn.execute(SETUP)
    done = run(tmp_path, upsert_job(tmp_path, pg, db, key=["acct_id"]))
    assert not done.succeeded
    assert "publisher.key names column 'acct_id'" in done.datasets[0].message
    assert not (tmp_path / "lake" / "public.acct").exists() or not table(tmp_path).file_uris()
    assert StateStore(tmp_path / "work", "c").watermarks() == {}


def test_another_key_or_mode_than_the_last_commits_is_refused(tmp_path: Path, pg: Any, db: str) -> None:
    """The mode and key are pinned with each commit: a job switched to another key (or to append) would no longer
    match the rows the table holds, and is refused naming both, the table untouched; put back, it runs on."""
    conn = pg.connect(db)
    conn.execute(SETUP)
    assert run(tmp_path, upsert_job(tmp_path, pg, db)).succeeded
    conn.execute("UPDATE public.acct SET balance = 0 WHERE id < 5")
    before = table(tmp_path).version()
    for other in ({"key": ["owner"]}, {"mode": "append", "key": None, "order_by": None, "delete_when": None,
                                       "truncate_when": None}):
        done = run(tmp_path, upsert_job(tmp_path, pg, db, **other))
        assert not done.succeeded
        assert "kept it as {'mode': 'upsert', 'key': ['id']}" in done.datasets[0].message, done.datasets[0].message
        assert table(tmp_path).version() == before
    done = run(tmp_path, upsert_job(tmp_path, pg, db))
    assert done.succeeded, done.error
    assert_equal(tmp_path, conn)


def _all_rows(tmp: Path) -> list[dict[str, Any]]:
    """Every column of every row, as delta-rs reads the table."""
    return sorted(table(tmp).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])


def test_a_column_dropped_at_the_source_stays_in_the_table_and_the_changes_after_it_merge(
        tmp_path: Path, pg: Any, db: str) -> None:
    """The source drops a column (postgres_cdc goes on with the others, as an Iceberg upsert table keeps it): the
    Delta table keeps it too, NULL in every row a later change wrote, and the changes after the drop are merged.
    Before the fix every later commit of the table was refused ("column 'note' is not in this run's output … drop it
    from the table first", which delta-rs cannot do without column mapping): the table stayed behind its source for
    good, no remedy of the CLI's applying (the CDC world into Delta, seed 1047426155)."""
    conn = pg.connect(db)
    conn.execute(SETUP)
    conn.execute("UPDATE public.acct SET note = 'kept' WHERE id <= 3")
    assert run(tmp_path, upsert_job(tmp_path, pg, db)).succeeded
    conn.execute("ALTER TABLE public.acct DROP COLUMN note")
    conn.execute("UPDATE public.acct SET balance = -1 WHERE id IN (1, 7); DELETE FROM public.acct WHERE id = 8;"
                 "INSERT INTO public.acct VALUES (99, 'new', 5)")
    done = run(tmp_path, upsert_job(tmp_path, pg, db))
    assert done.succeeded, [(d.dataset, d.message) for d in done.datasets]
    rows = _all_rows(tmp_path)
    source = [tuple(r) for r in conn.execute("SELECT id, owner, balance FROM public.acct ORDER BY id").fetchall()]
    assert [(r["id"], r["owner"], r["balance"]) for r in rows] == source
    notes = {r["id"]: r["note"] for r in rows}
    assert notes[1] is None and notes[99] is None and notes[2] == "kept"  # changed rows NULL, the others as they were


def test_after_a_retype_and_a_state_reset_the_snapshot_replaces_the_table_with_its_columns(
        tmp_path: Path, pg: Any, db: str) -> None:
    """`ALTER COLUMN … TYPE` is refused by postgres_cdc naming `state reset`; the reset's snapshot begins with a
    truncate, so its commit replaces every row, and the table takes the run's columns with it (a bigint where it held
    an int), values past the old type's range included. Before the fix the commit was refused ("a type change is not
    merged") after the remedy the source named, and no remedy of the CLI's could bring the table back (the CDC worlds
    into Delta, seeds 266110108 and 2205141734)."""
    conn = pg.connect(db)
    conn.execute(SETUP.replace("balance bigint", "balance int"))
    assert run(tmp_path, upsert_job(tmp_path, pg, db)).succeeded
    conn.execute("ALTER TABLE public.acct ALTER COLUMN balance TYPE bigint")
    conn.execute(f"UPDATE public.acct SET balance = {2**40} WHERE id = 4")
    done = run(tmp_path, upsert_job(tmp_path, pg, db))
    assert not done.succeeded and "state reset JOB.yaml --dataset public.acct" in repr(done.datasets[0])
    reset = run_cli("state", "reset", "job.yaml", "--dataset", "public.acct", "--yes", cwd=tmp_path,
                    env={PASSWORD_ENV: PASSWORD})
    assert reset.returncode == 0, reset.stdout + reset.stderr
    done = run(tmp_path, upsert_job(tmp_path, pg, db))
    assert done.succeeded, [(d.dataset, d.message) for d in done.datasets]
    assert_equal(tmp_path, conn)
    assert {f.name: str(f.type) for f in table(tmp_path).schema().fields}["balance"] == 'PrimitiveType("long")'
    conn.execute("UPDATE public.acct SET balance = balance + 1 WHERE id = 4")  # the stream goes on into the new column
    assert run(tmp_path, upsert_job(tmp_path, pg, db)).succeeded
    assert_equal(tmp_path, conn)
    applied = merges(tmp_path)
    assert len({h["gobblin-py.commit-id"] for h in applied}) == len(applied)


@pytest.mark.crash
def test_killed_between_the_columns_commit_and_the_merge_the_next_run_merges_once(tmp_path: Path, pg: Any, db: str) -> None:
    """A column added at the source: the commit adds it to the table in a metadata commit of its own, then merges.
    SIGKILLed between the two (`delta.columns_added`), the next run finds the column there, merges the changes once,
    and the table equals the source with the new column."""
    from gobblin_py.builtin.publishers.delta.publisher import COLUMNS_POINT
    from gobblin_py.testing.crash import SIGKILLED

    conn = pg.connect(db)
    conn.execute(SETUP)
    write_job(tmp_path, upsert_job(tmp_path, pg, db))
    env = {PASSWORD_ENV: PASSWORD}
    assert run_cli("run", "job.yaml", "--in-process", cwd=tmp_path, env=env).returncode == 0
    conn.execute("ALTER TABLE public.acct ADD COLUMN extra int")
    conn.execute("UPDATE public.acct SET extra = id * 2, balance = 0 WHERE id <= 5; DELETE FROM public.acct WHERE id = 9")
    killed = run_cli("run", "job.yaml", "--in-process", cwd=tmp_path, env={**env, "GOBBLIN_PY_CRASH_AT": COLUMNS_POINT})
    assert killed.returncode == SIGKILLED, killed.stdout + killed.stderr
    assert "extra" in [f.name for f in table(tmp_path).schema().fields] and len(merges(tmp_path)) == 1  # added, not merged
    again = run_cli("run", "job.yaml", "--in-process", cwd=tmp_path, env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    rows = {r["id"]: (r["owner"], r["balance"], r["extra"]) for r in _all_rows(tmp_path)}
    assert rows == {r[0]: tuple(r[1:]) for r in conn.execute("SELECT id, owner, balance, extra FROM public.acct").fetchall()}
    ids = [h["gobblin-py.commit-id"] for h in merges(tmp_path)]
    assert len(ids) == 2 == len(set(ids))
