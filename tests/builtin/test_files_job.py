"""The files source in whole runs (in-process executor, no Spark): what lands in the output and what the run says."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.jobs import example_job, write_job

from gobblin_py.config import load_job
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import DatasetStatus, JobResult, JobRunner
from gobblin_py.state.store import StateStore
from gobblin_py.testing.outputs import read_avro_dir, read_error_files

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
FIELDS = ["id", "ts", "user", "kind", "amount", "country"]


def _event(i: int) -> dict[str, Any]:
    return {"id": i, "ts": START_MS + i, "user": f"u{i % 7}", "kind": "click", "amount": None, "country": "DE"}


def _jsonl(path: Path, ids: range) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(_event(i)) + "\n" for i in ids))
    return path


def _csv_rows(ids: range) -> list[str]:
    return [f"{i},{START_MS + i},u{i % 7},click,,DE\n" for i in ids]


def _run(tmp: Path, **source: Any) -> JobResult:
    job = example_job(tmp, source={"class": "files", "path": str(tmp / "in"), **source})
    return JobRunner(load_job(write_job(tmp, job)), InProcessExecutor()).run()


def _ids(tmp: Path, dataset: str) -> list[int]:
    return sorted(r["id"] for r in read_avro_dir(tmp / "output" / dataset))


def _summary(result: JobResult, dataset: str) -> Any:
    (summary,) = [d for d in result.datasets if d.dataset == dataset]
    return summary


def test_two_files_with_one_name_in_different_directories_both_survive(tmp_path: Path) -> None:
    # the CRC32C of these two paths (in one dataset) is the same: the old 32-bit names collided and one
    # file's output replaced the other's
    _jsonl(tmp_path / "in" / "events" / "dt=871176081de8" / "part-00000.jsonl", range(1, 401))
    _jsonl(tmp_path / "in" / "events" / "dt=0ee58338dc00" / "part-00000.jsonl", range(401, 801))
    result = _run(tmp_path, pack_bytes=0)  # a unit, and an output file, per input file
    assert result.succeeded, result.error
    assert _ids(tmp_path, "events") == list(range(1, 801))
    names = sorted(p.name for p in (tmp_path / "output" / "events").rglob("*.avro"))
    assert len(names) == 2 and all(n.startswith("part-00000-") for n in names)


def test_csv_row_with_invalid_utf8_is_rejected_and_the_rest_is_read(tmp_path: Path) -> None:
    file = tmp_path / "in" / "orders" / "a.csv"
    file.parent.mkdir(parents=True)
    rows = _csv_rows(range(1, 11))
    rows[4] = f"5,{START_MS + 5},u\xff5,click,,DE\n"
    file.write_bytes((",".join(FIELDS) + "\n").encode() + b"".join(
        r.encode("latin-1") if i == 4 else r.encode() for i, r in enumerate(rows)))
    result = _run(tmp_path)
    assert result.succeeded, result.error
    assert _ids(tmp_path, "orders") == [1, 2, 3, 4, 6, 7, 8, 9, 10]
    (err,) = read_error_files(tmp_path / "output" / "orders")
    assert err["location"] == f"{file}:6" and "UTF-8" in err["reason"]
    assert _summary(result, "orders").status is DatasetStatus.COMMITTED


def test_csv_field_over_128_kib_is_read(tmp_path: Path) -> None:
    file = tmp_path / "in" / "orders" / "a.csv"
    file.parent.mkdir(parents=True)
    rows = _csv_rows(range(1, 6))
    rows[2] = f"3,{START_MS + 3},{'u' * 200_000},click,,DE\n"
    file.write_text(",".join(FIELDS) + "\n" + "".join(rows))
    result = _run(tmp_path)
    assert result.succeeded, result.error
    records = read_avro_dir(tmp_path / "output" / "orders")
    assert sorted(r["id"] for r in records) == [1, 2, 3, 4, 5]
    assert [len(r["user"]) for r in records if r["id"] == 3] == [200_000]
    assert read_error_files(tmp_path / "output" / "orders") == []


def test_committed_watermarks_are_bytes_per_relative_path(tmp_path: Path) -> None:
    a = _jsonl(tmp_path / "in" / "events" / "a.jsonl", range(1, 4))
    b = _jsonl(tmp_path / "in" / "events" / "2026" / "b.jsonl", range(4, 6))
    assert _run(tmp_path).succeeded
    assert StateStore(tmp_path / "work", "t").watermarks()["events"] == {
        "a.jsonl": a.stat().st_size, "2026/b.jsonl": b.stat().st_size}


def test_compressed_csv_and_json_lines_are_read_by_their_inner_extension(tmp_path: Path) -> None:
    import bz2
    import gzip

    import zstandard

    header = (",".join(FIELDS) + "\n").encode()
    ds = tmp_path / "in" / "orders"
    ds.mkdir(parents=True)
    (ds / "a.csv.gz").write_bytes(gzip.compress(header + "".join(_csv_rows(range(1, 4))).encode()))
    (ds / "b.csv.bz2").write_bytes(bz2.compress(header + "".join(_csv_rows(range(4, 7))).encode()))
    (ds / "c.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(
        "".join(json.dumps(_event(i)) + "\n" for i in range(7, 10)).encode()))
    (ds / "d.jsonl.gz").write_bytes(gzip.compress("".join(json.dumps(_event(i)) + "\n" for i in range(10, 12)).encode()))
    result = _run(tmp_path, include=["*.csv.gz", "*.csv.bz2", "*.jsonl.zst", "*.jsonl.gz"])
    assert result.succeeded, result.error
    assert _ids(tmp_path, "orders") == list(range(1, 12))
    assert read_error_files(tmp_path / "output" / "orders") == []


def test_compressed_files_are_included_by_default(tmp_path: Path) -> None:
    import gzip

    ds = tmp_path / "in" / "events"
    ds.mkdir(parents=True)
    (ds / "a.jsonl.gz").write_bytes(gzip.compress("".join(json.dumps(_event(i)) + "\n" for i in range(1, 4)).encode()))
    result = _run(tmp_path)
    assert result.succeeded, result.error
    assert _ids(tmp_path, "events") == [1, 2, 3]


def test_file_of_unknown_format_fails_the_run_naming_it_and_the_rest_is_read(tmp_path: Path) -> None:
    _jsonl(tmp_path / "in" / "events" / "a.jsonl", range(1, 4))
    (tmp_path / "in" / "events" / "b.dat").write_text("1|2|3\n")
    result = _run(tmp_path, include=["*.jsonl", "*.dat"])
    assert not result.succeeded
    assert "b.dat" in result.error and "format" in result.error
    assert _ids(tmp_path, "events") == [1, 2, 3]
    assert "b.dat" not in StateStore(tmp_path / "work", "t").watermarks()["events"]


def test_files_directly_under_path_are_a_dataset_named_after_it(tmp_path: Path) -> None:
    _jsonl(tmp_path / "in" / "top.jsonl", range(1, 4))
    _jsonl(tmp_path / "in" / "events" / "a.jsonl", range(4, 6))
    result = _run(tmp_path)
    assert result.succeeded, result.error
    assert _ids(tmp_path, "in") == [1, 2, 3]
    assert _ids(tmp_path, "events") == [4, 5]


def test_files_directly_under_path_take_the_root_dataset_setting(tmp_path: Path) -> None:
    _jsonl(tmp_path / "in" / "top.jsonl", range(1, 4))
    result = _run(tmp_path, root_dataset="loose")
    assert result.succeeded, result.error
    assert _ids(tmp_path, "loose") == [1, 2, 3]


def test_rows_appended_after_ingestion_fail_the_run_by_default_naming_the_file(tmp_path: Path) -> None:
    file = _jsonl(tmp_path / "in" / "events" / "a.jsonl", range(1, 4))
    assert _run(tmp_path).succeeded
    old = file.stat().st_size
    with open(file, "a") as f:
        f.write(json.dumps(_event(4)) + "\n")
    new = file.stat().st_size
    result = _run(tmp_path)
    assert not result.succeeded
    (problem,) = _summary(result, "events").input_problems
    assert f"{file} changed after it was ingested ({old} → {new} bytes)" in problem
    assert f"--to a.jsonl={new}" in problem and "ingest_appended: true" in problem
    assert _ids(tmp_path, "events") == [1, 2, 3]
    assert StateStore(tmp_path / "work", "t").watermarks()["events"] == {"a.jsonl": old}


def test_ingest_appended_reads_only_the_new_rows(tmp_path: Path) -> None:
    jl = _jsonl(tmp_path / "in" / "events" / "a.jsonl", range(1, 4))
    csv_file = tmp_path / "in" / "events" / "b.csv"
    csv_file.write_text(",".join(FIELDS) + "\n" + "".join(_csv_rows(range(10, 13))))
    assert _run(tmp_path, ingest_appended=True).succeeded
    with open(jl, "a") as f:
        f.write(json.dumps(_event(4)) + "\n" + json.dumps(_event(5)) + "\n")
    with open(csv_file, "a") as f:
        f.write("".join(_csv_rows(range(13, 15))))
    result = _run(tmp_path, ingest_appended=True)
    assert result.succeeded, result.error
    assert _ids(tmp_path, "events") == [1, 2, 3, 4, 5, 10, 11, 12, 13, 14]
    assert StateStore(tmp_path / "work", "t").watermarks()["events"] == {
        "a.jsonl": jl.stat().st_size, "b.csv": csv_file.stat().st_size}
    assert len({p.name for p in (tmp_path / "output" / "events").rglob("*.avro")}) == 4
    assert _summary(_run(tmp_path, ingest_appended=True), "events").status is DatasetStatus.NO_NEW_DATA


def test_a_shrunk_file_is_reported_even_with_ingest_appended(tmp_path: Path) -> None:
    file = _jsonl(tmp_path / "in" / "events" / "a.jsonl", range(1, 4))
    assert _run(tmp_path, ingest_appended=True).succeeded
    _jsonl(file, range(1, 2))
    result = _run(tmp_path, ingest_appended=True)
    assert not result.succeeded
    (problem,) = _summary(result, "events").input_problems
    assert "is shorter than what was ingested of it" in problem and "copytruncate" in problem
    assert "--to a.jsonl=0" in problem  # read from its start: what it holds now is new


def test_a_tailed_file_truncated_and_written_longer_is_refused_until_reset_then_read_whole(tmp_path: Path) -> None:
    """copytruncate log rotation: the file is copied away, truncated and written again, past the committed offset by
    the next run. Before the fix the run read on from the old offset: the new content's first bytes were lost and a
    line cut in two (a bad record), while the run said committed. Now the file is an input problem naming it and the
    fix; after `state reset --to a.jsonl=0` the next run reads the new content whole, once."""
    from support.jobs import run_cli

    file = _jsonl(tmp_path / "in" / "events" / "a.jsonl", range(1, 4))
    assert _run(tmp_path, ingest_appended=True).succeeded
    offset = file.stat().st_size
    _jsonl(file, range(100, 110))  # rotated: truncated, then ten new lines, longer than the old offset
    assert file.stat().st_size > offset
    result = _run(tmp_path, ingest_appended=True)
    assert not result.succeeded
    (problem,) = _summary(result, "events").input_problems
    assert f"{file} is not the file whose first {offset} bytes were ingested" in problem
    assert "--to a.jsonl=0" in problem
    assert _ids(tmp_path, "events") == [1, 2, 3] and not read_error_files(tmp_path / "output")
    reset = run_cli("state", "reset", "job.yaml", "--dataset", "events", "--to", "a.jsonl=0", "--yes", cwd=tmp_path)
    assert reset.returncode == 0, reset.stderr
    again = _run(tmp_path, ingest_appended=True)
    assert again.succeeded, again.error
    assert _ids(tmp_path, "events") == [1, 2, 3, *range(100, 110)]
    with open(file, "a") as f:  # and appending goes on as before
        f.write(json.dumps(_event(110)) + "\n")
    assert _run(tmp_path, ingest_appended=True).succeeded
    assert _ids(tmp_path, "events") == [1, 2, 3, *range(100, 111)]
