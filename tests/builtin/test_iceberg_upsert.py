"""The `iceberg` publisher in upsert mode (`mode: upsert, key: [id]`): a files-source job whose records are changes
(`op`, `updated_at`) keeps a table equal to its source by key, one snapshot per commit, read back by pyiceberg and by
DuckDB (the Parquet files pyiceberg's manifests list; its `iceberg` extension too where it is installed) and compared
row by row by key with the state the changes describe."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.jobs import run_cli, write_job

from gobblin_py.api import DatasetCommit, OutputFile
from gobblin_py.builtin.publishers.iceberg.publisher import IcebergPublisher
from gobblin_py.builtin.publishers.iceberg.settings import default_catalog
from gobblin_py.builtin.publishers.iceberg.upsert import UpsertSpec, check_changes, read_changes, write_uuid
from gobblin_py.config import load_job
from gobblin_py.errors import CommitError, ConfigError
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import DatasetStatus, JobRunner
from gobblin_py.state.store import StateStore

pytest.importorskip("pyiceberg")
duckdb = pytest.importorskip("duckdb")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

COMMIT_ID = "gobblin-py.commit-id"
SCHEMA = {"type": "record", "name": "Customer", "fields": [
    {"name": "id", "type": "long"},
    {"name": "name", "type": ["null", "string"], "default": None},
    {"name": "city", "type": ["null", "string"], "default": None},
    {"name": "op", "type": "string"},
    {"name": "updated_at", "type": "long"}]}
FIRST = [{"id": i, "name": f"n{i}", "city": "c0", "op": "c", "updated_at": 1} for i in range(1, 41)]
SECOND = ([{"id": i, "name": f"n{i}-v2", "city": "c1", "op": "u", "updated_at": 2} for i in range(1, 41, 3)]
          + [{"id": i, "name": f"n{i}-v3", "city": "c2", "op": "u", "updated_at": 3} for i in range(1, 41, 6)]
          + [{"id": i, "name": None, "city": None, "op": "d", "updated_at": 4} for i in (2, 5, 38)]
          + [{"id": i, "name": f"new{i}", "city": "c3", "op": "c", "updated_at": 2} for i in range(41, 46)])


# --- helpers the crash test shares ------------------------------------------------------------------------------------

def upsert_job(tmp: Path, **publisher: Any) -> dict:
    """A files-source job of JSON-lines changes under `tmp/data/customers`, into `db.customers` in upsert mode."""
    (tmp / "data" / "customers").mkdir(parents=True, exist_ok=True)
    (tmp / "customer.avsc").write_text(json.dumps(SCHEMA))
    settings = {"class": "iceberg", "table": "db.{dataset}", "warehouse": str(tmp / "warehouse"), "mode": "upsert",
                "key": ["id"], "order_by": ["updated_at"], "delete_when": {"column": "op", "equals": ["d"]}, **publisher}
    return {"job": {"name": "u", "work_dir": str(tmp / "work"), "max_task_retries": 1, "commit_parallelism": 1},
            "source": {"class": "files", "path": str(tmp / "data")},
            "converters": [{"class": "json_to_avro", "schema": str(tmp / "customer.avsc")}],
            "writer": {"class": "parquet"},
            "publisher": {k: v for k, v in settings.items() if v is not None}}


def write_changes(tmp: Path, name: str, rows: list[dict]) -> None:
    (tmp / "data" / "customers").mkdir(parents=True, exist_ok=True)
    (tmp / "data" / "customers" / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


def expected(*batches: list[dict]) -> dict[int, dict]:
    """The source's state after each batch in turn (one commit each): per key its change of greatest `updated_at`
    within the batch; a `d` removes the key."""
    state: dict[int, dict] = {}
    for batch in batches:
        last: dict[int, dict] = {}
        for row in sorted(batch, key=lambda r: r["updated_at"]):
            last[row["id"]] = row
        for key, row in last.items():
            if row["op"] == "d":
                state.pop(key, None)
            else:
                state[key] = row
    return state


def catalog(tmp: Path) -> Any:
    from pyiceberg.catalog import load_catalog

    return load_catalog("gobblin_py", type="sql", uri=f"sqlite:///{tmp / 'work' / 'iceberg' / 'catalog.db'}")


def _by_key(rows: list[dict], reader: str) -> dict[int, dict]:
    out: dict[int, dict] = {}
    for row in rows:
        assert row["id"] not in out, f"{reader}: key {row['id']} twice"
        out[row["id"]] = row
    return out


def read_back(table: Any) -> dict[int, dict]:
    """The table's rows by key as pyiceberg reads them, checked equal to what DuckDB reads of the same snapshot (and
    to DuckDB's `iceberg_scan` where the extension is installed); each key once."""
    ours = _by_key(table.scan().to_arrow().to_pylist(), "pyiceberg")
    tasks = list(table.scan().plan_files())
    assert all(not t.delete_files for t in tasks), "copy-on-write: no delete files"
    paths = [t.file.file_path.removeprefix("file://") for t in tasks]
    con = duckdb.connect()
    theirs = _by_key([dict(zip(("id", "name", "city", "op", "updated_at"), r)) for r in con.execute(
        "SELECT id, name, city, op, updated_at FROM read_parquet(?, union_by_name = true)", [paths]).fetchall()]
        if paths else [], "duckdb")
    assert theirs == ours
    try:
        con.execute("LOAD iceberg")
    except duckdb.Error:
        return ours  # the extension is downloaded on first use: not here, offline
    scanned = con.execute(f"SELECT id, name, city, op, updated_at FROM iceberg_scan('{table.metadata_location}')").fetchall()
    assert _by_key([dict(zip(("id", "name", "city", "op", "updated_at"), r)) for r in scanned], "duckdb iceberg") == ours
    return ours


def snapshots(table: Any) -> list[dict[str, str]]:
    return [dict(s.summary.additional_properties) for s in table.snapshots()]


def _run(tmp: Path, job: dict) -> Any:
    return JobRunner(load_job(write_job(tmp, job)), InProcessExecutor()).run()


# --- a job keeping a table equal to its source by key ---------------------------------------------------------------

def test_updates_replace_rows_deletes_remove_them_one_snapshot_per_commit(tmp_path: Path) -> None:
    write_changes(tmp_path, "c-001.jsonl", FIRST)
    first = _run(tmp_path, upsert_job(tmp_path))
    assert first.succeeded, first.error
    table = catalog(tmp_path).load_table("db.customers")
    assert read_back(table) == expected(FIRST)
    [one] = snapshots(table)
    assert one[COMMIT_ID] == f"u/{first.run_id}/customers" and table.current_snapshot().summary.operation.value == "append"
    assert json.loads(one["gobblin-py.watermarks"]) == StateStore(tmp_path / "work", "u").watermarks()["customers"]
    assert not list((tmp_path / "warehouse").rglob("*.jsonl")) and not (tmp_path / "warehouse" / "db" / "customers" / "data" / "customers").exists(), \
        "the changes are applied, not published beside the table"

    write_changes(tmp_path, "c-002.jsonl", SECOND)
    second = _run(tmp_path, upsert_job(tmp_path))
    assert second.succeeded, second.error
    table = catalog(tmp_path).load_table("db.customers")
    rows = read_back(table)
    assert rows == expected(FIRST, SECOND)
    assert rows[7]["name"] == "n7-v3" and rows[4]["name"] == "n4-v2" and rows[3]["name"] == "n3"
    assert 2 not in rows and 5 not in rows and 38 not in rows and rows[45]["name"] == "new45"
    summaries = snapshots(table)
    assert [s[COMMIT_ID] for s in summaries] == [f"u/{first.run_id}/customers", f"u/{second.run_id}/customers"]
    assert table.current_snapshot().summary.operation.value == "overwrite"
    counts = json.loads(summaries[-1]["gobblin-py.upsert"])
    assert counts["changes"] == len(SECOND) and counts["deleted"] == 3 and counts["upserted"] == 14 + 5
    assert json.loads(summaries[-1]["gobblin-py.watermarks"]).items() <= StateStore(tmp_path / "work", "u").watermarks()["customers"].items()
    assert "c-002.jsonl" in summaries[-1]["gobblin-py.watermarks"]
    uuids = {str(write_uuid(f"u/{r}/customers")) for r in (first.run_id, second.run_id)}
    named = [f["file_path"].rsplit("/", 1)[-1] for f in table.inspect.files().to_pylist()]
    assert named and all(n.removesuffix(".parquet")[-36:] in uuids for n in named), named

    again = _run(tmp_path, upsert_job(tmp_path))
    assert again.succeeded and {d.status for d in again.datasets} == {DatasetStatus.NO_NEW_DATA}
    assert len(catalog(tmp_path).load_table("db.customers").snapshots()) == 2, "no new data, no snapshot"


def test_a_range_read_again_reapplies_its_changes_and_leaves_the_same_rows(tmp_path: Path) -> None:
    """`state reset` makes the next run read both files in one commit: the last change per key over both is what the
    table already holds, so one more snapshot leaves every row as it was."""
    write_changes(tmp_path, "c-001.jsonl", FIRST)
    assert _run(tmp_path, upsert_job(tmp_path)).succeeded
    write_changes(tmp_path, "c-002.jsonl", SECOND)
    assert _run(tmp_path, upsert_job(tmp_path)).succeeded
    before = read_back(catalog(tmp_path).load_table("db.customers"))
    reset = run_cli("state", "reset", str(tmp_path / "job.yaml"), "--dataset", "customers", "--yes", cwd=tmp_path)
    assert reset.returncode == 0, reset.stdout + reset.stderr
    again = _run(tmp_path, upsert_job(tmp_path))
    assert again.succeeded, again.error
    table = catalog(tmp_path).load_table("db.customers")
    assert read_back(table) == before == expected(FIRST + SECOND)
    assert len(table.snapshots()) == 3


def test_a_key_changed_several_times_in_one_commit_keeps_its_last_change_and_a_tie_fails_closed(tmp_path: Path) -> None:
    write_changes(tmp_path, "c-001.jsonl", FIRST[:5])
    assert _run(tmp_path, upsert_job(tmp_path)).succeeded
    many = [{"id": 3, "name": f"v{n}", "city": None, "op": "u", "updated_at": n} for n in (5, 9, 2, 7)]
    many += [{"id": 4, "name": "gone", "city": None, "op": "d", "updated_at": 3},
             {"id": 4, "name": "back", "city": "x", "op": "c", "updated_at": 4}]
    write_changes(tmp_path, "c-002.jsonl", many)
    assert _run(tmp_path, upsert_job(tmp_path)).succeeded
    table = catalog(tmp_path).load_table("db.customers")
    rows = read_back(table)
    assert rows[3]["name"] == "v9" and rows[4]["name"] == "back" and rows == expected(FIRST[:5], many)

    write_changes(tmp_path, "c-003.jsonl", [{"id": 1, "name": "left", "city": None, "op": "u", "updated_at": 20},
                                            {"id": 1, "name": "right", "city": None, "op": "u", "updated_at": 20}])
    tie = _run(tmp_path, upsert_job(tmp_path))
    assert not tie.succeeded
    [d] = tie.datasets
    assert d.status is DatasetStatus.COMMIT_FAILED
    assert "key id=1 changes twice with the same updated_at (updated_at=20)" in d.message and "customers/c-003-" in d.message, d.message
    table = catalog(tmp_path).load_table("db.customers")
    assert read_back(table) == rows and len(table.snapshots()) == 2, "nothing changed"
    assert "c-003.jsonl" not in json.dumps(StateStore(tmp_path / "work", "u").watermarks()), "the watermarks did not move"


def test_without_order_by_a_key_in_two_files_of_one_commit_is_refused(tmp_path: Path) -> None:
    write_changes(tmp_path, "c-001.jsonl", FIRST[:3] + [{**FIRST[0], "name": "later", "updated_at": 9}])
    write_changes(tmp_path, "c-002.jsonl", [{**FIRST[1], "name": "other"}])
    result = _run(tmp_path, upsert_job(tmp_path, order_by=None))
    [d] = result.datasets
    assert d.status is DatasetStatus.COMMIT_FAILED and "key id=2 changes in two files of this commit" in d.message, d.message
    assert "order_by" in d.message
    assert not catalog(tmp_path).table_exists("db.customers")
    (tmp_path / "data" / "customers" / "c-002.jsonl").unlink()
    ok = _run(tmp_path, upsert_job(tmp_path, order_by=None))
    assert ok.succeeded, ok.error
    assert read_back(catalog(tmp_path).load_table("db.customers"))[1]["name"] == "later", "within one file: the last row"


# --- the changes reduced to the last per key (no job) ---------------------------------------------------------------

class _LocalIO:
    def new_input(self, uri: str) -> Any:
        class _In:
            def open(self_inner) -> Any:
                return open(uri.removeprefix("file://"), "rb")
        return _In()


def _parquet(tmp: Path, name: str, rows: list[dict], schema: Any = None) -> tuple[str, str]:
    path = tmp / name
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return f"file://{path}", name


def test_a_null_key_names_the_file_and_the_row(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    files = [_parquet(tmp_path, "a.parquet", [{"id": 1, "v": "x"}], schema),
             _parquet(tmp_path, "b.parquet", [{"id": 2, "v": "y"}, {"id": None, "v": "z"}], schema)]
    with pytest.raises(CommitError, match=r"change row 2 of b.parquet has a null key column 'id'"):
        read_changes(_LocalIO(), files, UpsertSpec(("id",)), "table db.t")


def test_identical_changes_tying_are_one_and_a_boolean_marker_deletes(tmp_path: Path) -> None:
    schema = pa.schema([("k1", pa.string()), ("k2", pa.int32()), ("seq", pa.int64()), ("gone", pa.bool_())])
    rows = [{"k1": "a", "k2": 1, "seq": 1, "gone": False}, {"k1": "a", "k2": 1, "seq": 1, "gone": False},  # re-delivered
            {"k1": "a", "k2": 2, "seq": 1, "gone": False}, {"k1": "a", "k2": 2, "seq": 2, "gone": True},
            {"k1": "b", "k2": 1, "seq": 3, "gone": None}]
    changes = read_changes(_LocalIO(), [_parquet(tmp_path, "c.parquet", rows, schema)],
                           UpsertSpec(("k1", "k2"), ("seq",), "gone", (True,)), "table db.t")
    assert changes.received == 5 and changes.deleted == 1 and changes.keys.num_rows == 3
    assert sorted(changes.upserts.to_pylist(), key=str) == sorted([rows[0], rows[4]], key=str)


def test_changes_before_a_commits_last_truncate_are_dropped_and_a_tie_with_it_is_refused(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("op", pa.string()), ("lsn", pa.int64()), ("seq", pa.int32())])
    rows = [{"id": 1, "op": "u", "lsn": 5, "seq": 0}, {"id": None, "op": "t", "lsn": 5, "seq": 1},
            {"id": 2, "op": "c", "lsn": 5, "seq": 2}, {"id": None, "op": "t", "lsn": 7, "seq": 0},
            {"id": 3, "op": "c", "lsn": 7, "seq": 1}, {"id": 2, "op": "d", "lsn": 9, "seq": 0}]
    spec = UpsertSpec(("id",), ("lsn", "seq"), "op", ("d",), "op", ("t",))
    changes = read_changes(_LocalIO(), [_parquet(tmp_path, "c.parquet", rows, schema)], spec, "table db.t")
    assert changes.truncated and changes.received == 6 and changes.deleted == 1
    assert changes.upserts.to_pylist() == [rows[4]] and sorted(changes.keys["id"].to_pylist()) == [2, 3]
    plain = read_changes(_LocalIO(), [_parquet(tmp_path, "d.parquet", [rows[0]], schema)], spec, "table db.t")
    assert not plain.truncated and not plain.empty
    tied = [*rows, {"id": 4, "op": "c", "lsn": 7, "seq": 0}]
    with pytest.raises(CommitError, match=r"change row 7 of e.parquet ties on lsn, seq with the truncate row 4"):
        read_changes(_LocalIO(), [_parquet(tmp_path, "e.parquet", tied, schema)], spec, "table db.t")
    with pytest.raises(CommitError, match=r"null key column 'id'"):  # without truncate_when, a truncate has no key
        read_changes(_LocalIO(), [_parquet(tmp_path, "f.parquet", rows, schema)], UpsertSpec(("id",), ("lsn", "seq")), "table db.t")


def test_chunk_files_are_taken_as_they_are_only_when_no_key_is_in_two_of_them(tmp_path: Path) -> None:
    """A snapshot's chunk files each rise by key over disjoint ranges, so their changes are applied without a sort; a
    key at the edge of two rising files, or anywhere in both, is still reduced to its last change."""
    schema = pa.schema([("id", pa.int64()), ("v", pa.string()), ("lsn", pa.int64()), ("seq", pa.int64()), ("op", pa.string())])
    spec = UpsertSpec(("id",), ("lsn", "seq"), "op", ("d",), "op", ("t",))

    def chunk(name: str, ids: list[int], lsn: int) -> tuple[str, str]:
        return _parquet(tmp_path, name, [{"id": i, "v": f"{name}:{i}", "lsn": lsn, "seq": i, "op": "r"} for i in ids], schema)

    def applied(*files: tuple[str, str]) -> dict[int, str]:
        changes = read_changes(_LocalIO(), list(files), spec, "table db.t")
        got = changes.upserts.to_pylist()
        assert len(got) == len({r["id"] for r in got}) == changes.keys.num_rows, "one row per key"
        return {r["id"]: r["v"] for r in got}

    assert applied(chunk("b1", [5, 6, 7, 8], 1), chunk("a1", [1, 2, 3, 4], 1)) == {i: f"{'a1' if i < 5 else 'b1'}:{i}" for i in range(1, 9)}
    assert applied(chunk("a2", [1, 2, 3, 4, 5], 1), chunk("b2", [5, 6, 7, 8], 2))[5] == "b2:5", "the edge key: its last change"
    assert applied(chunk("a3", [1, 3, 5], 2), chunk("b3", [2, 3, 6], 1)) == {1: "a3:1", 2: "b3:2", 3: "a3:3", 5: "a3:5", 6: "b3:6"}
    assert len(applied(chunk("a4", [1, 3, 5], 1), chunk("b4", [2, 4, 6], 1))) == 6, "interleaved, no key twice"
    out_of_order = [{"id": 3, "v": "after", "lsn": 9, "seq": 0, "op": "r"}, {"id": None, "v": None, "lsn": 7, "seq": 0, "op": "t"},
                    {"id": 1, "v": "before", "lsn": 5, "seq": 0, "op": "r"}]  # the truncate not first in the file
    changes = read_changes(_LocalIO(), [_parquet(tmp_path, "t.parquet", out_of_order, schema)], spec, "table db.t")
    assert changes.truncated and changes.upserts["v"].to_pylist() == ["after"]


def test_the_check_reads_the_key_and_order_columns_and_still_refuses_a_tie_of_different_rows(tmp_path: Path) -> None:
    """The publisher's check reads only the columns the reduction needs; tied changes of one key that differ in
    another column are refused by it all the same (before anything moves), identical ones are one change."""
    schema = pa.schema([("id", pa.int64()), ("v", pa.string()), ("seq", pa.int64())])
    spec = UpsertSpec(("id",), ("seq",))
    same = [{"id": 1, "v": "x", "seq": 1}, {"id": 1, "v": "x", "seq": 1}, {"id": 2, "v": "y", "seq": 1}]
    check_changes(_LocalIO(), [_parquet(tmp_path, "same.parquet", same, schema)], spec, "table db.t")
    differ = [{"id": 1, "v": "x", "seq": 1}, {"id": 2, "v": "y", "seq": 1}, {"id": 1, "v": "z", "seq": 1}]
    with pytest.raises(CommitError, match=r"key id=1 changes twice with the same seq \(seq=1\) and different values"):
        check_changes(_LocalIO(), [_parquet(tmp_path, "differ.parquet", differ, schema)], spec, "table db.t")
    truncate = [{"id": None, "v": "truncate", "seq": 0}, {"id": 1, "v": "x", "seq": 1}]  # postgres_cdc's, unmarked
    with pytest.raises(CommitError, match=r"null key column 'id'.*It is a truncate \(v = 'truncate'.*truncate_when"):
        check_changes(_LocalIO(), [_parquet(tmp_path, "truncate.parquet", truncate, schema)], spec, "table db.t")
    with pytest.raises(CommitError, match=r"publisher.order_by names column 'ts', which the job's output does not have "
                                          r"\(its columns: id, v, seq\)"):
        check_changes(_LocalIO(), [_parquet(tmp_path, "no-ts.parquet", same, schema)], UpsertSpec(("id",), ("ts",)), "table db.t")


def test_key_and_order_columns_are_checked_against_the_output(tmp_path: Path) -> None:
    files = [_parquet(tmp_path, "a.parquet", [{"id": 1, "score": 0.5}])]
    with pytest.raises(CommitError, match=r"publisher.order_by names column 'ts', which the job's output does not have"):
        read_changes(_LocalIO(), files, UpsertSpec(("id",), ("ts",)), "table db.t")
    with pytest.raises(CommitError, match=r"publisher.key column 'score' is double"):
        read_changes(_LocalIO(), files, UpsertSpec(("score",)), "table db.t")


def test_settings_refuse_an_upsert_without_key_and_upsert_keys_in_append_mode(tmp_path: Path) -> None:
    for publisher, message in (({"key": None}, "mode: upsert needs key"),
                               ({"mode": "append"}, "only apply to mode: upsert"),
                               ({"delete_when": {"column": "id", "equals": ["d"]}}, "is a key column"),
                               ({"order_by": ["id"]}, "in both key and order_by"),
                               ({"order_by": None, "truncate_when": {"column": "op", "equals": ["t"]}},
                                "truncate_when needs order_by")):
        with pytest.raises(ConfigError, match=message):
            load_job(write_job(tmp_path, upsert_job(tmp_path, **publisher)))


# --- the commit itself: replay, conflicts, another writer's changes -------------------------------------------------

def _publisher(tmp: Path, **extra: Any) -> IcebergPublisher:
    settings = IcebergPublisher.Settings.model_validate(
        {"table": "db.t", "warehouse": str(tmp / "warehouse"), "catalog": default_catalog(str(tmp / "work")),
         "mode": "upsert", "key": ["id"], "order_by": ["seq"], **extra})
    return IcebergPublisher(settings)


def _commit(tmp: Path, run: str, rows: list[dict]) -> DatasetCommit:
    out = tmp / "task-output" / run
    out.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=pa.schema([("id", pa.int64()), ("v", pa.string()), ("seq", pa.int64())])),
                   out / "part-0.parquet")
    f = OutputFile(path=str(out / "part-0.parquet"), rel_path="t/part-0.parquet", kind="data", records=len(rows),
                   size=(out / "part-0.parquet").stat().st_size, checksum="")
    return DatasetCommit("j", run, "t", f"j/{run}/t", (f,), {"k": run}, 1)


def test_a_replayed_commit_changes_nothing(tmp_path: Path) -> None:
    pub = _publisher(tmp_path)
    first = _commit(tmp_path, "r1", [{"id": i, "v": "a", "seq": 1} for i in range(10)])
    second = _commit(tmp_path, "r2", [{"id": i, "v": "b", "seq": 2} for i in range(0, 10, 2)])
    for c in (first, second):
        pub.check(c)
        pub.commit(c)
        assert pub.is_committed(c)
    table = catalog(tmp_path).load_table("db.t")
    state = table.scan().to_arrow().sort_by("id").to_pylist()
    for c in (second, first, second):  # a replay of either (a crash before the record's removal) is a no-op
        pub.commit(c)
    table = catalog(tmp_path).load_table("db.t")
    assert len(table.snapshots()) == 2 and table.scan().to_arrow().sort_by("id").to_pylist() == state
    assert [r["v"] for r in state] == ["b", "a"] * 5


def test_rising_chunk_files_sharing_an_edge_key_commit_it_once_and_a_replay_changes_nothing(tmp_path: Path) -> None:
    """Two chunk files each rising by key, whose ranges share key 5 (a snapshot's fast path must not take them as
    they are): the table holds key 5 once, with its later change, and replaying the commit adds nothing."""
    pub = _publisher(tmp_path)
    first = _commit(tmp_path, "r1", [{"id": i, "v": "a", "seq": 1} for i in range(10)])
    pub.check(first)
    pub.commit(first)
    second = _commit(tmp_path, "r2", [{"id": i, "v": "b", "seq": 2} for i in range(6)])
    more = _commit(tmp_path, "r2b", [{"id": i, "v": "c", "seq": 3} for i in range(5, 10)])
    second = DatasetCommit("j", "r2", "t", "j/r2/t", (*second.files, *more.files), {"k": "r2"}, 1)
    pub.check(second)
    pub.commit(second)

    def rows() -> dict[int, str]:  # by pyiceberg, and by DuckDB over the files its scan plans; each key once
        table = catalog(tmp_path).load_table("db.t")
        ours = _by_key(table.scan().to_arrow().to_pylist(), "pyiceberg")
        paths = [t.file.file_path.removeprefix("file://") for t in table.scan().plan_files()]
        theirs = _by_key([{"id": i, "v": v} for i, v in duckdb.connect().execute(
            "SELECT id, v FROM read_parquet(?)", [paths]).fetchall()], "duckdb")
        assert {k: r["v"] for k, r in ours.items()} == {k: r["v"] for k, r in theirs.items()}
        return {k: r["v"] for k, r in ours.items()}

    assert rows() == {**{i: "b" for i in range(5)}, **{i: "c" for i in range(5, 10)}}
    pub.commit(second)  # the replay after a crash before the record's removal
    assert len(catalog(tmp_path).load_table("db.t").snapshots()) == 2
    assert rows() == {**{i: "b" for i in range(5)}, **{i: "c" for i in range(5, 10)}}


def test_a_concurrent_commit_is_retried_from_a_fresh_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another writer's upsert lands between this commit's read and its snapshot: the conflict is retried on the
    reloaded table, and both writers' rows are in it; the attempt that lost leaves no file behind."""
    from gobblin_py.builtin.publishers.iceberg import upsert as u

    pub = _publisher(tmp_path)
    pub.commit(_commit(tmp_path, "r1", [{"id": i, "v": "a", "seq": 1} for i in range(6)]))
    other = _commit(tmp_path, "other", [{"id": 1, "v": "other", "seq": 5}, {"id": 100, "v": "other", "seq": 5}])
    ours = _commit(tmp_path, "r2", [{"id": 2, "v": "ours", "seq": 2}])
    real, calls = u.rewrite, []

    def racing(*args: Any, **kwargs: Any) -> Any:
        applied = real(*args, **kwargs)
        calls.append(1)
        if len(calls) == 1:
            _publisher(tmp_path).commit(other)  # commits first, with the table this attempt read
        return applied

    monkeypatch.setattr(u, "rewrite", racing)
    pub.commit(ours)
    table = catalog(tmp_path).load_table("db.t")
    rows = {r["id"]: r["v"] for r in table.scan().to_arrow().to_pylist()}
    assert rows == {0: "a", 1: "other", 2: "ours", 3: "a", 4: "a", 5: "a", 100: "other"} and len(calls) == 3
    assert len(table.snapshots()) == 3
    live = {f["file_path"].removeprefix("file://") for f in table.inspect.files().to_pylist()}
    ours_on_disk = {str(p) for p in (tmp_path / "warehouse").rglob(f"*{write_uuid(ours.commit_id)}*.parquet")}
    assert ours_on_disk and ours_on_disk <= live, "the losing attempt's files are removed or were rewritten by the winner"


def test_a_key_column_another_writer_renamed_fails_closed_naming_it(tmp_path: Path) -> None:
    pub = _publisher(tmp_path)
    pub.commit(_commit(tmp_path, "r1", [{"id": 1, "v": "a", "seq": 1}]))
    table = catalog(tmp_path).load_table("db.t")
    with table.update_schema() as update:
        update.rename_column("id", "customer_id")
    nxt = _commit(tmp_path, "r2", [{"id": 1, "v": "b", "seq": 2}])
    with pytest.raises(CommitError, match=r"the upsert key column 'id' is not in the table \(renamed to 'customer_id'"):
        pub.check(nxt)
    with pytest.raises(CommitError, match=r"upsert key column 'id'.*Nothing of this run's changes of dataset t was applied"):
        pub.commit(nxt)
    assert len(catalog(tmp_path).load_table("db.t").snapshots()) == 1


def test_a_new_column_evolves_the_table_and_rewritten_rows_get_nulls(tmp_path: Path) -> None:
    pub = _publisher(tmp_path)
    pub.commit(_commit(tmp_path, "r1", [{"id": i, "v": "a", "seq": 1} for i in range(4)]))
    out = tmp_path / "task-output" / "r2"
    out.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([{"id": 1, "v": "b", "seq": 2, "extra": 7}]), out / "p.parquet")
    f = OutputFile(path=str(out / "p.parquet"), rel_path="t/p.parquet", kind="data", records=1,
                   size=(out / "p.parquet").stat().st_size, checksum="")
    pub.commit(DatasetCommit("j", "r2", "t", "j/r2/t", (f,), {"k": "r2"}, 1))
    table = catalog(tmp_path).load_table("db.t")
    rows = {r["id"]: r for r in table.scan().to_arrow().to_pylist()}
    assert rows[1] == {"id": 1, "v": "b", "seq": 2, "extra": 7} and rows[0]["extra"] is None and len(rows) == 4
    assert len(table.snapshots()) == 2


def test_only_deletes_of_every_row_leave_an_empty_table_with_the_commit(tmp_path: Path) -> None:
    pub = _publisher(tmp_path, delete_when={"column": "v", "equals": ["DEL"]})
    pub.commit(_commit(tmp_path, "r1", [{"id": i, "v": "a", "seq": 1} for i in range(3)]))
    gone = _commit(tmp_path, "r2", [{"id": i, "v": "DEL", "seq": 2} for i in range(3)] + [{"id": 9, "v": "DEL", "seq": 2}])
    pub.commit(gone)
    table = catalog(tmp_path).load_table("db.t")
    assert table.scan().to_arrow().num_rows == 0 and pub.is_committed(gone) and len(table.snapshots()) == 2
    assert snapshots(table)[-1][COMMIT_ID] == "j/r2/t"


def test_the_table_found_committed_by_its_files_once_the_snapshot_was_expired(tmp_path: Path) -> None:
    pub = _publisher(tmp_path)
    c1 = _commit(tmp_path, "r1", [{"id": i, "v": "a", "seq": 1} for i in range(3)])
    pub.commit(c1)
    c2 = _commit(tmp_path, "r2", [{"id": 7, "v": "b", "seq": 2}])
    pub.commit(c2)
    table = catalog(tmp_path).load_table("db.t")
    table.maintenance.expire_snapshots().by_id(table.snapshots()[0].snapshot_id).commit()
    assert pub.is_committed(c2) and pub.is_committed(c1), "both commits' files are live"
    shutil.rmtree(tmp_path / "task-output")


def test_a_partitioned_upsert_without_pyiceberg_core_is_refused_at_validation(tmp_path: Path, monkeypatch) -> None:
    """The `tables` extra installs pyiceberg-core; where it is missing (installed another way) the job is refused
    before anything runs, naming the fix."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyiceberg_core" else real(name, *a))
    job = upsert_job(tmp_path)
    job["writer"]["partition"] = {"column": "updated_at", "granularity": "DAY", "pattern": "yyyy/MM/dd"}
    with pytest.raises(ConfigError, match=r"publisher.mode.*pyiceberg-core.*drop writer.partition"):
        load_job(write_job(tmp_path, job))


def test_compact_leaves_an_upsert_table_alone_saying_why_and_exits_0(tmp_path: Path) -> None:
    """Found by the model-based test: `compact` on an upsert table failed (exit 1) on every run, naming a file without
    the parquet writer's footer; the merge rewrites files as the job's parquet writer writes them, and an upsert
    table's files are written by pyiceberg. Now the table is left alone, the reason named, and the command succeeds."""
    job = upsert_job(tmp_path)
    write_changes(tmp_path, "a.jsonl", FIRST)
    assert _run(tmp_path, job).succeeded
    write_changes(tmp_path, "b.jsonl", SECOND)
    assert _run(tmp_path, job).succeeded
    before = read_back(catalog(tmp_path).load_table("db.customers"))
    done = run_cli("compact", "job.yaml", "--in-process", "--min-files", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "db.customers" in done.stdout and "kept by key (publisher.mode: upsert)" in done.stdout, done.stdout
    assert read_back(catalog(tmp_path).load_table("db.customers")) == before == expected(FIRST, SECOND)
