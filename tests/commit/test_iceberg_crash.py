"""The `iceberg` publisher under SIGKILL at every commit point, the table commit included, and during the recovery
that follows: after the next run every record is in its table exactly once, and each dataset of the run is exactly
one gobblin-py snapshot carrying the watermarks the state store then holds."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from builtin.test_iceberg_publisher import catalog, gobblin_summaries, iceberg_job, table_ids
from support.jobs import write_job

from gobblin_py.state.store import StateStore
from gobblin_py.testing.crash import SIGKILLED, cli, commit_points, each_point, recovery_points

pytestmark = pytest.mark.crash
RUN = ["run", "job.yaml", "--in-process"]
DATASETS = ("clicks", "orders")


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("reference")
    write_job(tmp, iceberg_job(tmp))
    done = cli(RUN, tmp)
    assert done.returncode == 0, done.stdout + done.stderr
    cat = catalog(tmp)
    tables = {d: cat.load_table(f"db.{d}") for d in DATASETS}
    files = sum(len(t.inspect.files()) for t in tables.values()) + len(list((tmp / "warehouse" / "_errors").rglob("*.jsonl")))
    return {"tmp": tmp, "ids": {d: table_ids(t) for d, t in tables.items()}, "steps": files + 3 * len(DATASETS),
            "watermarks": StateStore(tmp / "work", "t").watermarks()}


def _fresh(tmp: Path, reference: dict) -> Path:
    tmp.mkdir()
    shutil.copytree(reference["tmp"] / "data", tmp / "data")
    write_job(tmp, iceberg_job(tmp))
    return tmp


def _assert_exactly_once(tmp: Path, reference: dict, point: str) -> None:
    cat = catalog(tmp)
    marks = StateStore(tmp / "work", "t").watermarks()
    assert marks == reference["watermarks"], point
    for d in DATASETS:
        table = cat.load_table(f"db.{d}")
        ids = table_ids(table)
        assert ids == reference["ids"][d] and set(ids.values()) == {1}, f"{point}: {d}"
        [summary] = gobblin_summaries(table)  # one snapshot for the dataset's one committed run
        assert len(table.snapshots()) == 1, f"{point}: {d}"
        assert summary["gobblin-py.commit-id"] == f"t/{summary['gobblin-py.run-id']}/{d}", point
        assert json.loads(summary["gobblin-py.watermarks"]) == marks[d], point
    leftovers = Counter(p.suffix for p in (tmp / "work" / "task-output").rglob("*") if p.is_file())
    assert not leftovers, f"{point}: task output left behind: {leftovers}"


def test_killed_at_every_commit_point_each_record_is_in_the_table_once(tmp_path: Path, reference: dict) -> None:
    points = commit_points(reference["steps"])
    assert len(points) > reference["steps"] > 2 * len(DATASETS) + 3

    def check(n: int, point: str) -> None:
        tmp = _fresh(tmp_path / str(n), reference)
        killed = cli(RUN, tmp, crash_at=point)
        assert killed.returncode == SIGKILLED, f"{point}: {killed.stdout}{killed.stderr}"
        again = cli(RUN, tmp)
        assert again.returncode == 0, f"{point}: {again.stdout}{again.stderr}"
        _assert_exactly_once(tmp, reference, point)

    each_point(points, check)


def test_killed_again_during_recovery_the_next_run_still_commits_once(tmp_path: Path, reference: dict) -> None:
    """Killed right after the first dataset's table commit (its watermarks not yet set), then during the recovery."""
    for n, point in enumerate(recovery_points()):
        tmp = _fresh(tmp_path / str(n), reference)
        table_step = _table_step(reference)
        assert cli(RUN, tmp, crash_at=f"commit.after_step:{table_step}").returncode == SIGKILLED
        assert len(gobblin_summaries(catalog(tmp).load_table("db.clicks"))) == 1, "the table commit came before the kill"
        assert "clicks" not in StateStore(tmp / "work", "t").watermarks(), "and the watermarks after it"
        assert cli(RUN, tmp, crash_at=point).returncode == SIGKILLED, point
        again = cli(RUN, tmp)
        assert again.returncode == 0, f"{point}: {again.stdout}{again.stderr}"
        _assert_exactly_once(tmp, reference, point)


def _table_step(reference: dict) -> int:
    """The step number of clicks' table commit (clicks commits first at commit_parallelism 1): after its files."""
    tmp = reference["tmp"]
    data = len(catalog(tmp).load_table("db.clicks").inspect.files())
    errors = len(list((tmp / "warehouse" / "_errors" / "clicks").rglob("*.jsonl")))
    return data + errors + 1


OLD_LAYOUT_RECORD = Path(__file__).parent / "fixtures" / "old_layout_iceberg_clicks.json"
"""A pending commit record the layout before `builtin/sources|writers|publishers` wrote (killed before clicks' table
commit, paths under the run's directory as @ROOT@): its global step names `gobblin_py.builtin.iceberg_publisher`."""


def test_a_pending_record_written_by_the_old_layout_recovers(tmp_path: Path, reference: dict) -> None:
    from gobblin_py import checked_json
    from gobblin_py.errors import CorruptCommitRecordError

    old = checked_json.read(OLD_LAYOUT_RECORD, CorruptCommitRecordError, "fixture")
    [old_publisher] = {s["args"]["publisher"] for s in old["steps"] if s["type"] == "global_commit"}
    assert old_publisher == "gobblin_py.builtin.iceberg_publisher:IcebergPublisher"
    tmp = _fresh(tmp_path / "old", reference)
    table_step = _table_step(reference)
    assert cli(RUN, tmp, crash_at=f"commit.after_step:{table_step - 1}").returncode == SIGKILLED
    record = tmp / "work" / "commits" / "t" / "clicks.json"
    body = checked_json.read(record, CorruptCommitRecordError, "commit record")
    assert [s["type"] for s in body["steps"]] == [s["type"] for s in old["steps"]], "the record's shape is the old one's"
    for step in body["steps"]:
        if step["type"] == "global_commit":
            step["args"]["publisher"] = old_publisher  # as the old layout wrote it
    checked_json.write(record, body)
    assert "gobblin_py.builtin.iceberg_publisher:" in record.read_text()
    again = cli(RUN, tmp)
    assert again.returncode == 0, again.stdout + again.stderr
    _assert_exactly_once(tmp, reference, "old-layout record")


def test_killed_after_the_table_commit_then_its_snapshot_expired_the_next_run_recovers(tmp_path: Path, reference: dict) -> None:
    """SIGKILL between clicks' table commit and its watermarks; another writer appends a row and a routine
    `expire_snapshots` removes every snapshot but the current, the commit's own included: the replay finds the commit
    by its files, live in the table, and appends nothing again."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tmp = _fresh(tmp_path / "expired", reference)
    assert cli(RUN, tmp, crash_at=f"commit.after_step:{_table_step(reference)}").returncode == SIGKILLED
    cat = catalog(tmp)
    table = cat.load_table("db.clicks")
    ours = table.current_snapshot().snapshot_id
    schema = pa.schema([f.remove_metadata() for f in table.schema().as_arrow()])
    other = tmp / "warehouse" / "db" / "clicks" / "data" / "other-writer.parquet"
    pq.write_table(pa.Table.from_pylist([{"id": 999_999, "ts": 1767225600000000, "user": "x", "kind": "other", "amount": None,
                                          "country": None}], schema=schema), other)
    table.add_files([f"file://{other}"])  # another writer's commit, then the routine expiry
    table = cat.load_table("db.clicks")
    table.maintenance.expire_snapshots().by_id(ours).commit()
    table = cat.load_table("db.clicks")
    assert len(table.snapshots()) == 1 and not gobblin_summaries(table), "the commit's snapshot is gone"
    again = cli(RUN, tmp)
    assert again.returncode == 0, again.stdout + again.stderr
    table = cat.load_table("db.clicks")
    assert table_ids(table) == reference["ids"]["clicks"] + Counter([999_999])
    assert StateStore(tmp / "work", "t").watermarks() == reference["watermarks"]
    assert table_ids(cat.load_table("db.orders")) == reference["ids"]["orders"]


def test_killed_while_creating_the_table_then_abandoned_the_next_run_creates_it(tmp_path: Path, reference: dict) -> None:
    """Found by the CDC world's soak (seed 536226239): SIGKILL inside the table commit that creates the table, its
    metadata file written and the catalog not yet holding the table; `recover --abandon` gives the commit up. Every
    later run refused "table db.clicks is not in the catalog, but its location holds a table's metadata", forever:
    metadata this job's own abandoned commit wrote, for a table no reader ever saw. The next run creates the table."""
    from gobblin_py.builtin.publishers.iceberg.io import METADATA_POINT

    tmp = _fresh(tmp_path / "orphan", reference)
    killed = cli(RUN, tmp, crash_at=METADATA_POINT)  # clicks commits first: its creating transaction
    assert killed.returncode == SIGKILLED, killed.stdout + killed.stderr
    assert list((tmp / "warehouse" / "db" / "clicks" / "metadata").glob("*.metadata.json"))
    assert not catalog(tmp).table_exists("db.clicks")
    abandoned = cli(["recover", "job.yaml", "--all", "--abandon", "--yes"], tmp)
    assert abandoned.returncode == 0, abandoned.stdout + abandoned.stderr
    again = cli(RUN, tmp)
    assert again.returncode == 0, again.stdout + again.stderr
    _assert_exactly_once(tmp, reference, "abandoned while creating the table")
