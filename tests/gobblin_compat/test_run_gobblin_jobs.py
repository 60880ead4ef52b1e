"""Gobblin job files run unchanged on the shared Spark session: CSV → Avro by day, JSON forked into two branches,
and the Kafka quick start (JSON messages → Avro) resuming from offsets imported with `state reset --import-offsets`."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from pathlib import Path

import fastavro
import orjson
import pytest
from support.jobs import run_cli

from gobblin_py.config import load_job
from gobblin_py.runtime.executors.spark import SharedSparkExecutor
from gobblin_py.runtime.runner import JobRunner
from gobblin_py.testing.outputs import read_avro_dir, read_error_files

pytestmark = pytest.mark.spark

JOBS = Path(__file__).parent / "jobs"
JAN1 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def _run(job: Path, spark):
    spec = load_job(job)
    return JobRunner(spec, SharedSparkExecutor(spec, spark)).run()


def _env(monkeypatch: pytest.MonkeyPatch, tmp: Path, **more: str) -> None:
    monkeypatch.setenv("GOBBLIN_WORK_DIR", str(tmp / "gw"))
    monkeypatch.setenv("INPUT", str(tmp / "in"))
    for key, value in more.items():
        monkeypatch.setenv(key, value)


def test_csv_files_become_avro_partitioned_by_day(tmp_path: Path, spark, monkeypatch: pytest.MonkeyPatch) -> None:
    orders = tmp_path / "in" / "orders"
    orders.mkdir(parents=True)
    header = "id,ts,user,kind,amount,country\n"
    (orders / "day1.csv").write_text(header + "1,2026-01-01T08:00:00Z,u1,order,9.5,DE\n2,1767261600000,u2,order,,\n")
    (orders / "day2.csv").write_text(header + "3,2026-01-02T09:30:00Z,u3,order,1.25,FR\nfour,2026-01-02T10:00:00Z,u4,order,2,FR\n")
    (orders / "notes.jsonl").write_text('{"id": 99}\n')  # not CSV: the CSV job leaves it alone, as Gobblin's would parse it as CSV
    _env(monkeypatch, tmp_path)
    result = _run(JOBS / "csv-to-avro.pull", spark)
    assert result.succeeded, result.error
    out = tmp_path / "gw" / "job-output" / "orders"
    records = read_avro_dir(out)
    utc = dt.UTC
    assert sorted((r["_file"].rsplit("/", 1)[0], r["id"], r["ts"], r["amount"], r["country"]) for r in records) == [
        ("2026/01/01", 1, dt.datetime(2026, 1, 1, 8, tzinfo=utc), 9.5, "DE"),
        ("2026/01/01", 2, dt.datetime(2026, 1, 1, 10, tzinfo=utc), None, None),  # epoch millis 1767261600000
        ("2026/01/02", 3, dt.datetime(2026, 1, 2, 9, 30, tzinfo=utc), 1.25, "FR"),
    ]
    [bad] = read_error_files(out)
    assert bad["location"].endswith("day2.csv:3") and "'id'" in bad["reason"]
    with open(next(out.rglob("*.avro")), "rb") as f:
        schema = fastavro.reader(f).writer_schema
    assert schema["name"] == "shop.orders"  # extract.namespace . extract.table.name, as Gobblin names the record
    assert [(f["name"], f["type"]) for f in schema["fields"]][:3] == [
        ("id", "long"), ("ts", {"type": "long", "logicalType": "timestamp-millis"}), ("user", "string")]


def test_a_forked_json_job_publishes_each_branch_to_its_own_directory(tmp_path: Path, spark, monkeypatch: pytest.MonkeyPatch) -> None:
    clicks = tmp_path / "in" / "clicks"
    clicks.mkdir(parents=True)
    events = [{"id": i, "ts": JAN1 + i, "user": f"u{i}", "kind": "click", "amount": None, "country": "DE"} for i in range(1, 6)]
    (clicks / "a.jsonl").write_bytes(b"\n".join(orjson.dumps(e) for e in events) + b"\n")
    _env(monkeypatch, tmp_path)
    result = _run(JOBS / "json-fork.pull", spark)
    assert result.succeeded, result.error
    for final, branch, codec, fields in (("out-0", "deflated", "deflate", ["id", "ts", "user", "kind", "amount", "country"]),
                                         ("out-1", "snappy", "snappy", ["id", "ts", "user"])):
        root = tmp_path / "gw" / final / "clicks" / branch
        files = list(root.rglob("*.avro"))
        assert files, f"nothing under {root}"
        for path in files:
            with open(path, "rb") as f:
                reader = fastavro.reader(f)
                assert reader.codec == codec
                assert [x["name"] for x in reader.writer_schema["fields"]] == fields
        assert sorted(r["id"] for r in read_avro_dir(root)) == [1, 2, 3, 4, 5]


@pytest.mark.kafka
def test_kafka_quick_start_resumes_from_imported_gobblin_offsets(tmp_path: Path, spark, broker, topic: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from support.kafka_jobs import new_topic

    data = new_topic(broker.bootstrap, topic, partitions=2, per_partition=10)
    env = {"KAFKA_BROKERS": broker.bootstrap, "TOPIC": topic}
    _env(monkeypatch, tmp_path, **env)
    offsets = tmp_path / "offsets.csv"
    offsets.write_text(f"topic,partition,offset\n{topic},0,7\n")  # where Gobblin's job had got to on partition 0
    imported = run_cli("state", "reset", str(JOBS / "kafka-to-avro.pull"), "--import-offsets", str(offsets), "--new", "--yes",
                       cwd=tmp_path, env={"GOBBLIN_WORK_DIR": str(tmp_path / "gw"), **env})
    assert imported.returncode == 0, imported.stderr
    assert f"dataset {topic}: watermarks 0 keys → 1 keys\n    0: - → 7\ndataset {topic}: watermarks reset" in imported.stdout
    result = _run(JOBS / "kafka-to-avro.pull", spark)
    assert result.succeeded, result.error
    ids = Counter(r["id"] for r in read_avro_dir(tmp_path / "gw" / "job-output" / topic))
    # partition 0 from the imported offset, partition 1 (no offset imported) from the earliest: each record once
    assert ids == Counter(e["id"] for e in data[0][7:] + data[1])
    [dataset] = result.datasets
    assert dataset.dataset == topic and dataset.records_written == 13
