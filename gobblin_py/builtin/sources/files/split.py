"""The files source's split: which bytes of which file one WorkUnit reads, and, for a packed unit, which files after it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from gobblin_py.api.split import Split


class PackedFile(BaseModel):
    """One more file a packed unit reads whole: its path or URL and its size when planned."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    file: str
    end: int


class FileSplit(Split):
    """Bytes `[start, end)` of `file` (a path or URL), cut on line boundaries by the planner when tailing; a packed
    unit (`then` not empty) reads `file` whole, then each of `then` whole, into the same output file."""

    file: str
    start: int = 0
    end: int
    then: tuple[PackedFile, ...] = ()

    def parts(self) -> list[tuple[str, int, int]]:
        """Every (file, start, end) this unit reads, in order."""
        return [(self.file, self.start, self.end), *((p.file, 0, p.end) for p in self.then)]
