"""The files source's listing at scale: its filters (hidden files and directories, `include`), compiled once per
listing, keep exactly the files the per-file `fnmatch` and per-part checks they replaced kept; and a plan over many
committed files finds the same files new, with the same watermarks, as the files' own sizes say."""

from __future__ import annotations

import fnmatch
import random
from pathlib import Path

import pytest

from gobblin_py.api import SourceState
from gobblin_py.builtin.sources.files.compression import split_compression
from gobblin_py.builtin.sources.files.reading import _FORMATS, _format_of_suffixes, format_of
from gobblin_py.builtin.sources.files.settings import DEFAULT_INCLUDE
from gobblin_py.builtin.sources.files.source import FilesSource
from gobblin_py.builtin.sources.files.split import FileSplit
from gobblin_py.fs import Location, filesystem_for


def _source(root: Path, **settings: object) -> FilesSource:
    return FilesSource(FilesSource.Settings.model_validate({"path": str(root), **settings}))


def _kept_before(root: Path, include: list[str], root_dataset: str) -> list[tuple[str, str, str, int]]:
    """(dataset, key, file, size) of each listed file, filtered as `FilesSource._inputs` did at 69b162b (no loose
    files beside a dataset directory of the root's name in these trees)."""
    where = Location(root)
    out, loose = [], []
    for file, size in sorted(filesystem_for(where).find(where).items()):
        parts = file[len(where.rstrip("/")) + 1:].split("/")
        if any(p.startswith((".", "_")) for p in parts):
            continue
        if not any(fnmatch.fnmatch(file.name, pat) for pat in include):
            continue
        if len(parts) == 1:
            loose.append((root_dataset, parts[0], str(file), size))
        else:
            out.append((parts[0], "/".join(parts[1:]), str(file), size))
    return out + loose


def _tree(root: Path, seed: int) -> None:
    rng = random.Random(seed)
    dirs = [root]
    stems = ["a", "_a", ".a", "a_b", "a.b", "A", "x_", "[x]", "é", "a b", "ab*"]
    exts = [".jsonl", ".JSONL", ".csv", ".json.gz", ".ndjson", ".txt", "", ".csv.zst", "._x"]
    for i in range(120):
        parent = rng.choice(dirs)
        if rng.random() < 0.2:
            d = parent / f"{rng.choice(stems)}{i}"
            d.mkdir(parents=True, exist_ok=True)
            dirs.append(d)
        else:
            (parent / f"{rng.choice(stems)}{i}{rng.choice(exts)}").write_bytes(b"{}\n" * rng.randrange(1, 4))


@pytest.mark.parametrize("include", [DEFAULT_INCLUDE, [], ["*"], ["*.jsonl", "*.csv*"], ["[a_]*", "*.JSONL"], ["*[!l]"], ["a?.b*", "*é*"]])
@pytest.mark.parametrize("seed", range(3))
def test_the_listing_keeps_the_files_the_per_file_checks_kept(tmp_path: Path, seed: int, include: list[str]) -> None:
    root = tmp_path / "in"
    root.mkdir()
    _tree(root, seed)
    inputs = _source(root, include=include)._inputs(Location(root), SourceState({}))
    assert [(i.dataset, i.rel, str(i.file), i.size) for i in inputs] == _kept_before(root, include, "in")


def _format_before(name: str) -> tuple[object, object]:
    """`format_of` at 69b162b, worked out for each name."""
    inner, compression = split_compression(name)
    _, dot, ext = inner.rpartition(".")
    return (_FORMATS.get(ext.lower()) if dot else None), compression


def test_a_file_format_kept_per_suffix_pair_is_the_one_worked_out_per_name() -> None:
    rng = random.Random(47)
    names = ["", ".", "..", "a", ".gz", "x.gz", "jsonl.gz", ".jsonl", "a..gz", "a.JSONL.GZ", "a.b.c.csv.zst", "a.gz.jsonl"]
    names += ["".join(rng.choice("ab.._jsonlcvgzstJSONLGZx") for _ in range(rng.randrange(1, 14))) for _ in range(5000)]
    _format_of_suffixes.cache_clear()
    for name in names:
        assert format_of(name) == _format_before(name), name
        assert format_of(name) == _format_before(name), name  # the kept answer too


def test_a_plan_over_many_committed_files_finds_the_new_ones_with_their_watermarks(tmp_path: Path) -> None:
    """2,000 files committed at their sizes, three new and one grown: the plan reads the new three whole (packed),
    the grown one is an input problem, no committed file is read again."""
    root = tmp_path / "in"
    (root / "ev").mkdir(parents=True)
    for i in range(2000):
        (root / "ev" / f"f-{i:05d}.jsonl").write_text(f'{{"id": {i}}}\n')
    committed = {"ev": {f"f-{i:05d}.jsonl": len(f'{{"id": {i}}}\n') for i in range(2000)}}
    for name in ("f-02000.jsonl", "g.jsonl", "sub/h.jsonl"):
        (root / "ev" / name).parent.mkdir(exist_ok=True)
        (root / "ev" / name).write_text('{"id": -1}\n{"id": -2}\n')
    with open(root / "ev" / "f-00007.jsonl", "a") as grown:
        grown.write('{"id": 7000}\n')
    state = SourceState(committed)
    units = _source(root).get_workunits(state)
    assert len(units) == 1
    planned = {key.key: key.high for key in units[0].packed_keys}
    assert planned == {name: 22 for name in ("f-02000.jsonl", "g.jsonl", "sub/h.jsonl")}
    assert [part[0] for part in FileSplit.of(units[0]).parts()] == [str(root / "ev" / n) for n in sorted(planned)]
    assert len(state.input_problems["ev"]) == 1 and "f-00007.jsonl changed after it was ingested" in state.input_problems["ev"][0]
