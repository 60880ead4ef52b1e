"""Planning a run: the committed state → the Source's WorkUnits, checked; the same for `run` and `plan`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from gobblin_py.api import MultiWorkUnit, SourceState, WorkUnit, flatten
from gobblin_py.api.split import Split, SplitMismatch
from gobblin_py.config.model import JobSpec
from gobblin_py.errors import GobblinError, SourceError, StateStoreError, describe
from gobblin_py.runtime.columnar import columnar_shape
from gobblin_py.state.store import StateStore


@dataclass
class Plan:
    """What the Source would run now against the committed state, minus the datasets that may not run."""

    units: list[WorkUnit | MultiWorkUnit]
    previous: dict[str, dict[str, Any]]  # the committed watermarks the plan starts from
    key_stats: dict[str, dict[str, Any]]
    input_problems: dict[str, list[str]] = field(default_factory=dict)
    notices: dict[str, list[str]] = field(default_factory=dict)
    unreadable: dict[str, StateStoreError] = field(default_factory=dict)  # datasets whose watermark or state file is corrupt
    estimated_bytes: dict[str, float | None] = field(default_factory=dict)  # per WorkUnit id: the Source's estimate
    native: dict[str, float] = field(default_factory=dict)  # per WorkUnit id: the share read natively (see `held`)
    listed: set[str] | None = None  # every dataset the Source lists now (None: it cannot tell)

    @property
    def workunits(self) -> list[WorkUnit]:
        return flatten(self.units)

    def estimate(self, unit: WorkUnit | MultiWorkUnit) -> float | None:
        """The Source's estimate of a task's bytes: None when it cannot tell for one of its WorkUnits."""
        sizes = [self.estimated_bytes.get(wu.id) for wu in flatten([unit])]
        return None if any(size is None for size in sizes) else sum(size for size in sizes if size is not None)

    def native_share(self, unit: WorkUnit | MultiWorkUnit) -> float:
        """The share of a task's estimated work done natively, outside Python's lock (`Source.native_share`)."""
        parts = [(self.estimated_bytes.get(wu.id) or 0.0, self.native.get(wu.id, 0.0)) for wu in flatten([unit])]
        total = sum(size for size, _ in parts)
        return sum(size * share for size, share in parts) / total if total else 0.0


def plan(job: JobSpec, state: StateStore, skip: set[str] | frozenset[str] = frozenset()) -> Plan:
    """Ask the Source for WorkUnits from the committed watermarks; datasets in `skip` (pending commits) and
    those with an unreadable watermark or dataset-state file are left out: the state file holds the identities the
    Source checks before it reads (a Kafka topic's id), so reading on without it would fail open. Reads state only:
    no lock, nothing written."""
    committed = committed_state(job, state)
    source_state = committed.source_state
    try:
        source = job.source.create()
        units = source.get_workunits(source_state)
        check_splits(units, job.source.label, source.split_type)  # before the source's own estimates read them
        sizes = {wu.id: source.estimated_bytes(wu, source_state) for wu in flatten(units)}
        shape = columnar_shape(job)
        native = {} if shape is None else {wu.id: min(1.0, max(0.0, source.native_share(wu, shape))) for wu in flatten(units)}
    except GobblinError:
        raise
    except Exception as exc:  # noqa: BLE001 - a plugin's planning failure is reported, not a traceback
        raise SourceError(f"source {job.source.path} could not plan work units: {describe(exc)}") from exc
    check_names(units, job.source.label)
    unreadable = committed.unreadable
    return Plan(without(units, set(skip) | set(unreadable)), committed.watermarks, committed.key_stats,
                source_state.input_problems, source_state.notices, unreadable, sizes, native, source_state.listed)


class Committed(NamedTuple):
    """What the state store holds for the Source: its view (`source_state`), and the parts a plan records."""

    source_state: SourceState
    watermarks: dict[str, dict[str, Any]]
    key_stats: dict[str, dict[str, Any]]
    unreadable: dict[str, StateStoreError]  # datasets whose watermark or dataset-state file is corrupt


def committed_state(job: JobSpec, state: StateStore) -> Committed:
    """The committed watermarks, key statistics and kept source state as the Source sees them (read only: no lock)."""
    marks = state.read_watermarks()
    read_states = state.read_dataset_states()
    states = read_states.values
    stats = {ds: st.get("key_stats") or {} for ds, st in states.items()} if job.source.cls().keeps_key_stats else {}
    kept = {ds: st["source"] for ds, st in states.items() if isinstance(st.get("source"), dict)}
    source_state = SourceState(marks.values, stats, max_records=job.job.checkpoint_max_records, kept=kept)
    return Committed(source_state, marks.values, stats, {**read_states.errors, **marks.errors})


def _one_component(name: str) -> bool:
    return bool(name) and name not in (".", "..") and not any(c in name for c in "/\\\0") and name == name.strip()


def check_names(units: list[WorkUnit | MultiWorkUnit], source: str) -> None:
    """Dataset names and WorkUnit ids become directory and file names: refuse one that could point outside them."""
    for wu in flatten(units):
        for what, name in (("dataset", wu.dataset), ("work unit id", wu.id)):
            if not _one_component(name):
                raise SourceError(f"source {source} planned work unit {wu.id!r} of dataset {wu.dataset!r}: its {what} must be "
                                  "one path component (no '/', '\\' or NUL, no leading or trailing spaces, not '.' or '..')")


def check_splits(units: list[WorkUnit | MultiWorkUnit], source: str, split_type: type[Split] | None) -> None:
    """Every planned WorkUnit carries a split of its source's declared type and version, its fields as typed: a
    mismatch is the source's bug, reported at planning, naming the work unit and the field, before any task runs."""
    if split_type is None:
        return
    for wu in flatten(units):
        try:
            split_type.of(wu)
        except SplitMismatch as exc:
            raise SourceError(f"source {source} planned a work unit whose split does not fit {split_type.__name__}: {exc}") from None


def without(units: list[WorkUnit | MultiWorkUnit], datasets: set[str]) -> list[WorkUnit | MultiWorkUnit]:
    """The plan minus every WorkUnit of `datasets` (blocked by a pending commit or unreadable state)."""
    if not datasets:
        return units
    out: list[WorkUnit | MultiWorkUnit] = []
    for u in units:
        if isinstance(u, MultiWorkUnit):
            kept = tuple(w for w in u.workunits if w.dataset not in datasets)
            if kept:
                out.append(MultiWorkUnit(u.id, kept))
        elif u.dataset not in datasets:
            out.append(u)
    return out
