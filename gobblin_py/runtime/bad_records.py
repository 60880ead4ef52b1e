"""The per-task error file: rejected records with where they came from and why."""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

import orjson

from gobblin_py.api import OutputFile
from gobblin_py.api.writer import commit_staged
from gobblin_py.fs import Location


class ErrorFile:
    """Opened on the first rejected record at `<staging>/<dataset>/_errors/<stem>.errors.jsonl`."""

    def __init__(self, staging_dir: Path, dataset: str, stem: str) -> None:
        self.rel_path = f"{dataset}/_errors/{stem}.errors.jsonl"
        self.path = staging_dir / self.rel_path
        self._f: IO[bytes] | None = None
        self.count = 0

    def write(self, record: Any, reason: str, location: str, check: str, branch: str | None = None) -> None:
        if self._f is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._f = open(self.path, "wb")
        entry = {"location": location, "check": check, "reason": reason, "record": record}
        if branch is not None:
            entry["branch"] = branch
        self._f.write(orjson.dumps(entry, option=orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS, default=repr))
        self.count += 1

    def commit(self, task_output_dir: Location) -> list[OutputFile]:
        """Close and move into task output, as a committable published beside the data."""
        if self._f is None:
            return []
        self._f.close()
        return [commit_staged(self.path, task_output_dir / self.rel_path, self.rel_path, self.count, kind="errors")]

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
