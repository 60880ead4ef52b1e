"""The `iceberg` publisher: a job's Parquet files appended to Iceberg tables, one snapshot per dataset per run, read
back by an engine that did not write them (pyiceberg's manifests list the files, DuckDB reads them); schema
evolution, concurrent commits into one table, load-time checks, an S3 warehouse and `state show`."""

from __future__ import annotations

import json
import shutil
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.jobs import EVENT_SCHEMA, example_job, run_cli, write_job

from gobblin_py.api import DatasetCommit, OutputFile
from gobblin_py.builtin.publishers.iceberg.catalog import with_retries
from gobblin_py.builtin.publishers.iceberg.publisher import IcebergPublisher
from gobblin_py.commit.store import CommitStepStore
from gobblin_py.config import load_job
from gobblin_py.errors import CommitError, ConfigError
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import DatasetStatus, JobRunner
from gobblin_py.state.store import StateStore
from gobblin_py.testing.outputs import read_avro_dir, read_error_files

pytest.importorskip("pyiceberg")
duckdb = pytest.importorskip("duckdb")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

COMMIT_ID = "gobblin-py.commit-id"


# --- helpers the crash test shares ---------------------------------------------------------------------------------

def iceberg_job(tmp: Path, table: str = "db.{dataset}", warehouse: str | None = None, **job_extra: Any) -> dict:
    """The example job writing Parquet, published to Iceberg tables in `tmp/warehouse`."""
    return example_job(tmp, job={"name": "t", "work_dir": str(tmp / "work"), "max_task_retries": 1, "commit_parallelism": 1,
                                 **job_extra},
                       writer={"class": "parquet", "partition": {"column": "ts", "granularity": "DAY", "pattern": "yyyy/MM/dd"}},
                       publisher={"class": "iceberg", "table": table, "warehouse": warehouse or str(tmp / "warehouse")})


def catalog(tmp: Path, **props: str) -> Any:
    """The job's embedded catalog, opened by pyiceberg itself (not through the publisher)."""
    from pyiceberg.catalog import load_catalog

    return load_catalog("gobblin_py", **{"type": "sql", "uri": f"sqlite:///{tmp / 'work' / 'iceberg' / 'catalog.db'}", **props})


def table_ids(table: Any, read: Any = None) -> Counter:
    """id → how many rows hold it, over the data files the table's current snapshot lists, read by DuckDB."""
    paths = [task.file.file_path for task in table.scan().plan_files()]
    if not paths:
        return Counter()
    local = [read(p) if read else p.removeprefix("file://") for p in paths]
    rows = duckdb.connect().execute("SELECT id FROM read_parquet(?, union_by_name = true)", [local]).fetchall()
    return Counter(r[0] for r in rows)


def gobblin_summaries(table: Any) -> list[dict[str, str]]:
    """The summaries of the table's gobblin-py snapshots, oldest first."""
    return [dict(s.summary.additional_properties) for s in table.snapshots() if s.summary.get(COMMIT_ID)]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, Counter]:
    """dataset → id counts of the example job written as Avro by the `fs` publisher: what each table must hold."""
    tmp = tmp_path_factory.mktemp("avro")
    assert JobRunner(load_job(write_job(tmp, example_job(tmp))), InProcessExecutor()).run().succeeded
    out: dict[str, Counter] = {}
    for rec in read_avro_dir(tmp / "output"):
        out.setdefault(rec["_file"].split("/")[0], Counter())[rec["id"]] += 1
    return out


def _run(tmp: Path, job: dict) -> Any:
    return JobRunner(load_job(write_job(tmp, job)), InProcessExecutor()).run()


def _new_clicks(tmp: Path, first_id: int, n: int, extra: dict | None = None) -> None:
    day = 1767657600000  # 2026-01-06T00:00Z
    lines = [json.dumps({"id": first_id + i, "ts": day + 1000 * i, "user": "u1", "kind": "click", "amount": None,
                         "country": "US", **(extra or {})}) for i in range(n)]
    (tmp / "data" / "clicks" / f"clicks-new-{first_id}.jsonl").write_text("\n".join(lines) + "\n")


# --- a job into tables -------------------------------------------------------------------------------------------

def test_each_dataset_of_a_run_is_one_snapshot_holding_every_record_once(tmp_path: Path, reference: dict) -> None:
    first = _run(tmp_path, iceberg_job(tmp_path))
    assert first.succeeded, first.error
    cat = catalog(tmp_path)
    marks = StateStore(tmp_path / "work", "t").watermarks()
    for dataset in ("clicks", "orders"):
        table = cat.load_table(f"db.{dataset}")
        assert table_ids(table) == reference[dataset] and set(table_ids(table).values()) == {1}, dataset
        [summary] = gobblin_summaries(table)
        assert summary == {**summary, COMMIT_ID: f"t/{first.run_id}/{dataset}", "gobblin-py.job": "t",
                           "gobblin-py.run-id": first.run_id, "gobblin-py.dataset": dataset}
        assert json.loads(summary["gobblin-py.watermarks"]) == marks[dataset] != {}
        assert int(summary["gobblin-py.watermark-keys"]) == len(marks[dataset])
        assert json.loads(summary["gobblin-py.field-ids"]) == {f.name: f.field_id for f in table.schema().fields}
        assert len(table.snapshots()) == 1
        assert str(table.spec()) == "[\n  1000: ts_day: day(2)\n]"
        files = table.inspect.files().to_pylist()
        assert all(f["file_path"].startswith(f"file://{tmp_path}/warehouse/db/{dataset}/data/{dataset}/2026/01/") for f in files)
        assert all(f["partition"]["ts_day"].isoformat() in f["file_path"].replace("/", "-") for f in files)
        assert table.location() == f"file://{tmp_path}/warehouse/db/{dataset}"
    errors = read_error_files(tmp_path / "warehouse" / "_errors")
    assert len(errors) == 4 and not list((tmp_path / "warehouse" / "db").rglob("*.jsonl")), "error files beside the tables, not in them"

    again = _run(tmp_path, iceberg_job(tmp_path))
    assert again.succeeded and {d.status for d in again.datasets} == {DatasetStatus.NO_NEW_DATA}
    assert [len(cat.load_table(f"db.{d}").snapshots()) for d in ("clicks", "orders")] == [1, 1], "no new data, no snapshot"

    _new_clicks(tmp_path, 900_001, 7)
    third = _run(tmp_path, iceberg_job(tmp_path))
    assert third.succeeded, third.error
    clicks = cat.load_table("db.clicks")
    assert [s[COMMIT_ID] for s in gobblin_summaries(clicks)] == [f"t/{first.run_id}/clicks", f"t/{third.run_id}/clicks"]
    assert table_ids(clicks) == reference["clicks"] + Counter(range(900_001, 900_008))
    assert len(cat.load_table("db.orders").snapshots()) == 1


def test_datasets_committing_at_once_into_one_table_each_get_their_snapshot(tmp_path: Path, reference: dict) -> None:
    result = _run(tmp_path, iceberg_job(tmp_path, table="db.events", commit_parallelism=4))
    assert result.succeeded, result.error
    table = catalog(tmp_path).load_table("db.events")
    assert table_ids(table) == reference["clicks"] + reference["orders"]
    assert sorted(s["gobblin-py.dataset"] for s in gobblin_summaries(table)) == ["clicks", "orders"]
    _new_clicks(tmp_path, 80_000, 5)  # the next commit of each finds the table one of their commits made
    again = _run(tmp_path, iceberg_job(tmp_path, table="db.events", commit_parallelism=4))
    assert again.succeeded, again.error
    assert table_ids(catalog(tmp_path).load_table("db.events")) == reference["clicks"] + reference["orders"] + Counter(range(80_000, 80_005))


# --- schema evolution ------------------------------------------------------------------------------------------

def _schema_with(tmp: Path, change: dict[str, Any]) -> str:
    """The example schema with fields replaced or added (name → Avro field), written into `tmp`."""
    schema = json.loads(EVENT_SCHEMA.read_text())
    fields = {f["name"]: f for f in schema["fields"]}
    fields.update(change)
    schema["fields"] = list(fields.values())
    path = tmp / f"event-{len(list(tmp.glob('event-*.avsc')))}.avsc"
    path.write_text(json.dumps(schema))
    return str(path)


def _with_schema(job: dict, schema: str) -> dict:
    job["converters"] = [{"class": "json_to_avro", "schema": schema}]
    return job


def test_a_new_optional_field_is_added_to_the_table_in_the_same_commit(tmp_path: Path, reference: dict) -> None:
    assert _run(tmp_path, iceberg_job(tmp_path)).succeeded
    _new_clicks(tmp_path, 900_001, 5, {"device": "phone"})
    evolved = _schema_with(tmp_path, {"device": {"name": "device", "type": ["null", "string"], "default": None}})
    second = _run(tmp_path, _with_schema(iceberg_job(tmp_path), evolved))
    assert second.succeeded, second.error
    table = catalog(tmp_path).load_table("db.clicks")
    assert table.schema().find_field("device").optional
    assert len(gobblin_summaries(table)) == 2 and len(table.snapshots()) == 2, "the schema change rides in the append's commit"
    rows = table.scan(selected_fields=("id", "device")).to_arrow().to_pylist()
    assert Counter(r["device"] for r in rows) == Counter({None: sum(reference["clicks"].values()), "phone": 5})


@pytest.mark.parametrize(("field", "avro", "said"), [
    ("amount", {"name": "amount", "type": ["null", "float"], "default": None}, "'amount' is double in the table and float"),
    ("user", {"name": "user", "type": ["null", "string"], "default": None}, None),  # required → optional: allowed
])
def test_a_change_that_would_break_readers_fails_the_dataset_naming_the_field(tmp_path: Path, field: str, avro: dict, said: str | None) -> None:
    assert _run(tmp_path, iceberg_job(tmp_path)).succeeded
    cat = catalog(tmp_path)
    before = cat.load_table("db.clicks").metadata.current_snapshot_id
    _new_clicks(tmp_path, 900_001, 5)
    second = _run(tmp_path, _with_schema(iceberg_job(tmp_path), _schema_with(tmp_path, {field: avro})))
    clicks = {d.dataset: d for d in second.datasets}["clicks"]
    if said is None:
        assert second.succeeded, second.error
        assert cat.load_table("db.clicks").schema().find_field(field).optional
        return
    assert clicks.status is DatasetStatus.COMMIT_FAILED and said in clicks.message, clicks.message
    assert "Nothing of dataset clicks was published or appended" in clicks.message
    assert CommitStepStore(tmp_path / "work").datasets("t") == [], "refused before anything was logged"
    assert not list((tmp_path / "warehouse").rglob("clicks-new-*")) and not list((tmp_path / "warehouse").rglob("*2026-01-06*")), \
        "none of the run's files was published"
    table = cat.load_table("db.clicks")
    assert table.metadata.current_snapshot_id == before and str(table.schema().find_field("amount").field_type) == "double"


def _parquet(root: Path, rel: str, table: pa.Table, dataset: str = "d") -> OutputFile:
    """A task output Parquet file written by pyarrow, as the committable a writer hands over."""
    import crc32c

    path = root / "task-output" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    data = path.read_bytes()
    return OutputFile(path=str(path), rel_path=rel, records=table.num_rows, size=len(data),
                      checksum=f"{crc32c.crc32c(data):08x}", dataset=dataset, branch="main")


def _publish(publisher: IcebergPublisher, run: str, files: list[OutputFile], dataset: str = "d") -> DatasetCommit:
    for step in publisher.commit_steps(dataset, files):
        step.execute()
    commit = DatasetCommit("j", run, dataset, f"j/{run}/{dataset}", tuple(files), {"k": run})
    publisher.commit(commit)
    return commit


def _publisher(tmp: Path, table: str = "ns.{dataset}") -> IcebergPublisher:
    return IcebergPublisher(IcebergPublisher.Settings(
        table=table, warehouse=str(tmp / "wh"), catalog={"type": "sql", "uri": f"sqlite:///{tmp / 'catalog.db'}"},
        partition={"column": "ts", "granularity": "DAY"}))


def _events(ids: range, **columns: Any) -> pa.Table:
    ts = pa.array([1767225600000 + i for i in ids], pa.timestamp("ms", tz="UTC"))
    return pa.table({"id": pa.array(list(ids), pa.int64()), "ts": ts, **columns},
                    schema=pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("ts", ts.type, nullable=False),
                                      *[pa.field(k, v.type if isinstance(v, pa.Array) else pa.infer_type(v)) for k, v in columns.items()]]))


def test_a_required_field_removed_or_a_type_narrowed_names_the_field_and_appends_nothing(tmp_path: Path) -> None:
    pub = _publisher(tmp_path)
    _publish(pub, "r1", [_parquet(tmp_path, "d/a.parquet", _events(range(3), n=pa.array([1, 2, 3], pa.int64())))])
    snapshots = len(pub.catalog().load_table("ns.d").snapshots())
    narrowed = [_parquet(tmp_path, "d/b.parquet", _events(range(3, 5), n=pa.array([4, 5], pa.int32())))]
    with pytest.raises(CommitError, match=r"field 'n' is long in the table and int in this run's output"):
        _publish(pub, "r2", narrowed)
    no_id = pa.table({"ts": pa.array([1767225600000], pa.timestamp("ms", tz="UTC")), "n": pa.array([6], pa.int64())})
    with pytest.raises(CommitError, match=r"required field 'id' \(long\) is not in this run's output"):
        _publish(pub, "r3", [_parquet(tmp_path, "d/c.parquet", no_id)])
    assert len(pub.catalog().load_table("ns.d").snapshots()) == snapshots
    widened = [_parquet(tmp_path, "d/e.parquet", _events(range(5, 7), n=pa.array([6, 7], pa.int64()), x=pa.array([1.5, None])))]
    _publish(pub, "r4", widened)
    table = pub.catalog().load_table("ns.d")
    assert table.schema().find_field("x").optional and len(table.snapshots()) == snapshots + 1
    assert table_ids(table) == Counter(list(range(3)) + [5, 6])


def test_is_committed_only_for_that_commit_and_a_replay_appends_nothing(tmp_path: Path) -> None:
    pub = _publisher(tmp_path)
    files = [_parquet(tmp_path, "d/a.parquet", _events(range(3)))]
    commit = DatasetCommit("j", "r1", "d", "j/r1/d", tuple(files), {})
    assert not pub.is_committed(commit)
    _publish(pub, "r1", files)
    assert pub.is_committed(commit) and not pub.is_committed(DatasetCommit("j", "r2", "d", "j/r2/d", tuple(files), {}))
    pub.commit(commit)  # a replay
    table = pub.catalog().load_table("ns.d")
    assert len(table.snapshots()) == 1 and table_ids(table) == Counter(range(3))
    assert pub.is_committed(DatasetCommit("j", "r9", "d", "j/r9/d", (), {})), "no data files: nothing to commit"


def test_concurrent_commits_into_one_table_are_retried_until_each_lands(tmp_path: Path) -> None:
    pub = _publisher(tmp_path, table="ns.events")
    files = {d: [_parquet(tmp_path, f"{d}/a.parquet", _events(range(10 * n, 10 * n + 3)), dataset=d)] for n, d in enumerate("abcdef")}
    for d, fs in files.items():
        for step in pub.commit_steps(d, fs):
            step.execute()
    _publish(pub, "r0", [_parquet(tmp_path, "z/a.parquet", _events(range(100, 101)), dataset="z")], dataset="z")  # the table exists
    barrier = threading.Barrier(len(files))
    failures: list[BaseException] = []

    def commit(d: str) -> None:
        barrier.wait()
        try:
            IcebergPublisher(pub.settings).commit(DatasetCommit("j", "r1", d, f"j/r1/{d}", tuple(files[d]), {}))
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=commit, args=(d,)) for d in files]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures
    table = pub.catalog().load_table("ns.events")
    assert sorted(s["gobblin-py.dataset"] for s in gobblin_summaries(table)) == ["a", "b", "c", "d", "e", "f", "z"]
    assert sum(table_ids(table).values()) == 19 and set(table_ids(table).values()) == {1}


def test_a_conflict_is_retried_a_bounded_number_of_times_then_named() -> None:
    from pyiceberg.exceptions import CommitFailedException

    calls: list[int] = []

    def conflicting() -> None:
        calls.append(1)
        raise CommitFailedException("requirement failed: branch main has changed")

    with pytest.raises(CommitError, match=r"table ns\.t: still conflicting with concurrent commits after 3 attempts"):
        with_retries("table ns.t", 3, conflicting, sleep=lambda s: None)
    assert len(calls) == 3
    with pytest.raises(ValueError):  # anything but a conflict is not retried
        with_retries("table ns.t", 3, lambda: (_ for _ in ()).throw(ValueError("bad file")), sleep=lambda s: None)


# --- load-time checks ------------------------------------------------------------------------------------------

def test_the_loader_fills_partition_and_catalog_and_refuses_another_writer(tmp_path: Path) -> None:
    spec = load_job(write_job(tmp_path, iceberg_job(tmp_path)))
    settings = spec.branches[0].publisher.settings
    assert settings.partition.column == "ts" and settings.partition.granularity == "DAY"
    assert settings.catalog == {"name": "gobblin_py", "type": "sql", "uri": f"sqlite:///{tmp_path / 'work' / 'iceberg' / 'catalog.db'}"}

    avro = iceberg_job(tmp_path)
    avro["writer"] = {"class": "avro"}
    with pytest.raises(ConfigError, match=r"publisher\.class: the iceberg publisher appends Parquet files .* writer\.class is 'avro'"):
        load_job(write_job(tmp_path, avro))
    minute = iceberg_job(tmp_path)
    minute["writer"]["partition"]["granularity"] = "MINUTE"
    with pytest.raises(ConfigError, match=r"writer\.partition\.granularity: an Iceberg table is partitioned by HOUR"):
        load_job(write_job(tmp_path, minute))
    cluster = iceberg_job(tmp_path)
    cluster["spark"] = {"master": "spark://head:7077"}
    with pytest.raises(ConfigError, match=r"publisher\.catalog: a SQLite catalog is a file on the driver's disk"):
        load_job(write_job(tmp_path, cluster))
    cluster["job"]["commit_on_executors_from"] = 0
    assert load_job(write_job(tmp_path, cluster)).branches[0].publisher.settings.catalog["type"] == "sql"
    secret = iceberg_job(tmp_path)
    secret["publisher"]["catalog"] = {"type": "sql", "uri": "postgresql://me:hunter2@db/iceberg"}
    with pytest.raises(ConfigError, match=r"publisher\.catalog\.uri: holds a secret.*environment"):
        load_job(write_job(tmp_path, secret))


# --- S3 ----------------------------------------------------------------------------------------------------------

@pytest.mark.s3
def test_an_s3_warehouse_gets_the_files_uploaded_verified_then_added(tmp_path: Path, s3, reference: dict) -> None:
    bucket = s3.new_bucket()
    job = iceberg_job(tmp_path, warehouse=f"s3://{bucket}/wh", filesystems=s3.options)
    result = _run(tmp_path, job)
    assert result.succeeded, result.error
    cat = catalog(tmp_path, **{"s3.endpoint": s3.endpoint, "s3.region": "us-east-1"})  # pyiceberg's own S3 client
    fs = s3.client()
    for dataset in ("clicks", "orders"):
        table = cat.load_table(f"db.{dataset}")
        assert table.location() == f"s3://{bucket}/wh/db/{dataset}" and len(gobblin_summaries(table)) == 1

        def download(url: str) -> str:
            local = tmp_path / "down" / url.removeprefix("s3://")
            local.parent.mkdir(parents=True, exist_ok=True)
            fs.get(url, str(local))
            return str(local)

        assert table_ids(table, download) == reference[dataset]
    assert any(k.endswith(".errors.jsonl") for k in s3.keys(f"{bucket}/wh/_errors"))
    assert not list((tmp_path / "work" / "task-output").rglob("*.parquet")), "task output is removed once published"


# --- state show --------------------------------------------------------------------------------------------------

def test_state_show_names_the_watermarks_the_table_carries_and_a_difference(tmp_path: Path) -> None:
    from gobblin_py.testing.crash import SIGKILLED, cli

    write_job(tmp_path, iceberg_job(tmp_path))
    # clicks is committed first (commit_parallelism 1): kill right after its table commit, before its watermarks
    files = 6  # 5 data files and 1 error file
    assert cli(["run", "job.yaml", "--in-process"], tmp_path, crash_at=f"commit.after_step:{files + 1}").returncode == SIGKILLED
    shown = run_cli("state", "show", "job.yaml", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "clicks: no committed state\n    table db.clicks: run " in shown.stdout, shown.stdout
    assert "differ from the state store's (none): a pending commit sets them on the next run" in shown.stdout
    assert cli(["run", "job.yaml", "--in-process"], tmp_path).returncode == 0
    shown = run_cli("state", "show", "job.yaml", cwd=tmp_path)
    assert "differ" not in shown.stdout and shown.stdout.count("(as in the state store)") == 2, shown.stdout
    as_json = json.loads(run_cli("state", "show", "job.yaml", "--json", cwd=tmp_path).stdout)
    marks = StateStore(tmp_path / "work", "t").watermarks()
    assert as_json["clicks"]["table"]["watermarks"] == marks["clicks"] and as_json["clicks"]["table"]["table"] == "db.clicks"


def test_the_publisher_passes_the_conformance_suite(tmp_path: Path) -> None:
    from gobblin_py.testing.conformance import check_committer

    files = [_parquet(tmp_path, f"d/2026/01/0{n}/a.parquet", _events(range(10 * n, 10 * n + 3))) for n in (1, 2)]
    steps = check_committer(_publisher(tmp_path), files, tmp_path, dataset="d")
    assert [type(s).type_name for s in steps] == ["fs_rename", "fs_rename"]
    table = _publisher(tmp_path).catalog().load_table("ns.d")
    assert [s["gobblin-py.commit-id"] for s in gobblin_summaries(table)] == ["conformance-commit-1"]


# --- the table's identities ----------------------------------------------------------------------------------------

def test_a_column_another_writer_renamed_is_never_read_as_null(tmp_path: Path) -> None:
    """`ALTER TABLE db.clicks RENAME COLUMN country TO nation` between two runs: the job's files (no field ids) still
    name it `country`; adding it back as a new column would point readers' name mapping of the earlier files at it,
    and `nation` would read NULL for every row the job wrote. The run refuses, naming the column and the table."""
    assert _run(tmp_path, iceberg_job(tmp_path)).succeeded
    cat = catalog(tmp_path)
    before = {r["id"]: r["country"] for r in cat.load_table("db.clicks").scan(selected_fields=("id", "country")).to_arrow().to_pylist()}
    assert sum(v is not None for v in before.values()) > 100
    with cat.load_table("db.clicks").update_schema() as update:
        update.rename_column("country", "nation")
    _new_clicks(tmp_path, 900_001, 5)
    second = _run(tmp_path, iceberg_job(tmp_path))
    table = cat.load_table("db.clicks")
    rows = {r["id"]: r["nation"] for r in table.scan(selected_fields=("id", "nation")).to_arrow().to_pylist()}
    assert {i: rows[i] for i in before} == before, "every row the job wrote reads its value under the new name"
    clicks = {d.dataset: d for d in second.datasets}["clicks"]
    if clicks.status is DatasetStatus.COMMITTED:  # followed by field id: the new rows too
        assert Counter(rows[i] for i in range(900_001, 900_006)) == Counter({"US": 5})
        return
    assert clicks.status is DatasetStatus.COMMIT_FAILED, clicks
    for said in ("table db.clicks", "'country'", "renamed to 'nation'", "RENAME COLUMN nation TO country"):
        assert said in clicks.message, clicks.message
    assert [f.name for f in table.schema().fields].count("country") == 0, "no column added under the old name"


def test_a_column_another_writer_dropped_is_not_added_back_under_its_old_name(tmp_path: Path) -> None:
    assert _run(tmp_path, iceberg_job(tmp_path)).succeeded
    cat = catalog(tmp_path)
    with cat.load_table("db.clicks").update_schema() as update:
        update.delete_column("country")
    _new_clicks(tmp_path, 900_001, 5)
    second = _run(tmp_path, iceberg_job(tmp_path))
    clicks = {d.dataset: d for d in second.datasets}["clicks"]
    assert clicks.status is DatasetStatus.COMMIT_FAILED, clicks
    assert "table db.clicks" in clicks.message and "'country'" in clicks.message and "dropped" in clicks.message, clicks.message
    assert "country" not in [f.name for f in cat.load_table("db.clicks").schema().fields]


def _shared_catalog(tmp: Path) -> dict[str, str]:
    """A catalog outside the work directory, as a shared one is."""
    return {"name": "shared", "type": "sql", "uri": f"sqlite:///{tmp / 'cat.db'}"}


def _with_catalog(job: dict, props: dict[str, str]) -> dict:
    job["publisher"]["catalog"] = props
    return job


def test_a_lost_work_dir_resumes_from_the_watermarks_the_table_carries(tmp_path: Path, reference: dict) -> None:
    """The work directory deleted (or the job moved to another host), the catalog shared: the next run takes each
    dataset's watermarks from the job's last snapshot of its table, says so, and extracts only what is new."""
    shared = _shared_catalog(tmp_path)

    def job() -> dict:
        return _with_catalog(iceberg_job(tmp_path), shared)

    first = _run(tmp_path, job())
    assert first.succeeded, first.error
    _new_clicks(tmp_path, 800_001, 3)  # a second commit, holding its run's one watermark key
    assert _run(tmp_path, job()).succeeded
    marks = StateStore(tmp_path / "work", "t").watermarks()
    shutil.rmtree(tmp_path / "work")
    _new_clicks(tmp_path, 900_001, 7)
    second = _run(tmp_path, job())
    assert second.succeeded, second.error
    from pyiceberg.catalog import load_catalog

    cat = load_catalog("shared", **{k: v for k, v in shared.items() if k != "name"})
    assert table_ids(cat.load_table("db.clicks")) == reference["clicks"] + Counter([*range(800_001, 800_004), *range(900_001, 900_008)])
    assert table_ids(cat.load_table("db.orders")) == reference["orders"]
    by = {d.dataset: d for d in second.datasets}
    assert by["orders"].status is DatasetStatus.NO_NEW_DATA, by["orders"]
    for d in ("clicks", "orders"):
        assert any("watermarks taken from table db." + d in n for n in by[d].notices), by[d].notices
    after = StateStore(tmp_path / "work", "t").watermarks()
    assert after["orders"] == marks["orders"] and set(after["clicks"]) == set(marks["clicks"]) | {"clicks-new-900001.jsonl"}


def test_a_state_reset_after_a_resume_reads_the_dataset_again(tmp_path: Path, reference: dict) -> None:
    """A dataset whose watermarks were taken from its table (a lost work directory), then reset by the user: the reset
    is what the user asked for (read it again), not a lost state to resume once more. It used to be resumed from the
    table at every run, so the reset never took effect: a CDC table that had to be snapshotted again was refused at
    every run, each naming the reset as its remedy (CDC world soak seed 3882437238). The re-read adds nothing twice
    (the table lists its files already)."""
    shared = _shared_catalog(tmp_path)

    def job() -> dict:
        return _with_catalog(iceberg_job(tmp_path), shared)

    assert _run(tmp_path, job()).succeeded
    shutil.rmtree(tmp_path / "work")
    resumed = _run(tmp_path, job())
    assert resumed.succeeded and {d.dataset: d for d in resumed.datasets}["orders"].status is DatasetStatus.NO_NEW_DATA
    reset = run_cli("state", "reset", str(write_job(tmp_path, job())), "--dataset", "orders", "--yes", cwd=tmp_path)
    assert reset.returncode == 0, reset.stdout + reset.stderr
    again = _run(tmp_path, job())
    assert again.succeeded, again.error
    orders = {d.dataset: d for d in again.datasets}["orders"]
    assert orders.status is not DatasetStatus.NO_NEW_DATA and not any("watermarks taken from" in n for n in orders.notices), \
        (orders.status, orders.notices)
    from pyiceberg.catalog import load_catalog

    cat = load_catalog("shared", **{k: v for k, v in shared.items() if k != "name"})
    assert table_ids(cat.load_table("db.orders")) == reference["orders"]


def _expire_but_current(pub: IcebergPublisher, tmp: Path, name: str = "ns.d") -> Any:
    """Another writer appends a file, then every snapshot but the current is expired (pyiceberg's expiry)."""
    table = pub.catalog().load_table(name)
    other = tmp / "other.parquet"
    pq.write_table(_events(range(1000, 1001)), other)
    table.add_files([f"file://{other}"])
    table = pub.catalog().load_table(name)
    table.maintenance.expire_snapshots().by_ids([s.snapshot_id for s in table.snapshots()][:-1]).commit()
    return pub.catalog().load_table(name)


def test_a_commit_whose_snapshot_was_expired_is_found_by_its_files(tmp_path: Path) -> None:
    pub = _publisher(tmp_path)
    files = [_parquet(tmp_path, f"d/{n}.parquet", _events(range(3 * n, 3 * n + 3))) for n in range(2)]
    commit = _publish(pub, "r1", files)
    table = _expire_but_current(pub, tmp_path)
    assert not gobblin_summaries(table), "the commit's snapshot is gone"
    assert pub.is_committed(commit)
    pub.commit(commit)  # a replay appends nothing
    assert table_ids(pub.catalog().load_table("ns.d")) == Counter([*range(6), 1000])
    later = [_parquet(tmp_path, "d/later.parquet", _events(range(10, 12)))]
    assert not pub.is_committed(DatasetCommit("j", "r3", "d", "j/r3/d", tuple(later), {})), "files not in the table"
    for step in pub.commit_steps("d", later):
        step.execute()
    partly = DatasetCommit("j", "r4", "d", "j/r4/d", (files[0], *later), {})
    with pytest.raises(CommitError, match=r"table ns\.d: commit j/r4/d is neither in the table's snapshot log .* 1 of its 2 files are live"):
        pub.is_committed(partly)


def test_lost_state_with_the_jobs_snapshots_expired_is_refused_naming_the_table(tmp_path: Path) -> None:
    pub = _publisher(tmp_path)
    _publish(pub, "r1", [_parquet(tmp_path, "d/a.parquet", _events(range(3)))])
    assert pub.resume_watermarks("j", ["d", "e"])["d"].watermarks == {"k": "r1"}
    assert pub.resume_watermarks("other-job", ["d"]) == {}, "another job's snapshots are not this job's position"
    _expire_but_current(pub, tmp_path)
    with pytest.raises(CommitError, match=r"table ns\.d: the state store holds nothing of dataset d .* were expired"):
        pub.resume_watermarks("j", ["d"])


def test_lost_state_is_resumed_only_from_snapshots_that_add_up_to_the_whole(tmp_path: Path) -> None:
    """Each snapshot carries its run's watermark keys and how many the dataset then held: once expiry removed one
    whose keys no later snapshot repeats, the rest do not add up and the dataset is refused, naming the table."""
    pub = _publisher(tmp_path)
    for n, (run, keys) in enumerate((("r1", {"a": 1, "b": 1}), ("r2", {"b": 2}), ("r3", {"c": 3}))):
        files = [_parquet(tmp_path, f"d/{run}.parquet", _events(range(10 * n, 10 * n + 2)))]
        for step in pub.commit_steps("d", files):
            step.execute()
        pub.commit(DatasetCommit("j", run, "d", f"j/{run}/d", tuple(files), keys, watermark_keys=2 + (run == "r3")))
    resumed = pub.resume_watermarks("j", ["d"])["d"]
    assert resumed.watermarks == {"a": 1, "b": 2, "c": 3} and "table ns.d" in resumed.found_in
    table = pub.catalog().load_table("ns.d")
    table.maintenance.expire_snapshots().by_id(table.snapshots()[0].snapshot_id).commit()
    with pytest.raises(CommitError, match=r"table ns\.d: .* hold 2 of the 3 watermark keys its last commit left"):
        pub.resume_watermarks("j", ["d"])


def test_a_lost_work_dir_whose_table_cannot_say_where_the_job_was_is_refused_naming_it(tmp_path: Path, reference: dict) -> None:
    from pyiceberg.catalog import load_catalog

    shared = _shared_catalog(tmp_path)
    assert _run(tmp_path, _with_catalog(iceberg_job(tmp_path), shared)).succeeded
    _new_clicks(tmp_path, 800_001, 3)
    assert _run(tmp_path, _with_catalog(iceberg_job(tmp_path), shared)).succeeded
    cat = load_catalog("shared", **{k: v for k, v in shared.items() if k != "name"})
    clicks = cat.load_table("db.clicks")
    clicks.maintenance.expire_snapshots().by_id(clicks.snapshots()[0].snapshot_id).commit()  # routine expiry
    shutil.rmtree(tmp_path / "work")
    again = _run(tmp_path, _with_catalog(iceberg_job(tmp_path), shared))
    by = {d.dataset: d for d in again.datasets}
    assert not again.succeeded and by["clicks"].status is DatasetStatus.BLOCKED, by["clicks"]
    assert "table db.clicks: the state store holds nothing of dataset clicks" in by["clicks"].message, by["clicks"].message
    assert table_ids(cat.load_table("db.clicks")) == reference["clicks"] + Counter(range(800_001, 800_004)), "nothing added twice"
    assert by["orders"].status is DatasetStatus.NO_NEW_DATA and table_ids(cat.load_table("db.orders")) == reference["orders"]


def test_a_dataset_with_a_dot_in_a_one_level_catalog_lands_in_a_table_named_with_an_underscore(tmp_path: Path,
                                                                                                reference: dict) -> None:
    """A database table `public.clicks` is a dataset with a '.': `db.{dataset}` would name a nested namespace, which the
    SQL catalog has not (such a job was refused on every run, so no table of the nested name can exist); the '.'
    becomes '_': `db.public_clicks`, its files under the warehouse's `db/public_clicks`."""
    job = iceberg_job(tmp_path)
    shutil.move(tmp_path / "data" / "clicks", tmp_path / "data" / "public.clicks")
    result = _run(tmp_path, job)
    assert result.succeeded, [(d.dataset, d.message) for d in result.datasets]
    table = catalog(tmp_path).load_table("db.public_clicks")
    assert table_ids(table) == reference["clicks"]
    assert table.location() == f"file://{tmp_path}/warehouse/db/public_clicks"
    assert gobblin_summaries(table)[-1]["gobblin-py.dataset"] == "public.clicks"


def test_two_datasets_named_into_one_table_are_refused_naming_both(tmp_path: Path, reference: dict) -> None:
    """`public.clicks` and `public_clicks` both map to `db.public_clicks`: the one that comes second is refused,
    naming both, before anything of it is published; the table keeps the first one's rows only."""
    job = iceberg_job(tmp_path)
    shutil.copytree(tmp_path / "data" / "clicks", tmp_path / "data" / "public_clicks")
    shutil.move(tmp_path / "data" / "clicks", tmp_path / "data" / "public.clicks")
    result = _run(tmp_path, job)
    by = {d.dataset: d for d in result.datasets}
    refused = [d for d in ("public.clicks", "public_clicks") if by[d].status is not DatasetStatus.COMMITTED]
    assert len(refused) == 1, {d: (by[d].status, by[d].message) for d in by}
    message = by[refused[0]].message
    assert "public.clicks" in message and "public_clicks" in message and "db.public_clicks" in message, message
    assert table_ids(catalog(tmp_path).load_table("db.public_clicks")) == reference["clicks"]


def test_a_state_reset_re_reads_into_the_table_once_and_the_dataset_goes_on(tmp_path: Path, reference: dict) -> None:
    """Found by the model-based test: the re-read writes the files the table already references (same input, same
    range, same names), and every later run failed "Cannot add files that are already referenced by table"."""
    job = iceberg_job(tmp_path)
    assert _run(tmp_path, job).succeeded
    reset = run_cli("state", "reset", "job.yaml", "--dataset", "clicks", "--yes", cwd=tmp_path)
    assert reset.returncode == 0, reset.stderr
    _new_clicks(tmp_path, 50_000, 10)  # and new records since
    result = _run(tmp_path, job)
    assert result.succeeded, result.error
    table = catalog(tmp_path).load_table("db.clicks")
    ids = table_ids(table)
    assert set(ids.values()) == {1} and set(ids) == set(reference["clicks"]) | set(range(50_000, 50_010))
    assert _run(tmp_path, job).succeeded  # and the dataset goes on


def test_a_re_read_that_adds_nothing_leaves_its_commit_in_the_table_so_the_next_run_goes_on(tmp_path: Path, reference: dict) -> None:
    """Found by the model-based test (the iceberg world, seed 553146185): after `state reset`, a run that re-read only
    what the table already holds added no snapshot, yet the dataset's last commit became that run's; every later run
    of the dataset was then refused as "another driver of this job commits to the table", for good."""
    job = iceberg_job(tmp_path)
    assert _run(tmp_path, job).succeeded
    reset = run_cli("state", "reset", "job.yaml", "--dataset", "clicks", "--yes", cwd=tmp_path)
    assert reset.returncode == 0, reset.stderr
    again = run_cli("run", "job.yaml", "--in-process", cwd=tmp_path)  # the same files again, nothing new
    assert again.returncode == 0, again.stdout + again.stderr
    _new_clicks(tmp_path, 60_000, 7)
    after = run_cli("run", "job.yaml", "--in-process", cwd=tmp_path)
    assert after.returncode == 0, after.stdout + after.stderr
    ids = table_ids(catalog(tmp_path).load_table("db.clicks"))
    assert set(ids.values()) == {1} and set(ids) == set(reference["clicks"]) | set(range(60_000, 60_007))


def test_a_lost_catalog_never_makes_a_new_empty_table_over_the_old_one(tmp_path: Path, reference: dict) -> None:
    """The SQLite catalog file removed (or the catalog replaced) while the warehouse keeps the table: before the fix
    the next run created a new table at the same location holding only its own rows, and every row committed before
    was gone from what readers see, while the run said committed."""
    job = iceberg_job(tmp_path)
    assert _run(tmp_path, job).succeeded
    (tmp_path / "work" / "iceberg" / "catalog.db").unlink()  # the catalog lost
    _new_clicks(tmp_path, 70_000, 5)
    done = run_cli("run", "job.yaml", "--in-process", cwd=tmp_path)  # a new process: a new catalog file
    assert done.returncode == 1, done.stdout + done.stderr
    for said in ("table db.clicks", "metadata", "register_table"):
        assert said in done.stdout, done.stdout
    assert not CommitStepStore(tmp_path / "work").exists("t", "clicks")  # refused before anything was published
    metadata = sorted((tmp_path / "warehouse" / "db" / "clicks" / "metadata").glob("*.metadata.json"))[-1]
    cat = catalog(tmp_path)
    cat.create_namespace_if_not_exists("db")
    cat.register_table("db.clicks", f"file://{metadata}")  # the repair the error names
    again = run_cli("run", "job.yaml", "--in-process", cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    ids = table_ids(cat.load_table("db.clicks"))
    assert set(ids.values()) == {1} and set(ids) == set(reference["clicks"]) | set(range(70_000, 70_005))


@pytest.mark.parametrize("creator", ["other/r1/clicks", "t/r1/clicks"], ids=["another-job", "this-job-written-to-since"])
def test_a_table_only_left_in_the_warehouse_is_refused_unless_this_job_began_creating_it(tmp_path: Path, creator: str) -> None:
    """A run goes on past metadata its own abandoned creating commit left (tests/commit/test_iceberg_crash.py), and only
    past that: a table another job created there, or one this job's commit created and that was written to since
    (a second metadata version), then dropped from the catalog without purge, is refused before anything is published."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    from gobblin_py.builtin.publishers.iceberg.snapshots import CREATED_BY

    job = iceberg_job(tmp_path)
    write_job(tmp_path, job)
    (tmp_path / "work" / "iceberg").mkdir(parents=True)
    cat = catalog(tmp_path)
    cat.create_namespace_if_not_exists("db")
    table = cat.create_table("db.clicks", Schema(NestedField(1, "id", LongType(), required=False)),
                             location=f"file://{tmp_path / 'warehouse' / 'db' / 'clicks'}", properties={CREATED_BY: creator})
    if creator.startswith("t/"):
        with table.update_schema() as update:
            update.add_column("note", StringType())
    cat.drop_table("db.clicks")  # out of the catalog, its metadata kept
    done = run_cli("run", "job.yaml", "--in-process", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    for said in ("table db.clicks is not in the catalog", "metadata", "register_table"):
        assert said in done.stdout, done.stdout
    assert not CommitStepStore(tmp_path / "work").exists("t", "clicks")
    assert not catalog(tmp_path).table_exists("db.clicks")


# --- the table is the one committed to ----------------------------------------------------------------------------

@pytest.mark.parametrize("second_run", [True, False], ids=["pinned-by-uuid", "pinned-by-creation"])
def test_a_table_dropped_and_purged_fails_closed_and_creates_nothing(tmp_path: Path, second_run: bool) -> None:
    """A table the dataset committed to, dropped (and its files purged) by another writer: before the fix the next run
    created a new table holding only its own rows, the rows committed before gone from what readers see while the
    watermarks were past them and the run said committed. Now the dataset fails naming the table as gone, whether
    its uuid was pinned (a second commit) or only the commit that created it (the first)."""
    job = iceberg_job(tmp_path)
    assert _run(tmp_path, job).succeeded
    if second_run:
        _new_clicks(tmp_path, 60_000, 5)
        assert _run(tmp_path, job).succeeded
    cat = catalog(tmp_path)
    uuid = str(cat.load_table("db.clicks").metadata.table_uuid)
    cat.drop_table("db.clicks")
    shutil.rmtree(tmp_path / "warehouse" / "db" / "clicks")  # purged
    _new_clicks(tmp_path, 70_000, 5)
    result = _run(tmp_path, job)
    clicks = {d.dataset: d for d in result.datasets}["clicks"]
    assert clicks.status is DatasetStatus.COMMIT_FAILED, clicks.message
    assert "table db.clicks (" in clicks.message and "is gone: dropped or renamed by another writer" in clicks.message
    assert (uuid in clicks.message) is second_run and "state reset" in clicks.message
    assert not catalog(tmp_path).table_exists("db.clicks")
    assert {d.dataset: d for d in result.datasets}["orders"].status is not DatasetStatus.COMMIT_FAILED


def test_a_table_dropped_and_created_again_fails_closed_until_the_dataset_is_reset(tmp_path: Path, reference: dict) -> None:
    """Another writer drops the table and creates one of the same name (empty, as a migration would): appending to it
    would leave every row committed before out of it. Refused naming both uuids; after `state reset` of the dataset
    the job loads it into the new table from the start, each row once."""
    job = iceberg_job(tmp_path)
    assert _run(tmp_path, job).succeeded
    cat = catalog(tmp_path)
    old = cat.load_table("db.clicks")
    schema, old_uuid = old.schema(), str(old.metadata.table_uuid)
    cat.drop_table("db.clicks")
    shutil.rmtree(tmp_path / "warehouse" / "db" / "clicks")
    new_uuid = str(cat.create_table("db.clicks", schema=schema, location=f"file://{tmp_path}/warehouse/db/clicks").metadata.table_uuid)
    _new_clicks(tmp_path, 90_000, 5)
    clicks = {d.dataset: d for d in _run(tmp_path, job).datasets}["clicks"]
    assert clicks.status is DatasetStatus.COMMIT_FAILED, clicks.message
    assert f"is Iceberg table uuid {new_uuid}, not the table commit" in clicks.message and "dropped and created again" in clicks.message
    assert not table_ids(catalog(tmp_path).load_table("db.clicks"))  # nothing appended
    _new_clicks(tmp_path, 90_100, 5)  # a second commit pins the uuid: refused naming both
    clicks = {d.dataset: d for d in _run(tmp_path, job).datasets}["clicks"]
    assert clicks.status is DatasetStatus.COMMIT_FAILED and old_uuid not in clicks.message  # pinned: its creating commit
    reset = run_cli("state", "reset", "job.yaml", "--dataset", "clicks", "--yes", cwd=tmp_path)
    assert reset.returncode == 0, reset.stderr
    assert _run(tmp_path, job).succeeded
    ids = table_ids(catalog(tmp_path).load_table("db.clicks"))
    assert set(ids.values()) == {1} and set(ids) == set(reference["clicks"]) | set(range(90_000, 90_005)) | set(range(90_100, 90_105))


def test_a_pending_commit_replayed_after_its_table_was_dropped_creates_nothing(tmp_path: Path) -> None:
    """A run killed after its commit record was written; then the table is dropped and purged. Before the fix the
    recovery's replay created a new table holding only that commit's rows, and moved the watermarks past every row
    committed before. Now the table commit refuses (the table is not the one the commit was built for) and the
    sequence stays pending, named; nothing is created."""
    from gobblin_py.testing.crash import SIGKILLED, cli

    job = iceberg_job(tmp_path)
    assert _run(tmp_path, job).succeeded
    _new_clicks(tmp_path, 95_000, 5)
    assert _run(tmp_path, job).succeeded  # the second commit pins the table's uuid
    uuid = str(catalog(tmp_path).load_table("db.clicks").metadata.table_uuid)
    _new_clicks(tmp_path, 96_000, 5)
    assert cli(["run", "job.yaml", "--in-process"], tmp_path, crash_at="commit.after_store_write").returncode == SIGKILLED
    cat = catalog(tmp_path)
    cat.drop_table("db.clicks")
    shutil.rmtree(tmp_path / "warehouse" / "db" / "clicks")
    again = run_cli("run", "job.yaml", "--in-process", cwd=tmp_path)
    assert again.returncode == 1, again.stdout + again.stderr
    assert f"not Iceberg table uuid {uuid}, which commit" in again.stdout + again.stderr, again.stdout + again.stderr
    assert not catalog(tmp_path).table_exists("db.clicks")
    assert CommitStepStore(tmp_path / "work").exists("t", "clicks")  # still pending, for a person to decide
