"""JSON-lines and CSV files → json_to_avro → parquet or avro on the columnar path against the same job record by record
(`job.columnar: false`), in-process: every published file (data and error files) the same bytes, the same counts,
and the columnar path taken where the lines or rows are clean."""

from __future__ import annotations

import datetime as dt
import gzip
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from support.jobs import write_job
from support.schemas import FLAT_EVENT

from gobblin_py.builtin.sources.files import reading
from gobblin_py.builtin.sources.files.split import FileSplit
from gobblin_py.config import load_job
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import JobResult, JobRunner
from gobblin_py.testing.outputs import read_error_files

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


def _job(tmp: Path, inputs: Path, writer: str, columnar: bool, source: dict[str, Any] | None = None,
         converter: dict[str, Any] | None = None) -> Path:
    schema = tmp / "e.avsc"
    schema.write_text(json.dumps(SCHEMA))
    partition = {"column": "ts", "granularity": "DAY", "pattern": "yyyy/MM/dd"}
    writers = {"parquet": {"class": "parquet", "row_group_records": 1000, "partition": partition},
               "avro": {"class": "avro", "codec": "deflate", "sync_interval": 4096, "partition": partition}}
    return write_job(tmp, {
        "job": {"name": "t", "work_dir": str(tmp / "work"), "max_task_retries": 1, "columnar": columnar},
        "source": {"class": "files", "path": str(inputs), "ingest_appended": True, "pack_bytes": 0, **(source or {})},
        "converters": [{"class": "json_to_avro", "schema": str(schema), **(converter or {})}],
        "writer": writers[writer],
        "publisher": {"final_dir": str(tmp / "output")},
    })


def _published(output: Path) -> dict[str, bytes]:
    """Every file a run published (data and error files), by its path under the output directory (not the job's claim
    on it, `_gobblin-py/`, which names the run's own work directory)."""
    return {str(p.relative_to(output)): p.read_bytes() for p in sorted(output.rglob("*"))
            if p.is_file() and "_gobblin-py" not in p.relative_to(output).parts}


def _columnar_by_file(result: JobResult) -> dict[str, tuple[int, int]]:
    """(records extracted, of those columnar) per input file's stem."""
    return {Path(FileSplit.of(t.workunit).file).name.split(".")[0]: (t.records_extracted, t.records_columnar) for t in result.tasks}


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
    assert _columnar_by_file(second[True])["grows"][1] > 0


def test_what_a_user_sees_of_bad_lines_on_the_columnar_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reading, "BATCH_LINES", 64)  # many batches: their boundaries between blanks and bad lines
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


# --- CSV -------------------------------------------------------------------------------------------------------------

CSV_HEADER = b"id,ts,n,user,ok,amount,country,tier\n"

# Rows the row path coerces, defaults or refuses, or that Arrow would read otherwise ({i}: the id, {ts}: epoch ms)
CSV_ODD = [
    b"{i},{ts},1_000,u,true,,,t",            # "_" between digits: int() takes it
    b"{i},{ts},\xd9\xa3,u,true,,,t",         # an Arabic-Indic digit: int() takes it
    b"{i},{ts},5,u,true,nan,,t",             # float() takes nan and inf
    b"{i},{ts},5,u,true,1e400,,t",
    b"{i},{ts},5,u,true,1_5.5,,t",
    b"{i},{ts},5,u,maybe,,,t",               # not a boolean
    b"{i},{ts},5,u,true,abc,,t",             # not a number
    b"{i},{ts},99999999999,u,true,,,t",      # beyond an int
    b"{i},{ts},,u,true,,,t",                 # an empty cell of a required int
    b"{i},{ts},5,u,true,,,",                 # an empty cell of a field with a default: the default
    b"{i},2026-01-02T03:04:05Z,5,u,true,,,t",  # an ISO timestamp among epoch ones
    b"{i},{ts}\x0b,5,u,true,,,t",            # whitespace str.strip() takes off and Arrow does not
    b"{i},{ts},5",                           # too few columns
    b"{i},{ts},5,u,true,,,t,x",              # too many
    b"{i},{ts},5,\xff\xfe,true,,,t",         # not UTF-8
    b'{i},{ts},5,"u\rv",true,,,t',           # a bare CR in a quoted field: a line end to Arrow
    b"{i},{ts},5,u,true,,,t,",               # a trailing delimiter
]


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _csv_row(i: int, user: str | None = None, ok: str | None = None, n: str | None = None, ts: str | None = None,
             amount: str | None = None) -> bytes:
    """A row of every field, nothing the converter refuses (empty amount and country cells are null)."""
    ms = START_MS + (i % 20_000) * 60_000
    cells = [str(i), ts or str(ms), n or str(i % 1000), f"u{i % 7}" if user is None else user, ok or ["true", "false"][i % 2],
             ("" if i % 5 == 0 else repr(i / 4)) if amount is None else amount, ["DE", "FR", ""][i % 3], "gold"]
    return ",".join(cells).encode()


def _csv(ids: range, end: bytes = b"\n", **cells: Any) -> bytes:
    """Rows of `ids`; each keyword a function of the id giving that cell."""
    return b"".join(_csv_row(i, **{k: f(i) for k, f in cells.items()}) + end for i in ids)


def _csv_mixed(ids: range) -> bytes:
    """Clean rows with blank lines among them, and every odd row among the first 3000."""
    out = []
    for k, i in enumerate(ids):
        if k % 37 == 5 and k < 3000:
            out.append(CSV_ODD[(k // 37) % len(CSV_ODD)].replace(b"{i}", str(i).encode())
                       .replace(b"{ts}", str(START_MS + k).encode()))
        elif k % 53 == 7:
            out.append(b"")
        else:
            out.append(_csv_row(i))
    return b"\n".join(out) + b"\n"


QUOTED = ['"u, {i}"', '"say ""hi"" {i}"', '"two\nlines {i}"', '"{i}"', '""']  # delimiters, quotes, newlines inside
SPELLINGS = ["true", "FALSE", "Yes", "no", "1", "0", " True ", "tRuE", "\tno", "NO"]  # every way the row path takes
INTS = [" 5", "+5", "5 ", "\t7\t", "-0", "007", "+0", "-2147483648", "2147483647"]
DOUBLES = ["+1.5", "1e3", " .5", "5.", "-0", "1E-5", "2.5e+10 ", "0.1", "123456789.123456789", "4.9e-324"]


def _csv_inputs(root: Path) -> Path:
    """One dataset of CSV files, each a kind of input the two paths must treat alike."""
    ds = root / "events"
    ds.mkdir(parents=True)
    (ds / "clean.csv").write_bytes(CSV_HEADER + _csv(range(1, 20_001)))  # many blocks
    (ds / "quoted.csv").write_bytes(CSV_HEADER + _csv(range(20_001, 23_001), user=lambda i: QUOTED[i % 5].format(i=i)))
    (ds / "crlf.csv").write_bytes(CSV_HEADER.replace(b"\n", b"\r\n") + _csv(
        range(30_001, 31_001), b"\r\n", user=lambda i: '"crlf\r\ninside"' if i % 3 else f"u{i}"))
    (ds / "bom.csv").write_bytes(b"\xef\xbb\xbf" + CSV_HEADER + _csv(range(40_001, 40_501)))
    (ds / "blanks.csv").write_bytes(CSV_HEADER + b"\n\r\n" + _csv(range(50_001, 50_201)) + b"\n\n" + _csv(range(50_201, 50_301)) + b"\n")
    (ds / "no-newline.csv").write_bytes(CSV_HEADER + _csv(range(60_001, 60_100)) + _csv_row(60_100))
    (ds / "iso.csv").write_bytes(CSV_HEADER + _csv(range(70_001, 72_001), ts=lambda i: _iso(START_MS + i * 1001)))
    (ds / "spelled.csv").write_bytes(CSV_HEADER + _csv(
        range(80_001, 82_001), ok=lambda i: SPELLINGS[i % len(SPELLINGS)], n=lambda i: INTS[i % len(INTS)],
        amount=lambda i: DOUBLES[i % len(DOUBLES)], user=lambda i: "" if i % 4 == 0 else f"u{i}"))
    (ds / "extra.csv").write_bytes(b"id,ts,n,more,user,ok,amount,country,tier,most\n" + b"".join(
        _csv_row(i).replace(b",", b",m,", 3).replace(b",m,", b",", 2) + b",x\n" for i in range(90_001, 91_001)))
    (ds / "gz.csv.gz").write_bytes(gzip.compress(CSV_HEADER + _csv(range(100_001, 105_001))))
    cut = gzip.compress(CSV_HEADER + _csv_mixed(range(110_001, 130_001)), compresslevel=1)
    (ds / "cut.csv.gz").write_bytes(cut[:len(cut) * 3 // 4])  # truncated: the rows before it, then one reject
    (ds / "mixed.csv").write_bytes(CSV_HEADER + _csv_mixed(range(130_001, 150_001)))
    (ds / "loose.csv").write_bytes(CSV_HEADER + _csv(range(150_001, 155_001)) + b'155001,1767225600000,5,5\'10",true,,,t\n'
                                   + _csv(range(155_002, 160_001)))  # a quote inside an unquoted field: the row path's
    (ds / "open.csv").write_bytes(CSV_HEADER + _csv(range(160_001, 165_001)) + b'165001,1767225600000,5,"open,true,,,t\n'
                                  + _csv(range(165_002, 165_011)))  # a quote never closed: Python reads on to the end
    (ds / "cr.csv").write_bytes(CSV_HEADER + _csv(range(170_001, 175_001)) + b"175001,1767225600000,5,u\rv,true,,,t\n"
                                + _csv(range(175_002, 180_001), user=lambda i: QUOTED[i % 5].format(i=i)))  # a bare CR
    (ds / "grows.csv").write_bytes(CSV_HEADER + _csv(range(190_001, 191_001)))
    return root


CSV_CLEAN = ["clean", "quoted", "crlf", "bom", "blanks", "no-newline", "iso", "spelled", "extra", "gz"]


def _both(tmp: Path, inputs: Path, writer: str, **settings: Any) -> tuple[dict[bool, Path], dict[bool, Path]]:
    """The job on either path: (its directory, its job file) by `columnar`."""
    runs = {c: tmp / ("columnar" if c else "rows") for c in (True, False)}
    for d in runs.values():
        d.mkdir()
    return runs, {c: _job(d, inputs, writer, c, **settings) for c, d in runs.items()}


def _same(results: dict[bool, JobResult]) -> None:
    fast, slow = (r.datasets[0] for r in (results[True], results[False]))
    assert (fast.records_extracted, fast.records_written, fast.records_rejected, fast.counters) == \
           (slow.records_extracted, slow.records_written, slow.records_rejected, slow.counters)
    assert all(c == 0 for _, c in _columnar_by_file(results[False]).values())


@pytest.mark.parametrize("writer", ["parquet", "avro"])
def test_csv_on_the_columnar_path_publishes_what_the_row_path_publishes(tmp_path: Path, writer: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reading, "BATCH_BYTES", 1 << 16)  # many blocks: their cuts among quotes, blanks and bad rows
    inputs = _csv_inputs(tmp_path / "in")
    runs, jobs = _both(tmp_path, inputs, writer)
    first = {c: _run(job) for c, job in jobs.items()}
    grows = inputs / "events" / "grows.csv"
    appended_at = grows.stat().st_size
    with open(grows, "ab") as f:  # the next runs read the appended range only, the header from the file's start
        f.write(_csv_mixed(range(200_001, 212_001)))
    second = {c: _run(job) for c, job in jobs.items()}

    published = {c: _published(d / "output") for c, d in runs.items()}
    assert published[True] == published[False]
    errors = read_error_files(runs[True] / "output")
    assert {Path(e["location"].split(":")[0]).name for e in errors} == {"mixed.csv", "cut.csv.gz", "open.csv", "cr.csv",
                                                                         "grows.csv"}
    grown = [e["location"] for e in errors if "grows.csv" in e["location"]]
    assert grown and all(w.endswith(f" (line counted from byte {appended_at})") for w in grown)
    for results in (first, second):
        _same(results)
    assert first[True].datasets[0].counters["unknown_fields_dropped"] == {"count": 2000, "examples": ["more", "most"]}
    by_file = _columnar_by_file(first[True])
    for name in CSV_CLEAN:  # every row in columnar blocks
        extracted, columnar = by_file[name]
        assert columnar == extracted > 0, name
    for name in ("mixed", "cut", "loose", "cr"):  # columnar but for what Arrow cannot be shown to read alike
        assert 0 < by_file[name][1] < by_file[name][0], name
    assert by_file["open"] == (5000, 5000)  # the rows before; the quote never closed is one bad row of the rest
    assert 0 < _columnar_by_file(second[True])["grows"][1] < _columnar_by_file(second[True])["grows"][0]


def test_headerless_csv_with_a_field_size_limit_on_the_columnar_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reading, "BATCH_BYTES", 1 << 16)
    ds = tmp_path / "in" / "events"
    ds.mkdir(parents=True)
    (ds / "plain.csv").write_bytes(_csv(range(1, 10_001)))
    (ds / "long.csv").write_bytes(_csv(range(10_001, 15_001)) + _csv_row(15_001, user="x" * 150) + _csv(range(15_002, 20_001)))
    (ds / "quoted.csv").write_bytes(_csv(range(20_001, 22_001), user=lambda i: QUOTED[i % 5].format(i=i)))
    runs, jobs = _both(tmp_path, tmp_path / "in", "parquet", source={
        "csv_columns": ["id", "ts", "n", "user", "ok", "amount", "country", "tier"], "csv_field_size_limit": 100})
    first = {c: _run(job) for c, job in jobs.items()}
    grows = ds / "plain.csv"
    appended_at = grows.stat().st_size
    with open(grows, "ab") as f:
        f.write(_csv_mixed(range(30_001, 36_001)))
    second = {c: _run(job) for c, job in jobs.items()}
    assert _published(runs[True] / "output") == _published(runs[False] / "output")
    for results in (first, second):
        _same(results)
    errors = read_error_files(runs[True] / "output")
    (long,) = [e for e in errors if "long.csv" in e["location"]]
    assert long["location"].endswith("long.csv:5001") and "field larger than field limit (100)" in long["reason"]
    assert any(e["location"].endswith(f"(line counted from byte {appended_at})") for e in errors)
    by_file = _columnar_by_file(first[True])
    assert by_file["plain"][1] == by_file["plain"][0] == 10_000
    assert 0 < by_file["long"][1] < by_file["long"][0]  # the block with the long field takes the row path
    assert by_file["quoted"][1] == 0  # a quoted field could be longer than the limit and span lines: the row path


def test_csv_columns_the_schema_lacks_under_on_unknown_fields_fail(tmp_path: Path) -> None:
    ds = tmp_path / "in" / "events"
    ds.mkdir(parents=True)
    (ds / "known.csv").write_bytes(CSV_HEADER + _csv(range(1, 1001)))
    (ds / "extra.csv").write_bytes(CSV_HEADER.replace(b"\n", b",more\n") + b"".join(_csv_row(i) + b",m\n" for i in range(1001, 1101)))
    runs, jobs = _both(tmp_path, tmp_path / "in", "avro", converter={"on_unknown_fields": "fail"})
    results = {c: _run(job) for c, job in jobs.items()}
    assert _published(runs[True] / "output") == _published(runs[False] / "output")
    _same(results)
    errors = read_error_files(runs[True] / "output")
    assert len(errors) == 100 and all("fields not in the schema: more" in e["reason"] for e in errors)
    by_file = _columnar_by_file(results[True])
    assert by_file["known"] == (1000, 1000) and by_file["extra"] == (100, 0)
