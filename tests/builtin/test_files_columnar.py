"""JSON-lines files → json_to_avro → parquet or avro on the columnar path against the same job record by record
(`job.columnar: false`), in-process: every published file (data and error files) the same bytes, the same counts,
and the columnar path taken where the lines are clean."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from gobblin_py.builtin.sources.files import extractors
from gobblin_py.config import load_job
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import JobResult, JobRunner
from gobblin_py.testing.outputs import read_error_files

from support.jobs import write_job
from support.schemas import FLAT_EVENT

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
SCHEMA: dict[str, Any] = FLAT_EVENT

# Lines the row path coerces, defaults, drops-and-counts or refuses ({i} is the line's id)
ODD = [
    b'{"id":"{i}","ts":1767225600000,"n":5,"user":"u","ok":true,"tier":"t"}',           # text -> long
    b'{"id":{i},"ts":"2026-01-02T03:04:05Z","n":5,"user":"u","ok":true,"tier":"t"}',     # ISO timestamp
    b'{"id":{i},"ts":1767225600000,"n":5,"user":"u","ok":"yes","tier":"t"}',             # text -> boolean
    b'{"id":{i},"ts":1767225600000,"n":5,"user":"u","ok":true,"tier":"t","extra":1}',    # unknown field: counted
    b'{"id":{i},"ts":1767225600000,"n":5,"user":"u","ok":true,"tier":"t","id":-1}',      # duplicate key
    b'{"id":{i},"ts":1767225600000,"n":5,"user":"u","ok":true,"amount":NaN}',            # not JSON
    b'{"id":{i},"ts":1767225600000,"n":3000000000,"user":"u","ok":true}',                # beyond an int
    b'{"id":{i},"ts":1767225600000,"n":5,"ok":true}',                                    # a required field missing
    b'{"id":{i},"ts":1767225600000,"n":5,"user":null,"ok":true}',                        # null for a required one
    b'{"id":{i},"ts":1767225600000,"n":5,"user":"u","ok":true,"country":""}',            # blank -> null
    b'{"id":{i},"ts":1767225600000,"n":5,"user":"u","ok":true,"tier":""}',               # blank -> the default
    b'{"id":{i},"ts":1767225600000,"n":5,"user":"u","ok":true}',                         # missing -> the default
    b'{"id":{i},"ts":1767225600000,"n":5,"user":"\xff\xfe","ok":true,"tier":"t"}',       # not UTF-8
    b'{"id":{i},"ts":1767225600000,"n":5,"user":"\\ud800","ok":true,"tier":"t"}',        # a lone surrogate
    b'{"id":{i},"ts":1767225600000,"n":5,"user":5,"ok":true,"tier":"t"}',                # number for text
    b'{"id":{i},"ts":1767225600000,"n":5,"user":"u","ok":true,"tier":"t"} {"id":1}',     # two documents
    b'  {"id":{i},"ts":1767225600000,"n":5,"user":"u","ok":true,"tier":"t"}  ',          # padded
    b'{"id":{i},', b'[1,2]', b'5', b'"text"', b'null', b'{"id":{i}} trailing',           # invalid JSON, no object
]


def _line(i: int) -> bytes:
    """A clean line: every field of its type, nothing to coerce."""
    return json.dumps({"id": i, "ts": START_MS + (i % 20_000) * 60_000, "n": i % 1000, "user": f"u{i % 7}", "ok": i % 2 == 0,
                       "amount": None if i % 5 == 0 else i / 4, "country": ["DE", "FR", ""][i % 3],
                       "tier": "gold"}, separators=(",", ":")).encode()


def _lines(ids: range, end: bytes = b"\n") -> bytes:
    return b"".join(_line(i) + end for i in ids)


def _mixed(ids: range) -> bytes:
    """Clean lines with blank and whitespace-only lines among them, and every odd line among the first 3000."""
    out = []
    for k, i in enumerate(ids):
        if k % 37 == 5 and k < 3000:
            out.append(ODD[(k // 37) % len(ODD)].replace(b"{i}", str(i).encode()))
        elif k % 53 == 7:
            out.append(b"")
        elif k % 61 == 3:
            out.append(b" \t\r")
        else:
            out.append(_line(i))
    return b"\n".join(out) + b"\n"


def _inputs(root: Path) -> Path:
    """One dataset of files, each a kind of input the two paths must treat alike."""
    ds = root / "events"
    ds.mkdir(parents=True)
    (ds / "clean.jsonl").write_bytes(_lines(range(1, 20_001)))  # several batches
    (ds / "mixed.jsonl").write_bytes(_mixed(range(100_001, 120_001)))  # odd lines in its first batch
    (ds / "crlf.jsonl").write_bytes(_lines(range(200_001, 200_301), b"\r\n") + b'{"id":\r\n' + _lines(range(200_301, 200_311), b"\r\n"))
    (ds / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + _lines(range(300_001, 300_501)))
    (ds / "blanks.jsonl").write_bytes(b"\n \n" + _lines(range(400_001, 400_201)) + b"\n\n\t\n" + _lines(range(400_201, 400_301))
                                      + b"\n  \n")
    (ds / "no-newline.jsonl").write_bytes(_lines(range(500_001, 500_100)) + _line(500_100))
    (ds / "gz.jsonl.gz").write_bytes(gzip.compress(_lines(range(600_001, 605_001))))
    cut = b"".join(b"[2]\n" if i % 30 == 20 else _line(i) + b"\n" for i in range(700_001, 720_001))  # a bad line each 30
    whole = gzip.compress(cut, compresslevel=1)
    (ds / "cut.jsonl.gz").write_bytes(whole[:len(whole) * 3 // 4])  # truncated: the lines before it, then one reject
    (ds / "grows.jsonl").write_bytes(_lines(range(800_001, 801_001)))
    return root


CLEAN = ["clean", "bom", "blanks", "no-newline", "gz"]  # files of clean lines (and blank ones) only


def _job(tmp: Path, inputs: Path, writer: str, columnar: bool) -> Path:
    schema = tmp / "e.avsc"
    schema.write_text(json.dumps(SCHEMA))
    partition = {"column": "ts", "granularity": "DAY", "pattern": "yyyy/MM/dd"}
    writers = {"parquet": {"class": "parquet", "row_group_records": 1000, "partition": partition},
               "avro": {"class": "avro", "codec": "deflate", "sync_interval": 4096, "partition": partition}}
    return write_job(tmp, {
        "job": {"name": "t", "work_dir": str(tmp / "work"), "max_task_retries": 1, "columnar": columnar},
        "source": {"class": "files", "path": str(inputs), "ingest_appended": True},
        "converters": [{"class": "json_to_avro", "schema": str(schema)}],
        "writer": writers[writer],
        "publisher": {"final_dir": str(tmp / "output")},
    })


def _published(output: Path) -> dict[str, bytes]:
    """Every file a run published (data and error files), by its path under the output directory."""
    return {str(p.relative_to(output)): p.read_bytes() for p in sorted(output.rglob("*")) if p.is_file()}


def _columnar_by_file(result: JobResult) -> dict[str, tuple[int, int]]:
    """(records extracted, of those columnar) per input file's stem."""
    return {Path(t.workunit.props["file"]).name.split(".")[0]: (t.records_extracted, t.records_columnar) for t in result.tasks}


def _run(job: Path) -> JobResult:
    result = JobRunner(load_job(job), InProcessExecutor()).run()
    assert result.succeeded, result.error
    return result


@pytest.mark.parametrize("writer", ["parquet", "avro"])
def test_the_columnar_path_publishes_what_the_row_path_publishes(tmp_path: Path, writer: str) -> None:
    inputs = _inputs(tmp_path / "in")
    runs = {c: tmp_path / ("columnar" if c else "rows") for c in (True, False)}
    for d in runs.values():
        d.mkdir()
    jobs = {c: _job(d, inputs, writer, c) for c, d in runs.items()}
    first = {c: _run(job) for c, job in jobs.items()}
    appended_at = (inputs / "events" / "grows.jsonl").stat().st_size
    with open(inputs / "events" / "grows.jsonl", "ab") as f:  # the next runs read the appended range only
        f.write(_mixed(range(900_001, 912_001)))
    second = {c: _run(job) for c, job in jobs.items()}

    published = {c: _published(d / "output") for c, d in runs.items()}
    assert published[True] == published[False]
    assert sum(name.endswith(f".{writer}") for name in published[True]) > 10  # by day, and the appended range's own
    errors = read_error_files(runs[True] / "output")
    assert {Path(e["location"].split(":")[0]).name for e in errors} == {"mixed.jsonl", "crlf.jsonl", "cut.jsonl.gz", "grows.jsonl"}
    grown = [e["location"] for e in errors if "grows.jsonl" in e["location"]]
    assert grown and all(w.endswith(f" (line counted from byte {appended_at})") for w in grown)  # the appended range's

    for results in (first, second):
        fast, slow = (r.datasets[0] for r in (results[True], results[False]))
        assert (fast.records_extracted, fast.records_written, fast.records_rejected, fast.counters) == \
               (slow.records_extracted, slow.records_written, slow.records_rejected, slow.counters)
        assert fast.counters["unknown_fields_dropped"]  # the odd lines went the row path's way, counted alike
        assert all(c == 0 for _, c in _columnar_by_file(results[False]).values())
    by_file = _columnar_by_file(first[True])
    for name in CLEAN:  # every line in columnar batches
        extracted, columnar = by_file[name]
        assert columnar == extracted > 0, name
    assert by_file["crlf"][1] == 0  # a "\r" before each line end: the row path, to the same output
    assert 0 < by_file["mixed"][1] < by_file["mixed"][0]
    assert 0 < _columnar_by_file(second[True])["grows"][1]


def test_what_a_user_sees_of_bad_lines_on_the_columnar_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(extractors, "BATCH_LINES", 64)  # many batches: their boundaries between blanks and bad lines
    inputs = _inputs(tmp_path / "in")
    (tmp_path / "run").mkdir()
    _run(_job(tmp_path / "run", inputs, "parquet", True))
    output = tmp_path / "run" / "output" / "events"
    ids = [i for p in sorted(output.rglob("*.parquet")) for i in pq.read_table(p).column("id").to_pylist()]
    assert set(range(1, 20_001)) | set(range(300_001, 300_501)) | set(range(600_001, 605_001)) <= set(ids)
    errors = read_error_files(output)
    by_file: dict[str, list[dict[str, Any]]] = {}
    for e in errors:
        by_file.setdefault(Path(e["location"].split(":")[0]).name, []).append(e)
    ds = inputs / "events"
    assert [e["location"] for e in by_file["crlf.jsonl"]] == [f"{ds / 'crlf.jsonl'}:301"]
    assert by_file["crlf.jsonl"][0]["record"] == '{"id":' and "not valid JSON" in by_file["crlf.jsonl"][0]["reason"]
    cut = by_file["cut.jsonl.gz"]
    written = sum(1 for i in ids if 700_001 <= i < 720_001)
    read = written + len(cut) - 1  # lines read whole: those written and the bad ones
    assert [e["location"] for e in cut[:-1]] == [f"{ds / 'cut.jsonl.gz'}:{n}" for n in range(10, read + 1, 30)]  # ids 700_010, 700_040, …
    assert all("expected a JSON object" in e["reason"] for e in cut[:-1]) and len(cut) > 5
    # after every line read before it (in the error file too), the one reject where decompression stopped
    assert "cannot decompress" in cut[-1]["reason"] and cut[-1]["location"] == f"{ds / 'cut.jsonl.gz'}:{read + 1}"
    mixed = [(int(e["location"].rsplit(":", 1)[1]), e["stage"]) for e in by_file["mixed.jsonl"]]
    odd_lines = [k + 1 for k in range(3000) if k % 37 == 5]  # see `_mixed`
    assert {line for line, _ in mixed} <= set(odd_lines) and len(mixed) >= 10
