"""The per-task error file: each bad record with where it came from (location, stage) and why."""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

import orjson

from gobblin_py.api import OutputFile, SourceMessage
from gobblin_py.errors import RecordError, describe
from gobblin_py.fs import Location
from gobblin_py.runtime.task.committables import commit_staged

_OPTIONS = orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS
_INT64 = (-(2**63), 2**64 - 1)  # what orjson encodes as a JSON number


def reason(exc: BaseException) -> str:
    """The error file's reason for a record that raised `exc`: a RecordError's message, else the type too."""
    return str(exc) if isinstance(exc, RecordError) else describe(exc)


class ErrorFile:
    """Opened on the first bad record at `<staging>/<dataset>/_errors/<stem>.errors.jsonl`, one JSON line each."""

    def __init__(self, staging_dir: Path, dataset: str, stem: str) -> None:
        self.dataset = dataset
        self.rel_path = f"{dataset}/_errors/{stem}.errors.jsonl"
        self.path = staging_dir / self.rel_path
        self._f: IO[bytes] | None = None
        self.count = 0

    def write(self, record: Any, reason: str, location: str, stage: str, branch: str | None = None,
              original: SourceMessage | None = None) -> None:
        if self._f is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._f = open(self.path, "wb")
        entry = {"location": location, "stage": stage, "reason": reason, "record": record}
        if branch is not None:
            entry["branch"] = branch
        if original is not None:
            entry["message"] = original.to_json()
        try:
            line = orjson.dumps(entry, option=_OPTIONS, default=repr)
        except TypeError:  # a value JSON cannot hold as is (an int beyond 64 bits, a lone surrogate): as text
            line = orjson.dumps(_as_json(entry), option=_OPTIONS, default=repr)
        self._f.write(line)
        self.count += 1

    def commit(self, task_output_dir: Location, unsynced: list[Path] | None = None) -> list[OutputFile]:
        """Close and move into task output, as a committable published beside the data (`unsynced`: as
        `committables.commit_staged`)."""
        if self._f is None:
            return []
        self._f.close()
        return [commit_staged(self.path, task_output_dir / self.rel_path, self.rel_path, self.count, kind="errors",
                              dataset=self.dataset, unsynced=unsynced)]

    def close(self) -> None:
        if self._f is not None:
            self._f.close()


def _as_json(value: Any) -> Any:
    """`value` with what orjson refuses made text: big ints as digits, bad strings escaped, any key a string."""
    if isinstance(value, dict):
        return {_as_json(k) if isinstance(k, (str, int)) else repr(k): _as_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_as_json(v) for v in value]
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, int) and not isinstance(value, bool) and not _INT64[0] <= value <= _INT64[1]:
        return str(value)
    return value
