"""Resuming datasets the state store lost from what their targets recorded: a table's snapshots carry the watermarks
each commit set, so a new, lost or moved work directory neither extracts everything again nor adds it twice."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from gobblin_py.api import GlobalCommitter, TargetWatermarks
from gobblin_py.config.model import JobSpec
from gobblin_py.errors import GobblinError, StateStoreError, describe
from gobblin_py.state.store import StateStore, WatermarkFile

log = logging.getLogger(__name__)


@dataclass
class Resumed:
    notices: dict[str, str] = field(default_factory=dict)
    """dataset → where its watermarks were taken from (written into the state store)."""
    refused: dict[str, GobblinError] = field(default_factory=dict)
    """dataset → why its targets cannot say where the job was: it is not extracted this run."""


def resume_from_targets(job: JobSpec, state: StateStore, datasets: set[str]) -> Resumed:
    """For `datasets`, of which the state store holds nothing: write the watermarks the job's table publishers
    recorded of each into the state store, as their commits would have. A dataset whose target cannot be read, refuses
    (`resume_watermarks` raising), or whose branches' targets disagree is refused, naming them."""
    out = Resumed()
    publishers = [(b.name, b.publisher.create()) for b in job.branches if issubclass(b.publisher.cls(), GlobalCommitter)]
    if not datasets or not publishers:
        return out
    for dataset in sorted(datasets):
        found: tuple[str, TargetWatermarks] | None = None
        try:
            for branch, publisher in publishers:
                try:
                    mark = publisher.resume_watermarks(job.name, [dataset]).get(dataset)
                except GobblinError:
                    raise
                except Exception as exc:  # noqa: BLE001 - a target that cannot be read: starting over could double its data
                    raise StateStoreError(
                        f"dataset {dataset} has no committed state in {state.dir}, and what branch {branch}'s publisher "
                        f"committed of it cannot be read ({describe(exc)}): starting over could add again what it holds. "
                        "Make the target reachable, or restore the work directory, and run again") from exc
                if mark is None:
                    continue
                if found is not None and found[1].watermarks != mark.watermarks:
                    raise StateStoreError(
                        f"dataset {dataset} has no committed state in {state.dir}, and its targets disagree on its "
                        f"watermarks: {found[1].found_in} (branch {found[0]}) and {mark.found_in} (branch {branch}). "
                        f"Set them with `gobblin-py state reset JOB.yaml --dataset {dataset} --to KEY=VALUE …` and run again")
                found = found or (branch, mark)
        except GobblinError as exc:
            out.refused[dataset] = exc
            continue
        if found is not None:
            mark = found[1]
            WatermarkFile(state.dir, dataset).write(mark.watermarks)
            out.notices[dataset] = (f"no committed state in the state store ({state.dir}): watermarks taken from "
                                    f"{mark.found_in} ({len(mark.watermarks)} keys)")
            log.info("dataset %s: %s", dataset, out.notices[dataset])
    return out
