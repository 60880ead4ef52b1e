"""Typed splits: what a Source tells its Extractor about one WorkUnit (Flink's `SourceSplit`), one model per source.

A split is planned once in the driver, packed into the WorkUnit as plain, picklable data with its type's name and
version, and checked against the source's declared type before anything runs, so a misnamed or mistyped field is a
planning error naming the source, the work unit and the field, not a `KeyError` on an executor.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from gobblin_py.api.workunit import WorkUnit


class SplitMismatch(Exception):
    """A WorkUnit's packed split does not fit the type asked for; `str()` names the field and what is wrong."""


class Split(BaseModel):
    """The reading instructions of one WorkUnit: frozen, with no unknown fields, versioned by `VERSION`.

    A subclass raises `VERSION` when it changes a field's meaning; a split of another version is refused, never
    guessed at (a plan and its tasks always come from one build, so this only trips on a mixed deployment)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    VERSION: ClassVar[int] = 1

    def packed(self) -> dict[str, Any]:
        """This split as the WorkUnit carries it: its type's name, its version and its fields."""
        return {"type": type(self).__name__, "version": self.VERSION, "fields": self.model_dump(mode="python")}

    @classmethod
    def unpack(cls, packed: Any) -> Any:
        """The split `packed` holds, as this type; SplitMismatch names the field, type or version that does not fit."""
        if not isinstance(packed, dict) or not packed:
            raise SplitMismatch(f"it carries no {cls.__name__} (a source planning it must pass "
                                f"`split={cls.__name__}(…).packed()`)")
        if packed.get("type") != cls.__name__:
            raise SplitMismatch(f"its split is a {packed.get('type')!r}, not a {cls.__name__}")
        if packed.get("version") != cls.VERSION:
            raise SplitMismatch(f"its {cls.__name__} is version {packed.get('version')!r}; this build reads version "
                                f"{cls.VERSION} only")
        try:
            return cls.model_validate(packed.get("fields"))
        except ValidationError as exc:
            raise SplitMismatch("; ".join(_field_error(e) for e in exc.errors())) from None

    @classmethod
    def of(cls, workunit: WorkUnit) -> Any:
        """The split of `workunit`, typed (what an Extractor calls first)."""
        try:
            return cls.unpack(workunit.split)
        except SplitMismatch as exc:
            raise SplitMismatch(f"work unit {workunit.id!r} of dataset {workunit.dataset!r}: {exc}") from None


def _field_error(error: Any) -> str:
    where = ".".join(str(p) for p in error.get("loc", ())) or "(the whole split)"
    return f"field {where!r}: {error.get('msg', 'invalid')}"
