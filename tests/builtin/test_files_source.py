"""The files source alone: planning WorkUnits from a directory tree, and its JSON-lines / CSV extractors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from gobblin_py.api import SourceState, TaskContext, WorkUnit
from gobblin_py.builtin.sources.files.source import CsvExtractor, FilesSource, JsonLinesExtractor
from gobblin_py.builtin.sources.files.split import FileSplit
from gobblin_py.errors import SourceError


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _source(root: Path, **settings: Any) -> FilesSource:
    return FilesSource(FilesSource.Settings.model_validate({"path": str(root), "pack_bytes": 0, **settings}))  # a unit a file


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "in"
    _write(root / "clicks" / "2026-01-01.jsonl", '{"id": 1}\n')
    _write(root / "clicks" / "2026-01-02.jsonl", '{"id": 2}\n{"id": 3}\n')
    _write(root / "clicks" / "notes.txt", "not data\n")
    _write(root / "clicks" / ".hidden.jsonl", '{"id": 0}\n')
    _write(root / "clicks" / "_partial.jsonl", '{"id": 0}\n')
    _write(root / "orders" / "a.csv", "id,amount\n1,2.5\n")
    _write(root / "orders" / "2026" / "b.json", '{"id": 9}\n')
    _write(root / "_tmp" / "x.jsonl", '{"id": 0}\n')
    _write(root / ".git" / "y.jsonl", '{"id": 0}\n')
    _write(root / "orders" / "_temporary" / "c.jsonl", '{"id": 0}\n')  # hidden at any depth
    _write(root / "loose.jsonl", '{"id": 5}\n')  # directly under path: the dataset named after it
    return root


def _plan(source: FilesSource, state: dict[str, dict[str, Any]] | None = None) -> list[WorkUnit]:
    units = source.get_workunits(SourceState(state or {}))
    assert all(isinstance(u, WorkUnit) for u in units)
    return units  # type: ignore[return-value]


def test_one_workunit_per_data_file_per_dataset(tree: Path) -> None:
    units = _plan(_source(tree))
    assert sorted((u.dataset, u.watermark_key) for u in units) == [
        ("clicks", "2026-01-01.jsonl"),
        ("clicks", "2026-01-02.jsonl"),
        ("in", "loose.jsonl"),
        ("orders", "2026/b.json"),
        ("orders", "a.csv"),
    ]
    for u in units:
        file = tree / u.watermark_key if u.dataset == "in" else tree / u.dataset / u.watermark_key
        assert FileSplit.of(u).file == str(file)
        assert u.expected_high_watermark == file.stat().st_size
        assert u.low_watermark is None
    assert len({(u.dataset, u.id) for u in units}) == len(units)


def test_include_patterns_select_files(tree: Path) -> None:
    units = _plan(_source(tree, include=["*.csv"]))
    assert [(u.dataset, u.watermark_key) for u in units] == [("orders", "a.csv")]


def test_files_already_ingested_are_skipped_and_a_changed_one_is_reported(tree: Path) -> None:
    size = (tree / "orders" / "a.csv").stat().st_size
    done = {"clicks": {"2026-01-01.jsonl": (tree / "clicks" / "2026-01-01.jsonl").stat().st_size},
            "orders": {"a.csv": 1}, "in": {"loose.jsonl": 10}}  # a size change does not make a file new again
    state = SourceState(done)
    units = _source(tree).get_workunits(state)
    assert sorted((u.dataset, u.watermark_key) for u in units) == [
        ("clicks", "2026-01-02.jsonl"), ("orders", "2026/b.json")]
    assert state.input_problems == {"orders": [
        f"{tree / 'orders' / 'a.csv'} changed after it was ingested (1 → {size} bytes); not re-read: set ingest_appended: "
        f"true to read the appended bytes, or accept it with `gobblin-py state reset JOB --dataset orders --to a.csv={size}`"]}


def test_appended_bytes_are_a_workunit_of_their_own_range(tree: Path) -> None:
    file = tree / "clicks" / "2026-01-02.jsonl"
    size = file.stat().st_size
    done = {"clicks": {"2026-01-01.jsonl": 99, "2026-01-02.jsonl": 10}}
    state = SourceState(done)
    units = _source(tree, ingest_appended=True, include=["*.jsonl"]).get_workunits(state)
    (appended,) = [u for u in units if u.watermark_key == "2026-01-02.jsonl"]
    assert (appended.low_watermark, appended.expected_high_watermark, FileSplit.of(appended).start) == (10, size, 10)
    assert appended.id.startswith(f"2026-01-02.10-{size}-")
    (whole,) = [u for u in _plan(_source(tree, include=["*.jsonl"])) if u.watermark_key == "2026-01-02.jsonl"]
    assert whole.id != appended.id
    # the shrunk file is reported, with or without ingest_appended
    assert [p.split(" is shorter")[0] for p in state.input_problems["clicks"]] == [str(tree / "clicks" / "2026-01-01.jsonl")]
    # the tailing unit keeps the digest of the bytes before its end, which the next plan checks
    assert appended.props["state.tails"]["2026-01-02.jsonl"].startswith(f"{size}:")


def test_compressed_files_are_never_read_from_an_offset(tmp_path: Path) -> None:
    import gzip

    file = tmp_path / "in" / "ds" / "a.jsonl.gz"
    file.parent.mkdir(parents=True)
    file.write_bytes(gzip.compress(b'{"id": 1}\n' * 100))
    state = SourceState({"ds": {"a.jsonl.gz": 5}})
    assert _source(tmp_path / "in", ingest_appended=True).get_workunits(state) == []
    assert "a.jsonl.gz changed after it was ingested" in state.input_problems["ds"][0]


def test_root_files_are_refused_when_a_sub_directory_has_their_dataset_name(tmp_path: Path) -> None:
    _write(tmp_path / "in" / "top.jsonl", '{"id": 1}\n')
    _write(tmp_path / "in" / "in" / "a.jsonl", '{"id": 2}\n')
    state = SourceState({})
    units = _source(tmp_path / "in").get_workunits(state)
    assert [(u.dataset, u.watermark_key) for u in units] == [("in", "a.jsonl")]
    assert "root_dataset" in state.input_problems["in"][0] and "top.jsonl" in state.input_problems["in"][0]


def test_root_dataset_must_be_one_path_component(tmp_path: Path) -> None:
    for bad in ("a/b", "..", ".x"):
        with pytest.raises(ValidationError, match="root_dataset"):
            _source(tmp_path, root_dataset=bad)


def test_new_file_is_planned_on_the_next_run(tree: Path) -> None:
    source = _source(tree)
    first = _plan(source)
    state = {}
    for u in first:
        state.setdefault(u.dataset, {})[u.watermark_key] = u.expected_high_watermark
    assert _plan(source, state) == []
    _write(tree / "clicks" / "2026-01-03.jsonl", '{"id": 4}\n')
    assert [(u.dataset, u.watermark_key) for u in _plan(source, state)] == [("clicks", "2026-01-03.jsonl")]


def test_workunit_ids_are_deterministic(tree: Path) -> None:
    ids = [u.id for u in _plan(_source(tree))]
    assert ids == [u.id for u in _plan(_source(tree))]
    assert ids == [u.id for u in _plan(FilesSource(FilesSource.Settings.model_validate({"path": str(tree), "pack_bytes": 0})))]
    # a file's id does not depend on which other files are planned with it
    only_new = _plan(_source(tree), {"clicks": {"2026-01-01.jsonl": 10}})
    assert {u.watermark_key: u.id for u in only_new}.items() <= {
        u.watermark_key: u.id for u in _plan(_source(tree))}.items()
    assert all(set(u.id) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") for u in only_new)


def test_workunit_ids_carry_the_stem_and_a_128_bit_hash_of_root_dataset_path_and_range(tmp_path: Path) -> None:
    for root in ("a", "b"):
        _write(tmp_path / root / "ds" / "dt=871176081de8" / "part-00000.jsonl.gz", "")
        _write(tmp_path / root / "ds" / "dt=0ee58338dc00" / "part-00000.jsonl.gz", "")
    ids = [u.id for root in ("a", "b") for u in _plan(_source(tmp_path / root))]
    assert len(set(ids)) == 4
    for i in ids:
        stem, _, digest = i.rpartition("-")
        assert stem == "part-00000" and len(digest) == 32 and int(digest, 16) >= 0


def test_long_names_are_cut_to_a_readable_prefix(tmp_path: Path) -> None:
    _write(tmp_path / "in" / "ds" / f"{'x' * 200}.jsonl", "")
    (wu,) = _plan(_source(tmp_path / "in"))
    assert len(wu.id) <= 100 + 1 + 32


def test_missing_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="directory not found"):
        FilesSource.Settings.model_validate({"path": str(tmp_path / "nope")})


def test_directory_removed_after_validation_is_source_error(tmp_path: Path) -> None:
    root = tmp_path / "in"
    root.mkdir()
    source = _source(root)
    root.rmdir()
    with pytest.raises(SourceError, match=str(root)):
        source.get_workunits(SourceState({}))


# --- extractors ---------------------------------------------------------------------------


class _Rejects:
    def __init__(self) -> None:
        self.items: list[tuple[Any, str, str]] = []

    def __call__(self, record: Any, reason: str, location: str) -> None:
        self.items.append((record, reason, location))


def _context(tmp_path: Path, wu: WorkUnit, rejects: _Rejects) -> TaskContext:
    return TaskContext(job_name="t", run_id="r1", workunit=wu, attempt=1, staging_dir=tmp_path / "staging",
                       reject=rejects)


def _extract(tmp_path: Path, file: Path, **settings: Any) -> tuple[Any, list[dict[str, Any]], _Rejects]:
    source = _source(file.parents[1], **settings)
    (wu,) = [u for u in _plan(source) if FileSplit.of(u).file == str(file)]
    rejects = _Rejects()
    extractor = source.get_extractor(wu, _context(tmp_path, wu, rejects))
    try:
        records = list(extractor.read_records())
    finally:
        extractor.close()
    return extractor, records, rejects


def test_jsonl_extractor_reads_objects_and_rejects_bad_lines(tmp_path: Path) -> None:
    file = _write(tmp_path / "in" / "ds" / "events.jsonl",
                  '{"id": 1, "tags": ["a"]}\n'
                  "\n"
                  "{not json\n"
                  "[1, 2]\n"
                  '{"id": 2}\n'
                  "42\n")
    extractor, records, rejects = _extract(tmp_path, file)
    assert isinstance(extractor, JsonLinesExtractor)
    assert records == [{"id": 1, "tags": ["a"]}, {"id": 2}]
    assert [(rec, loc) for rec, _, loc in rejects.items] == [
        ("{not json", f"{file}:3"), ([1, 2], f"{file}:4"), (42, f"{file}:6")]
    assert "not valid JSON" in rejects.items[0][1]
    assert rejects.items[1][1] == "expected a JSON object, got list"
    assert extractor.actual_high_watermark() == file.stat().st_size
    assert extractor.get_schema()["type"] == "json"


def test_csv_extractor_reads_rows_as_dicts_and_rejects_wrong_width(tmp_path: Path) -> None:
    file = _write(tmp_path / "in" / "ds" / "orders.csv",
                  "id,user,amount\n"
                  "1,u1,2.5\n"
                  "2,u2\n"
                  "\n"
                  '3,"u, three",7\n'
                  "4,u4,1,extra\n")
    extractor, records, rejects = _extract(tmp_path, file)
    assert isinstance(extractor, CsvExtractor)
    assert records == [{"id": "1", "user": "u1", "amount": "2.5"}, {"id": "3", "user": "u, three", "amount": "7"}]
    assert [(rec, loc) for rec, _, loc in rejects.items] == [("2,u2", f"{file}:3"), ("4,u4,1,extra", f"{file}:6")]
    assert rejects.items[0][1] == "expected 3 columns (id, user, amount), got 2"
    assert extractor.get_schema()["fields"] == ["id", "user", "amount"]
    assert extractor.actual_high_watermark() == file.stat().st_size


def test_csv_extractor_custom_delimiter(tmp_path: Path) -> None:
    file = _write(tmp_path / "in" / "ds" / "orders.csv", "id;user\n1;u1\n2;u2;x\n")
    _, records, rejects = _extract(tmp_path, file, csv_delimiter=";")
    assert records == [{"id": "1", "user": "u1"}]
    assert [loc for _, _, loc in rejects.items] == [f"{file}:3"]


def test_headerless_csv_takes_its_column_names_from_csv_columns(tmp_path: Path) -> None:
    file = _write(tmp_path / "in" / "ds" / "orders.csv", "1,u1,2.5\n2,u2\n3,u3,7\n")
    extractor, records, rejects = _extract(tmp_path, file, csv_columns=["id", "user", "amount"])
    assert records == [{"id": "1", "user": "u1", "amount": "2.5"}, {"id": "3", "user": "u3", "amount": "7"}]
    assert [(rec, loc) for rec, _, loc in rejects.items] == [("2,u2", f"{file}:2")]
    assert extractor.get_schema()["fields"] == ["id", "user", "amount"]


def test_csv_columns_must_each_be_named_once(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="column names repeated: id"):
        _source(tmp_path, csv_columns=["id", "user", "id"])


def test_csv_extractor_empty_file_has_no_records(tmp_path: Path) -> None:
    file = _write(tmp_path / "in" / "ds" / "empty.csv", "")
    _, records, rejects = _extract(tmp_path, file)
    assert records == [] and rejects.items == []


def test_extractor_for_a_vanished_file_is_source_error(tmp_path: Path) -> None:
    file = _write(tmp_path / "in" / "ds" / "gone.jsonl", '{"id": 1}\n')
    source = _source(tmp_path / "in")
    (wu,) = _plan(source)
    file.unlink()
    with pytest.raises(SourceError, match=r"gone.jsonl"):
        source.get_extractor(wu, _context(tmp_path, wu, _Rejects()))


def test_jsonl_invalid_utf8_line_is_rejected_and_a_bom_is_skipped(tmp_path: Path) -> None:
    file = tmp_path / "in" / "ds" / "a.jsonl"
    file.parent.mkdir(parents=True)
    file.write_bytes(b'\xef\xbb\xbf{"id": 1}\n{"id": "\xff"}\n{"id": 3}\n')
    _, records, rejects = _extract(tmp_path, file)
    assert records == [{"id": 1}, {"id": 3}]
    assert [loc for _, _, loc in rejects.items] == [f"{file}:2"]


def test_csv_field_over_the_limit_rejects_only_its_row(tmp_path: Path) -> None:
    file = _write(tmp_path / "in" / "ds" / "a.csv", f"id,user\n1,u1\n2,{'x' * 50}\n3,u3\n")
    _, records, rejects = _extract(tmp_path, file, csv_field_size_limit=20)
    assert records == [{"id": "1", "user": "u1"}, {"id": "3", "user": "u3"}]
    ((record, reason, location),) = rejects.items
    assert location == f"{file}:3" and "field larger than field limit (20)" in reason and record.startswith("2,xxx")


def test_csv_invalid_utf8_in_a_quoted_multi_line_field_rejects_that_row(tmp_path: Path) -> None:
    file = tmp_path / "in" / "ds" / "a.csv"
    file.parent.mkdir(parents=True)
    file.write_bytes(b'id,note\n1,"first\nsecond \xff"\n2,ok\n')
    _, records, rejects = _extract(tmp_path, file)
    assert records == [{"id": "2", "note": "ok"}]
    ((record, reason, location),) = rejects.items
    assert location == f"{file}:3" and reason.startswith("invalid UTF-8 on line 3") and "\ufffd" in record


def test_a_truncated_compressed_file_reads_what_it_can_and_rejects_the_rest(tmp_path: Path) -> None:
    import gzip

    import zstandard

    for name, data in (("a.jsonl.gz", gzip.compress(b'{"id": 1}\n' * 1000)),
                       ("b.jsonl.zst", zstandard.ZstdCompressor().compress(b'{"id": 1}\n' * 1000))):
        file = tmp_path / "in" / "ds" / name
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(data[:len(data) // 2])
        _, records, rejects = _extract(tmp_path, file)
        assert len(records) < 1000
        ((_, reason, location),) = rejects.items
        assert "cannot decompress" in reason and location == f"{file}:{len(records) + 1}"


def test_extractor_reads_only_the_planned_bytes(tmp_path: Path) -> None:
    file = _write(tmp_path / "in" / "ds" / "a.jsonl", '{"id": 1}\n')
    source = _source(tmp_path / "in")
    (wu,) = _plan(source)
    with open(file, "a") as f:
        f.write('{"id": 2}\n')  # appended after planning: the next run's
    extractor = source.get_extractor(wu, _context(tmp_path, wu, _Rejects()))
    assert list(extractor.read_records()) == [{"id": 1}]
    assert extractor.actual_high_watermark() == 10


def test_extractor_of_a_file_truncated_after_planning_is_source_error(tmp_path: Path) -> None:
    file = _write(tmp_path / "in" / "ds" / "a.jsonl", '{"id": 1}\n{"id": 2}\n')
    source = _source(tmp_path / "in")
    (wu,) = _plan(source)
    file.write_text('{"id": 1}\n')
    with pytest.raises(SourceError, match="fewer than the 20 planned"):
        source.get_extractor(wu, _context(tmp_path, wu, _Rejects()))
