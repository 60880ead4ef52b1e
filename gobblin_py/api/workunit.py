"""WorkUnits: the unit of extraction work a Source plans and a task runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gobblin_py.api.types import WatermarkValue


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
