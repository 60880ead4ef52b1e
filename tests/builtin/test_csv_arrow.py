"""A differential fuzz of CSV on the columnar path: random CSV text, cut into blocks by the files extractor, read by
`json_to_avro`'s Arrow CSV reader and by the row path (Python's `csv`, then the converter record by record). Wherever
Arrow gives a batch it holds exactly the row path's records (and the row path refused none); well-formed text of the
plain kinds always gets a batch, so the fast path is the one taken."""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support.schemas import FLAT_EVENT

from gobblin_py.api import CsvBlock, SourceState, TaskContext
from gobblin_py.builtin.converters.json_to_avro import JsonToAvroConverter
from gobblin_py.builtin.sources.files import reading
from gobblin_py.builtin.sources.files.source import FilesSource
from gobblin_py.errors import RecordError

SEED = 20261201
NAMES = [f["name"] for f in FLAT_EVENT["fields"]]
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

# per field: values the fast path must take, then values it may hand to the row path (odd, refused or coerced)
CLEAN: dict[str, list[str]] = {
    "id": ["0", "7", "-12", "+5", " 42", "9 ", "\t3", "9223372036854775807", "-9223372036854775808", "007"],
    "ts": ["1767225600000", "0", "-5", " 1767225600001 "],
    "n": ["1", "-2147483648", "2147483647", "+0", " 8 "],
    "user": ["u", "", "a b", "é", "x,y", 'say "hi"', "two\nlines", "crlf\r\nin", " ", "日本"],
    "ok": ["true", "false", "TRUE", "False", "yes", "No", "1", "0", " yes ", "tRuE"],
    "amount": ["", "1.5", "-0", "1e3", ".5", "5.", "+2.25", "1E-7", " 3.0 ", "0.1", "4.9e-324", "1.7976931348623157e308"],
    "country": ["", "DE", "FR", "x,y", '""'],
    "tier": ["gold", "basic", "a\nb"],
}
ODD: dict[str, list[str]] = {
    "id": ["1_000", "\u0663", "9223372036854775808", "", "1.0", "0x10", "--1", "+-1", "\x0b5", "1e3"],
    "ts": ["2026-01-02T03:04:05Z", "2026-01-02", "2026-01-02T03:04:05.123+01:00", "+5", "", "soon", "\u00b2"],
    "n": ["2147483648", "", "5.0", "٣"],
    "user": [],
    "ok": ["maybe", "", "t", "2", "yeſ", "TRUE\x0b"],
    "amount": ["nan", "inf", "-Infinity", "1_0.5", "abc", "1e400", "0x1p3", "\u0661.5"],
    "country": [],
    "tier": [""],
}
TIMESTAMP_TEXT = ["2026-01-02T03:04:05Z", "2026-01-02T03:04:05.123Z", "2026-03-04 05:06Z", "2026-01-02T03:04:05+02:00"]


def _cell(value: str, delimiter: str, rng: random.Random) -> str:
    """`value` as a CSV writer would put it: quoted when it must be, sometimes when it need not."""
    if any(c in value for c in (delimiter, '"', "\n", "\r")) or (rng.random() < 0.1 and value):
        return '"' + value.replace('"', '""') + '"'
    return value


def _row(rng: random.Random, delimiter: str, odd: float, iso: bool, columns: list[str]) -> str:
    cells = []
    for name in columns:
        pool = ODD.get(name) if rng.random() < odd else None
        if name == "ts" and iso and not pool:
            pool = TIMESTAMP_TEXT
        cells.append(_cell(rng.choice(pool or CLEAN.get(name, ["m", "", "7"])), delimiter, rng))
    return delimiter.join(cells)


def _text(rng: random.Random, delimiter: str, odd: float, columns: list[str]) -> bytes:
    """A header and random rows: with `odd` > 0, odd cells, blank lines, rows of other widths, bad bytes, bare CRs."""
    iso = rng.random() < 0.3
    end = "\r\n" if rng.random() < 0.3 else "\n"
    lines = [delimiter.join(columns)]
    for _ in range(rng.randint(1, 60)):
        line = _row(rng, delimiter, odd, iso, columns)
        if odd and rng.random() < odd:
            line = rng.choice([line + delimiter + "x", line.rpartition(delimiter)[0], "", line.replace("u", "\udcff"),
                               line.replace("a", "a\r"), line + '"', "  "])
        lines.append(line)
    data = (end.join(lines) + (end if rng.random() < 0.8 else "")).encode("utf-8", "surrogateescape")
    return (b"\xef\xbb\xbf" if rng.random() < 0.2 else b"") + data


def _converter(tmp: Path, fail: bool) -> JsonToAvroConverter:
    schema = tmp / "e.avsc"
    schema.write_text(json.dumps(FLAT_EVENT))
    return JsonToAvroConverter(JsonToAvroConverter.Settings.model_validate(
        {"schema": str(schema), "on_unknown_fields": "fail" if fail else "drop"}))


def _blocks(root: Path, name: str, data: bytes, delimiter: str) -> tuple[Any, list[Any]]:
    """The columnar path's batches of a file of `data`, and its extractor."""
    file = root / "ds" / name
    file.parent.mkdir(parents=True, exist_ok=True)
    for old in file.parent.iterdir():
        old.unlink()
    file.write_bytes(data)
    source = FilesSource(FilesSource.Settings.model_validate({"path": str(root), "csv_delimiter": delimiter}))
    (wu,) = source.get_workunits(SourceState({}))
    context = TaskContext(job_name="t", run_id="r", workunit=wu, attempt=1, staging_dir=root / "staging",
                          reject=lambda *_: None)
    extractor = source.get_extractor(wu, context)
    extractor.get_schema()
    extractor.columnar_path()
    return extractor, list(extractor.read_batches())


def _row_path(extractor: Any, converter: JsonToAvroConverter, batch: Any) -> tuple[list[dict[str, Any]], int]:
    """The records the row path writes of `batch`, and how many it refused (reader or converter)."""
    rejected: list[Any] = []
    extractor.context.reject = lambda *args: rejected.append(args)
    records = []
    for record in extractor.records_of(batch):
        try:
            records.append(converter.map_record(record))
        except RecordError:
            rejected.append(record)
    return records, len(rejected)


def _as_rows(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    """The batch's records as the row path has them: timestamps as epoch milliseconds."""
    columns = [c.cast(pa.int64()) if pa.types.is_timestamp(c.type) else c for c in batch.columns]
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names).to_pylist()


@pytest.mark.parametrize("clean", [True, False])
def test_arrow_reads_what_the_row_path_reads_of_random_csv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean: bool) -> None:
    rng = random.Random(SEED + clean)
    taken = offered = 0
    for case in range(60):  # under 2 s each
        monkeypatch.setattr(reading, "BATCH_BYTES", rng.choice([64, 512, 4096, 1 << 20]))
        delimiter = rng.choice([",", ";", "\t", "|"])
        columns = list(NAMES)
        extra = not clean and rng.random() < 0.2
        if extra:
            columns.insert(rng.randrange(len(columns) + 1), "more")
        if not clean and rng.random() < 0.1:
            columns.remove(rng.choice(["amount", "country", "user"]))
        data = _text(rng, delimiter, 0.0 if clean else rng.choice([0.0, 0.02, 0.2]), columns)
        fail = extra and rng.random() < 0.5
        converter = _converter(tmp_path, fail)
        extractor, batches = _blocks(tmp_path / "in", f"c{case}.csv", data, delimiter)
        for batch in batches:
            arrow = converter.convert_batch(batch)
            dropped = converter.counters().get("unknown_fields_dropped")
            before = dropped.count if dropped else 0
            records, refused = _row_path(extractor, converter, batch)
            offered += isinstance(batch, CsvBlock)
            if clean:
                assert isinstance(batch, CsvBlock) and arrow is not None, (case, data)
            if arrow is None:
                continue
            taken += 1
            assert refused == 0, (case, data)
            assert _as_rows(arrow) == records, (case, data)
            by_rows = converter.counters()["unknown_fields_dropped"].count - before if extra else 0
            converter.batch_written()  # what the columnar path counts of the batch: the row path's count again
            assert (converter.counters()["unknown_fields_dropped"].count - before if extra else 0) == 2 * by_rows
        extractor.close()
    assert offered and taken > (offered * 0.95 if clean else offered // 4)


PLAIN: dict[str, list[str]] = {
    "id": ["0", "7", "007", "42", "9223372036854775807", "123456789012"],
    "ts": ["1767225600000", "0", "17672256"],
    "n": ["1", "0", "2147483647", "65536"],
    "ok": ["true", "false", "yes", "no", "1", "0"],
    "amount": ["1.5", "0.1", "36.22", "5.", ".5", "7", "00.50"],
}
"""Columns of only plain digits (doubles: with at most one ".") or lower-case booleans, which skip their guards'
regular expressions."""
NEAR: dict[str, list[str]] = {
    "id": ["+5", " 42", "-1", "0x10", "\u0663", "9223372036854775808", "1e3", ""],
    "ts": ["-5", "+5", " 1767225600001 ", "2026-01-02T03:04:05Z", "2026-01-02T03:04:05+02:00", "2026-01-02", "\u00b2"],
    "n": ["2147483648", "-2147483648", "+0", "5.0"],
    "ok": ["TRUE", "True", " yes", "maybe", "t", "", "2"],
    "amount": ["1e3", "-0", "+2.25", " 3.0 ", "nan", "1.2.3", ".", "", "1_0.5"],
}
"""Values one step from plain: each sends its block's column back to the guard (or the row path)."""


@pytest.mark.parametrize("near", [0.0, 0.05])
def test_plain_columns_skip_the_guards_and_read_as_the_row_path(tmp_path: Path, near: float) -> None:
    rng = random.Random(SEED + 7 + int(near * 100))
    taken = 0
    for case in range(40):
        iso_zulu = rng.random() < 0.3  # every timestamp ISO text ending in "Z": the zone told without a regex
        lines = [",".join(NAMES)]
        for _ in range(rng.randint(1, 40)):
            cells = []
            for name in NAMES:
                pool = PLAIN.get(name, CLEAN.get(name))
                if name == "ts" and iso_zulu:
                    pool = [t for t in TIMESTAMP_TEXT if t.endswith("Z")]
                if name in NEAR and rng.random() < near:
                    pool = NEAR[name]
                cells.append(_cell(rng.choice(pool), ",", rng))
            lines.append(",".join(cells))
        data = ("\n".join(lines) + "\n").encode()
        converter = _converter(tmp_path, False)
        extractor, batches = _blocks(tmp_path / "in", f"p{case}.csv", data, ",")
        for batch in batches:
            arrow = converter.convert_batch(batch)
            records, refused = _row_path(extractor, converter, batch)
            if not near:
                assert arrow is not None, (case, data)
            if arrow is None:
                continue
            taken += 1
            assert refused == 0, (case, data)
            assert _as_rows(arrow) == records, (case, data)
        extractor.close()
    assert taken >= 40 if not near else taken >= 5
