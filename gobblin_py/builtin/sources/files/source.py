"""The `files` source: a directory of JSON-lines / CSV files (plain or compressed), one dataset per
sub-directory, files directly under `path` a dataset of their own; local or any filesystem URL (`s3://bucket/in`).

As Gobblin's FileBasedSource, a dataset's state is what was ingested of each file (watermark key = the
file's path relative to the dataset directory, value = the bytes ingested); each new file is a WorkUnit,
and with `ingest_appended` so are the bytes appended to an ingested file. Anything the plan leaves out on
purpose (a changed file, a file of unknown format) is reported, and fails the run, never only logged.

With `ingest_appended`, the bytes before a file's committed offset are assumed to be the ones read: a file truncated
and written again (copytruncate log rotation) or replaced by a longer one would otherwise be read from the old offset,
its first bytes lost and a line cut in two. So each tailing work unit keeps, with its watermark, a digest of the last
`TAIL_PROOF` bytes before its end (`state.tails`), and a file grown past its offset is read on only when those bytes
are unchanged; else it is an input problem naming the file and the fix.

Many small files are packed (Gobblin's MultiWorkUnit with one writer for all its units, made one WorkUnit here): new
files of one dataset and format under `pack_bytes` are grouped, in listing order, up to `pack_bytes` bytes and
`pack_files` files, into one WorkUnit whose `FileSplit.then` lists the files after the first (with `ingest_appended`,
each up to its last whole line, its tail digest kept as an unpacked file's is); its task reads them
one after another (`packed.PackedExtractor`) into one output file, and each file keeps its own watermark key
(`WorkUnit.packed_keys`), committed together, so `state show`, `state reset --to FILE=N` and the changed-file checks
see files as before. The unit's id hashes every file's key and planned end, so the same unread files give the same id after
a crash. A packed unit succeeds or fails whole: under `commit_policy: successful` none of its files advances when it
fails. Packed are JSON lines (and CSV with `csv_columns`, whose files share one header); a larger file, CSV with a
header row per file, and the bytes appended to an ingested file keep a unit each.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import NamedTuple

from gobblin_py.api import BatchExtractor, Extractor, KeyRange, Source, SourceState, TaskContext, WorkUnit
from gobblin_py.api.lag import DatasetLag
from gobblin_py.api.names import workunit_id
from gobblin_py.api.types import SchemaKind, WatermarkValue
from gobblin_py.builtin.sources.files.compression import Compression, split_compression
from gobblin_py.builtin.sources.files.csv_rows import CsvExtractor
from gobblin_py.builtin.sources.files.json_lines import JsonLinesExtractor
from gobblin_py.builtin.sources.files.packed import PackedExtractor
from gobblin_py.builtin.sources.files.reading import KNOWN_EXTENSIONS, FileFormat, FileRange, format_of
from gobblin_py.builtin.sources.files.settings import FilesSettings
from gobblin_py.builtin.sources.files.split import FileSplit, PackedFile
from gobblin_py.errors import FileSystemError, SourceError
from gobblin_py.fs import Location, filesystem_for
from gobblin_py.fs.base import NOT_A_FILE

COMPRESSED_TEXT_RATIO = 5  # a compressed file's bytes to read, estimated from its size
NATIVE_SHARE = 0.6
"""Of a columnar JSON-lines or CSV task's work, the share outside Python's lock (Arrow's parser and writer); measured
in scripts/bench_files.py, where Python's part is cutting lines (about 0.3 µs a line against Arrow's 1–2)."""


class _Input(NamedTuple):  # a tuple: one is made per listed file, and a frozen dataclass costs 4 times as much
    dataset: str
    rel: str  # the watermark key: the path relative to the dataset directory
    file: Location
    size: int


@dataclass(frozen=True)
class _Whole:
    """A new file to read from its start: bytes `[0, end)` (up to its last whole line when tailing, with `tail`,
    the digest kept in `state.tails`)."""

    item: _Input
    end: int
    tail: str | None


class FilesSource(Source):
    """One WorkUnit per file not yet ingested (and, with `ingest_appended`, per appended byte range); small new files
    packed several to a unit."""

    Settings = FilesSettings
    split_type = FileSplit

    @classmethod
    def schema_kind(cls, settings: FilesSettings) -> SchemaKind:
        """CSV rows and JSON objects carry no Avro schema: json_to_avro gives one."""
        return SchemaKind.NONE

    @classmethod
    def fit_to_publishers(cls, settings: FilesSettings, by_name: bool) -> tuple[FilesSettings, list[tuple[str, str]]]:
        """No packing where a publisher knows its outputs by name (a packed unit's output is named after the files it
        happened to pack, which a re-read after `state reset` packs otherwise): off by default there, refused if
        asked for."""
        if not by_name or not settings.pack_bytes:
            return settings, []
        if "pack_bytes" in settings.model_fields_set:
            return settings, [("pack_bytes", "packs several files into one output file, named after the files packed "
                               "together; this job's table publisher knows a range read again (after `state reset`) by its "
                               "files' names, which packing changes, so it would hold those rows twice: set pack_bytes: 0 "
                               "(the default with this publisher)")]
        return settings.model_copy(update={"pack_bytes": 0}), []

    def input_roots(self) -> list[str]:
        return [str(self.settings.path)]

    def get_workunits(self, state: SourceState) -> list[WorkUnit]:
        s: FilesSettings = self.settings
        root = Location(s.path)
        units: list[WorkUnit] = []
        packable: dict[tuple[str, FileFormat | None], list[_Whole]] = {}  # small new files, by dataset and format
        inputs = self._inputs(root, state)
        state.report_listed(item.dataset for item in inputs)
        for item, ingested, problem in self._unread(inputs, state):
            tailing = s.ingest_appended and format_of(item.file.name)[1] is Compression.NONE
            if problem is None and tailing and ingested is not None:
                problem = _rewritten(item, ingested, state.kept(item.dataset).get(TAILS, {}).get(item.rel))
            if problem is not None:
                state.report_input_problem(item.dataset, problem)
                continue
            start = int(ingested or 0)
            end = _whole_lines_end(item.file, start, item.size) if tailing else item.size
            if not (end > start or (ingested is None and end == item.size)):  # tailing: a line being written waits
                continue
            tail = f"{end}:{_tail_digest(item.file, end)}" if tailing else None
            if ingested is None and self._packs(item):
                packable.setdefault((item.dataset, format_of(item.file.name)[0]), []).append(_Whole(item, end, tail))
                continue
            unit = self._workunit(root, item, start, end, ingested)
            if tail is not None:
                unit.props[f"state.{TAILS}"] = {item.rel: tail}
            units.append(unit)
        for group in packable.values():
            units += self._packed(root, group)
        return units

    def _packs(self, item: _Input) -> bool:
        """Whether a new file may share a unit with others: smaller than `pack_bytes`, of a format whose files of a
        dataset all have one schema (JSON lines; CSV only with `csv_columns`, else each file's header names its own)."""
        s: FilesSettings = self.settings
        fmt = format_of(item.file.name)[0]
        return (s.pack_files > 1 and item.size < s.pack_bytes
                and (fmt is FileFormat.JSON_LINES or (fmt is FileFormat.CSV and s.csv_columns is not None)))

    def _packed(self, root: Location, files: list[_Whole]) -> list[WorkUnit]:
        """New files of one dataset and format, in listing order, in units of up to `pack_bytes` bytes and
        `pack_files` files; a unit of one file is that file's own unit, as unpacked."""
        s: FilesSettings = self.settings
        groups: list[list[_Whole]] = [[]]
        size = 0
        for whole in files:
            if groups[-1] and (size + whole.end > s.pack_bytes or len(groups[-1]) >= s.pack_files):
                groups.append([])
                size = 0
            groups[-1].append(whole)
            size += whole.end
        units = []
        for group in filter(None, groups):
            unit = self._workunit(root, group[0].item, 0, group[0].end, None) if len(group) == 1 else self._packed_workunit(root, group)
            tails = {w.item.rel: w.tail for w in group if w.tail is not None}
            if tails:
                unit.props[f"state.{TAILS}"] = tails
            units.append(unit)
        return units

    def _packed_workunit(self, root: Location, files: list[_Whole]) -> WorkUnit:
        """The WorkUnit reading `[0, end)` of several files into one output, named by root, dataset and every file's
        key and end (the same unread files give the same id, so a re-run after a crash writes the same names)."""
        first = files[0]
        stem = PurePosixPath(split_compression(first.item.file.name)[0]).stem
        identity = [part for w in files for part in (w.item.rel, w.end)]
        return WorkUnit(id=workunit_id(f"{stem}+{len(files) - 1}", "files-packed", str(root), first.item.dataset, *identity),
                        dataset=first.item.dataset, watermark_key=first.item.rel, low_watermark=None,
                        expected_high_watermark=first.end,
                        split=FileSplit(file=str(first.item.file), end=first.end,
                                        then=tuple(PackedFile(file=str(w.item.file), end=w.end) for w in files[1:])).packed(),
                        packed_keys=tuple(KeyRange(w.item.rel, None, w.end) for w in files))

    def backlog(self, state: SourceState, timeout_s: float) -> list[DatasetLag]:
        """Per dataset, the files not read and their bytes not read (from the listing planning makes, no file opened;
        with `ingest_appended`, an ingested file's appended bytes too). Files the plan leaves out (changed, unknown
        format) are not counted: the run names them."""
        items = self._inputs(Location(self.settings.path), state)
        files = dict.fromkeys({i.dataset for i in items} | set(state.datasets()), 0)
        unread = dict.fromkeys(files, 0)
        for item, ingested, problem in self._unread(items, state):
            if problem is None:
                files[item.dataset] += 1
                unread[item.dataset] += item.size - int(ingested or 0)
        return [DatasetLag(d, bytes=unread[d], files=files[d]) for d in sorted(files)]

    def _unread(self, items: list[_Input], state: SourceState) -> list[tuple[_Input, WatermarkValue, str | None]]:
        """Each input with bytes not ingested: (it, what of it was ingested, None), or (it, _, why it is not read)."""
        s: FilesSettings = self.settings
        out: list[tuple[_Input, WatermarkValue, str | None]] = []
        done_of: dict[str, dict[str, WatermarkValue]] = {}
        for item in items:
            if item.size == NOT_A_FILE:
                out.append((item, None, f"{item.file} matches include but is not a regular file (a dangling symlink, a "
                                        "FIFO, a socket or a device); not read: remove it, or leave it out of include"))
                continue
            fmt, compression = format_of(item.file.name)
            if fmt is None:
                out.append((item, None, f"{item.file} matches include but its format cannot be told from its name (known: "
                                        f"{', '.join(KNOWN_EXTENSIONS)}, each optionally with .gz, .bz2, .zst or .xz); "
                                        "not read: rename it, or leave it out of include"))
                continue
            if item.dataset not in done_of:  # once per dataset (`setdefault` would read and parse them per file)
                done_of[item.dataset] = state.watermarks(item.dataset)
            ingested = done_of[item.dataset].get(item.rel)
            tailing = s.ingest_appended and compression is Compression.NONE
            if ingested == item.size:
                continue
            if ingested is not None and not (tailing and isinstance(ingested, int) and item.size > ingested):
                out.append((item, ingested, _changed_message(item, ingested)))
                continue
            out.append((item, ingested, None))
        return out

    def _inputs(self, root: Location, state: SourceState) -> list[_Input]:
        """Every file matched by include, with its dataset and key; hidden (`.x`, `_x`) files and directories left out."""
        s: FilesSettings = self.settings
        fs = filesystem_for(root)
        try:
            if not fs.is_dir(root):
                raise SourceError(f"source.path {root} is not a directory")
            files = fs.find(root)
        except FileSystemError as exc:
            raise SourceError(f"cannot list source.path {root}: {exc}") from exc
        root_dataset = s.root_dataset or root.name
        out: list[_Input] = []
        loose: list[_Input] = []  # files directly under `path`
        # one pattern for every `include` (20 by default), each as `fnmatch.fnmatch` matches it; none: nothing is
        included = re.compile("|".join(fnmatch.translate(pat) for pat in s.include) or "(?!)").match
        cut = len(root.rstrip("/")) + 1
        for file, size in sorted(files.items()):
            rel = file[cut:]
            if rel.startswith((".", "_")) or "/." in rel or "/_" in rel:  # a hidden file, or one in a hidden directory
                continue
            parts = rel.split("/")
            if not included(parts[-1]):
                continue
            if len(parts) == 1:
                loose.append(_Input(root_dataset, parts[0], file, size))
            else:
                out.append(_Input(parts[0], "/".join(parts[1:]), file, size))
        if loose and any(i.dataset == root_dataset for i in out):
            state.report_input_problem(root_dataset, f"{len(loose)} file(s) directly under {root} (such as {loose[0].file}) "
                                       f"would be dataset {root_dataset!r}, which the sub-directory of that name already is; "
                                       "not read: set source.root_dataset: OTHER_NAME, or move them into a sub-directory")
            return out
        out += loose
        return out

    def _workunit(self, root: Location, item: _Input, start: int, end: int, low: WatermarkValue) -> WorkUnit:
        """The WorkUnit reading bytes `[start, end)` of a file, named by root, dataset, path and range."""
        stem = PurePosixPath(split_compression(item.file.name)[0]).stem
        prefix = stem if not start and end == item.size else f"{stem}.{start}-{end}"
        return WorkUnit(id=workunit_id(prefix, "files", str(root), item.dataset, item.rel, start, end),
                        dataset=item.dataset, watermark_key=item.rel, low_watermark=low,
                        expected_high_watermark=end, split=FileSplit(file=str(item.file), start=start, end=end).packed())

    def estimated_bytes(self, workunit: WorkUnit, state: SourceState) -> float:
        """The bytes of the file ranges to read; a compressed file counts five times its size (text compresses ~5:1)."""
        total = 0.0
        for file, start, end in FileSplit.of(workunit).parts():
            _, compression = format_of(Location(file).name)
            total += (end - start) * (1 if compression is Compression.NONE else COMPRESSED_TEXT_RATIO)
        return total

    def native_share(self, workunit: WorkUnit, converted: bool) -> float:
        """JSON lines and CSV made Arrow by `json_to_avro`'s batch path are parsed by Arrow's JSON or CSV reader and
        written by Arrow, outside Python's lock; Python still cuts the file into lines or blocks (see `NATIVE_SHARE`)."""
        fmt, _ = format_of(Location(FileSplit.of(workunit).file).name)
        return NATIVE_SHARE if converted and fmt is not None else 0.0

    def get_extractor(self, workunit: WorkUnit, context: TaskContext) -> Extractor:
        parts = [FileRange(Location(file), start, end) for file, start, end in FileSplit.of(workunit).parts()]
        if len(parts) == 1:
            return self._extractor(parts[0], context)
        return PackedExtractor(parts, lambda part: self._extractor(part, context))

    def _extractor(self, file: FileRange, context: TaskContext) -> BatchExtractor:
        """The extractor of one file's range, by the file's format."""
        fmt, _ = format_of(file.path.name)
        if fmt is FileFormat.CSV:
            s = self.settings
            return CsvExtractor(file, context, s.csv_delimiter, s.csv_field_size_limit, s.csv_columns)
        if fmt is FileFormat.JSON_LINES:
            return JsonLinesExtractor(file, context)
        raise SourceError(f"input file {file.path}: its format cannot be told from its name")


def _changed_message(item: _Input, ingested: WatermarkValue) -> str:
    if isinstance(ingested, int) and item.size < ingested:
        return (f"{item.file} is shorter than what was ingested of it ({ingested} → {item.size} bytes): truncated "
                "(copytruncate log rotation) or replaced; not read. To read it from its start: `gobblin-py state reset "
                f"JOB --dataset {item.dataset} --to {item.rel}=0`; to skip what it holds now: `--to {item.rel}={item.size}`")
    return (f"{item.file} changed after it was ingested ({ingested} → {item.size} bytes); not re-read: set "
            f"ingest_appended: true to read the appended bytes, or accept it with "
            f"`gobblin-py state reset JOB --dataset {item.dataset} --to {item.rel}={item.size}`")


TAILS = "tails"
"""The kept state (`state.tails`) of a tailing dataset: file → `<offset>:<digest of the TAIL_PROOF bytes before it>`."""
TAIL_PROOF = 4096


def _tail_digest(file: Location, end: int) -> str:
    """The digest of the `TAIL_PROOF` bytes before offset `end` of a file (fewer at its start)."""
    begin = max(0, end - TAIL_PROOF)
    with filesystem_for(file).open_read(file) as f:
        f.seek(begin)
        return hashlib.sha256(f.read(end - begin)).hexdigest()[:32]


def _rewritten(item: _Input, ingested: WatermarkValue, kept: object) -> str | None:
    """Why a tailing file cannot be read on from its committed offset (the bytes before it are not the ones read:
    rewritten, truncated and written again, replaced); None when they are, or when no digest was kept at that
    offset (before this check existed, or after a `state reset`)."""
    if not isinstance(kept, str) or not isinstance(ingested, int) or item.size < ingested:
        return None
    offset, _, digest = kept.partition(":")
    if offset != str(ingested) or _tail_digest(item.file, ingested) == digest:
        return None
    return (f"{item.file} is not the file whose first {ingested} bytes were ingested: the bytes before that offset "
            "changed (truncated and written again, as copytruncate log rotation does, or replaced by a longer file); "
            "not read, since reading on from the offset would lose its first bytes and cut a line. To read it from its "
            f"start: `gobblin-py state reset JOB --dataset {item.dataset} --to {item.rel}=0`")


TAIL_CHUNK = 64 * 1024


def _whole_lines_end(file: Location, start: int, size: int) -> int:
    """The end of the last whole line in bytes `[start, size)` of a file being appended to (just past its last
    newline; `start` when there is none): a line still being written is left for the run after its newline."""
    fs = filesystem_for(file)
    end = size
    with fs.open_read(file) as f:
        while end > start:
            begin = max(start, end - TAIL_CHUNK)
            f.seek(begin)
            chunk = f.read(end - begin)
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                return begin + newline + 1
            end = begin
    return start
