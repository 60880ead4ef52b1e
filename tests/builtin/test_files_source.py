"""The files source alone: planning WorkUnits from a directory tree, and its JSON-lines / CSV extractors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from gobblin_py.api import SourceState, TaskContext, WorkUnit
from gobblin_py.builtin.files_source import CsvExtractor, FilesSource, JsonLinesExtractor
from gobblin_py.errors import SourceError


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _source(root: Path, **settings: Any) -> FilesSource:
    return FilesSource(FilesSource.Settings.model_validate({"path": str(root), **settings}))


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
    _write(root / "loose.jsonl", '{"id": 0}\n')  # not in a dataset sub-directory
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
        ("orders", "2026/b.json"),
        ("orders", "a.csv"),
    ]
    for u in units:
        file = tree / u.dataset / u.watermark_key
        assert u.props["file"] == str(file)
        assert u.expected_high_watermark == file.stat().st_size
        assert u.low_watermark is None
    assert len({(u.dataset, u.id) for u in units}) == len(units)


def test_include_patterns_select_files(tree: Path) -> None:
    units = _plan(_source(tree, include=["*.csv"]))
    assert [(u.dataset, u.watermark_key) for u in units] == [("orders", "a.csv")]


def test_files_already_ingested_are_skipped(tree: Path) -> None:
    done = {"clicks": {"2026-01-01.jsonl": (tree / "clicks" / "2026-01-01.jsonl").stat().st_size},
            "orders": {"a.csv": 1}}  # a size change does not make a file new again
    units = _plan(_source(tree), done)
    assert sorted((u.dataset, u.watermark_key) for u in units) == [
        ("clicks", "2026-01-02.jsonl"), ("orders", "2026/b.json")]


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
    assert ids == [u.id for u in _plan(FilesSource(FilesSource.Settings.model_validate({"path": str(tree)})))]
    # a file's id does not depend on which other files are planned with it
    only_new = _plan(_source(tree), {"clicks": {"2026-01-01.jsonl": 10}})
    assert {u.watermark_key: u.id for u in only_new}.items() <= {
        u.watermark_key: u.id for u in _plan(_source(tree))}.items()
    assert all(set(u.id) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") for u in only_new)


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
    (wu,) = [u for u in _plan(source) if u.props["file"] == str(file)]
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


def test_csv_extractor_empty_file_has_no_records(tmp_path: Path) -> None:
    file = _write(tmp_path / "in" / "ds" / "empty.csv", "")
    _, records, rejects = _extract(tmp_path, file)
    assert records == [] and rejects.items == []


def test_extractor_for_a_vanished_file_is_source_error(tmp_path: Path) -> None:
    file = _write(tmp_path / "in" / "ds" / "gone.jsonl", '{"id": 1}\n')
    source = _source(tmp_path / "in")
    (wu,) = _plan(source)
    file.unlink()
    with pytest.raises(SourceError, match="gone.jsonl"):
        source.get_extractor(wu, _context(tmp_path, wu, _Rejects()))
