"""Confinement: the directories a job's commit records may name. A record naming any other path is refused
as tampered where it is loaded or logged, before any step touches anything."""

from __future__ import annotations

import dataclasses
import os
import posixpath
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gobblin_py.api.commit_step import CommitStep
from gobblin_py.errors import CorruptCommitRecordError
from gobblin_py.fs.location import Location

if TYPE_CHECKING:
    from gobblin_py.config.model import JobSpec

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def _normal(path: str, dirs: dict[str, str] | None = None) -> str:
    """A comparable form: local paths with `..` and symlinks resolved, URLs with `..` folded (no escape by either).

    `dirs` memoizes the resolved parent directories over one check (a sequence names many files in few
    directories); the last component is resolved only where it is a link.
    """
    loc = Location(path)
    if loc.is_local:
        folded = os.path.normpath(loc)
        if dirs is None or os.path.islink(folded):
            return os.path.realpath(folded)  # resolves the existing part's symlinks, then `..` in the rest
        head, tail = os.path.split(folded)
        real = dirs.get(head)
        if real is None:
            real = dirs[head] = os.path.realpath(head)
        return os.path.join(real, tail)
    scheme, _, rest = loc.partition("://")
    return f"{scheme}://{posixpath.normpath('/' + rest).lstrip('/')}"


def _looks_like_path(value: str) -> bool:
    return value.startswith(("/", "~", "./", "../")) or value == ".." or "/../" in value or bool(_URL.match(value))


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, Location) or (isinstance(value, str) and _looks_like_path(value)):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple, set)):
        for v in value:
            yield from _strings(v)


def step_paths(step: CommitStep) -> list[str]:
    """Every path a step names: its `paths()` where it has one, else each field value that is a Location,
    an absolute path, a URL or holds `..` (a relative name such as a dataset is not a path)."""
    declared = step.paths()
    if declared is not None:
        return [str(p) for p in declared]
    if dataclasses.is_dataclass(step):
        return [p for f in dataclasses.fields(step) for p in _strings(getattr(step, f.name))]
    return []


@dataclass(frozen=True)
class Confinement:
    """The roots (local paths or URLs) under which a job's commit steps may read and write; picklable."""

    roots: tuple[str, ...]

    @classmethod
    def of(cls, roots: Iterable[str | os.PathLike[str]]) -> Confinement:
        return cls(tuple(dict.fromkeys(str(Location(str(r))) for r in roots)))

    @classmethod
    def unconfined(cls) -> Confinement:
        """No check at all: only for listing records read-only (`inspect-commits --work-dir`, no job file)."""
        return cls(())

    def contains(self, path: str) -> bool:
        return self._within(path, self._normal_roots(), None)

    def _normal_roots(self) -> list[str]:
        return [_normal(root).rstrip("/") for root in self.roots]

    def _within(self, path: str, roots: list[str], dirs: dict[str, str] | None) -> bool:
        if not roots:
            return True
        p = _normal(path, dirs)
        return any(p == r or p.startswith(r + "/") for r in roots)

    def check(self, steps: list[CommitStep], where: str) -> None:
        """Raise CorruptCommitRecordError naming the first step and path outside the roots; `where` names the record."""
        roots, dirs = self._normal_roots(), {}
        for index, step in enumerate(steps):
            for path in step_paths(step):
                if not self._within(path, roots, dirs):
                    raise CorruptCommitRecordError(
                        f"{where}: step {index + 1}/{len(steps)} ({type(step).type_name}) names {path}, outside the job's "
                        f"directories ({', '.join(self.roots)}); refused as tampered, nothing was applied (a publisher declares "
                        "where it writes with Committer.output_roots()). If the job's final_dir or task_output_dir changed "
                        "since it was written, restore them to replay it; else drop it with "
                        "`gobblin-py recover JOB.yaml --dataset DATASET --abandon`")


def job_confinement(job: JobSpec) -> Confinement:
    """A job's own directories: its task output, each branch publisher's final_dir, its state and its staging.

    Not the whole work directory: other jobs sharing it keep their state and task output there.
    """
    settings = job.job
    roots: list[str] = [settings.job_task_output, str(settings.records_root / "state" / job.name), str(settings.job_staging)]
    for branch in job.branches:
        roots.extend(branch.publisher.create().output_roots())
    return Confinement.of(roots)
