"""`gobblin-py infer`: a first job's Avro schema from a sample of its input, usable as it is by `json_to_avro`."""

from __future__ import annotations

import json
from pathlib import Path

from support.jobs import example_job, write_job

from gobblin_py.builtin.schemas.infer import infer_schema
from gobblin_py.testing.crash import cli
from gobblin_py.testing.outputs import read_avro_dir


def test_the_inferred_schema_runs_the_example_job_like_the_hand_written_one(tmp_path: Path) -> None:
    write_job(tmp_path, example_job(tmp_path))
    done = cli(["infer", "job.yaml", "--out", "inferred.avsc"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "from 1999 records (clicks 1000, orders 999)" in done.stdout and "json_to_avro" in done.stdout
    assert "field amount: 1 value(s) that are not double (e.g. 'abc')" in done.stderr  # the sample's bad record named
    assert "merged the samples of 2 datasets (clicks, orders) into one schema: no field became nullable" in done.stderr
    schema = json.loads((tmp_path / "inferred.avsc").read_text())
    types = {f["name"]: f["type"] for f in schema["fields"]}
    assert types["amount"] == ["null", "double"] and types["user"] == "string" and types["ts"] == "long"
    job = example_job(tmp_path)
    job["converters"][0]["schema"] = str(tmp_path / "inferred.avsc")
    write_job(tmp_path, job)
    run = cli(["run", "job.yaml", "--in-process"], tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = read_avro_dir(tmp_path / "output")
    assert len(rows) == len({(r["_file"].split("/")[0], r["id"]) for r in rows}) == 2998  # as with event.avsc
    again = cli(["infer", "job.yaml", "--out", "inferred.avsc"], tmp_path)
    assert again.returncode == 2 and "--force" in again.stderr  # never overwrites a schema someone edited


def test_csv_text_missing_fields_blank_cells_and_nesting() -> None:
    rows = [{"id": "1", "ts": "2026-01-01T10:00:00Z", "ok": "true", "amount": "", "note": "", "n": {"x": 1}},
            {"id": "2", "ts": "2026-01-02T10:00:00+01:00", "ok": "false", "amount": "2.5", "note": "hi", "n": {"x": 2.5}},
            {"id": "3", "ts": "2026-01-03 10:00:00", "ok": "true", "amount": "7", "note": "x", "tags": ["a"], "n": {"x": 3, "y": None}}]
    inferred = infer_schema(rows, name="Row")
    types = {f["name"]: f["type"] for f in inferred.schema["fields"]}
    assert types["id"] == "long" and types["ok"] == "boolean"
    assert types["ts"] == {"type": "long", "logicalType": "timestamp-millis"}
    assert types["amount"] == ["null", "double"]  # a blank cell of numbers: CSV's null
    assert types["note"] == "string"  # a blank among text is text
    assert types["tags"] == ["null", {"type": "array", "items": "string"}]  # missing from the first records
    assert types["n"]["name"] == "Row_n" and {f["name"]: f["type"] for f in types["n"]["fields"]} == {
        "x": "double", "y": ["null", "string"]}
    assert inferred.records == 3 and not inferred.notes


def test_a_name_avro_cannot_carry_is_left_out_and_said() -> None:
    inferred = infer_schema([{"ok": 1, "bad-name": 2, "2x": 3}])
    assert [f["name"] for f in inferred.schema["fields"]] == ["ok"] and inferred.unnamed == ["2x", "bad-name"]


def test_an_input_with_no_records_is_an_error_naming_the_job(tmp_path: Path) -> None:
    job = example_job(tmp_path)
    for f in (tmp_path / "data").rglob("*.*"):
        f.unlink()
    write_job(tmp_path, job)
    done = cli(["infer", "job.yaml"], tmp_path)
    assert done.returncode == 2 and "held no records" in done.stderr and "Traceback" not in done.stderr


def test_a_job_with_no_converter_yet_is_what_infer_is_for(tmp_path: Path) -> None:
    """validate refuses such a job and names `infer` as the fix, so `infer` must take it."""
    job = example_job(tmp_path)
    del job["converters"]
    write_job(tmp_path, job)
    refused = cli(["validate", "job.yaml"], tmp_path)
    assert refused.returncode == 2 and "gobblin-py infer" in refused.stderr
    done = cli(["infer", "job.yaml", "--out", "first.avsc"], tmp_path)
    assert done.returncode == 0, done.stderr
    job["converters"] = [{"class": "json_to_avro", "schema": str(tmp_path / "first.avsc")}]
    write_job(tmp_path, job)
    assert cli(["validate", "job.yaml"], tmp_path).returncode == 0
