"""WorkUnits: the unit of extraction work a Source plans and a task runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gobblin_py.api.types import WatermarkValue


@dataclass(frozen=True)
class KeyRange:
    """One watermark key a WorkUnit reads: `[low, high)` of `key`."""

    key: str
    low: WatermarkValue
    high: WatermarkValue


@dataclass(frozen=True)
class WorkUnit:
    """One range of one dataset to extract: `[low_watermark, expected_high_watermark)` of `watermark_key`.

    `id` must be deterministic (derived from dataset, key and range) because output file
    names come from it: re-extracting the same range after a crash lands on the same names.
    """

    id: str
    dataset: str
    watermark_key: str
    low_watermark: WatermarkValue
    expected_high_watermark: WatermarkValue
    props: dict[str, Any] = field(default_factory=dict)
    """Only what the dataset's state keeps: `state.<name>` entries (see `SourceState.kept`)."""
    split: dict[str, Any] = field(default_factory=dict)
    """The source's typed split, packed (`Split.packed()`): what the Extractor reads, checked at planning."""
    packed_keys: tuple[KeyRange, ...] = ()
    """A packed unit's keys: several small inputs one task reads into one output file, each keeping its own watermark
    (`watermark_key` and its range are then the first of them). Empty: the unit reads `watermark_key` alone."""

    def key_ranges(self) -> tuple[KeyRange, ...]:
        """Every key this unit reads, with its planned range."""
        return self.packed_keys or (KeyRange(self.watermark_key, self.low_watermark, self.expected_high_watermark),)

    def reached(self, high: WatermarkValue) -> dict[str, WatermarkValue]:
        """Each key's watermark once this unit is read, its extractor having reached `high`: a packed unit's keys each
        reach their planned high (its task succeeds only when it has read every one of its inputs)."""
        if self.packed_keys:
            return {k.key: k.high for k in self.packed_keys}
        return {self.watermark_key: high}


@dataclass(frozen=True)
class MultiWorkUnit:
    """Several WorkUnits run one after another inside one task (Gobblin's MultiWorkUnit)."""

    id: str
    workunits: tuple[WorkUnit, ...]

    @property
    def datasets(self) -> set[str]:
        return {wu.dataset for wu in self.workunits}


def flatten(units: list[WorkUnit | MultiWorkUnit]) -> list[WorkUnit]:
    """All WorkUnits of a plan, MultiWorkUnits unpacked."""
    out: list[WorkUnit] = []
    for unit in units:
        out.extend(unit.workunits if isinstance(unit, MultiWorkUnit) else (unit,))
    return out
