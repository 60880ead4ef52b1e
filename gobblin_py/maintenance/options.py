"""What `gobblin-py maintain` does: the command line's options over the job file's `maintenance:` section, checked
before anything runs (an option that deletes data is refused with its fix, never taken as something else)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from gobblin_py.api import UpkeepRequest
from gobblin_py.config.model import MIN_ORPHAN_AGE, JobSpec
from gobblin_py.errors import ConfigError
from gobblin_py.state.store import StateStore
from gobblin_py.suggest import did_you_mean
from gobblin_py.units import parse_duration


@dataclass(frozen=True)
class MaintenanceOptions:
    datasets: tuple[str, ...]
    request: UpkeepRequest

    @property
    def anything(self) -> bool:
        r = self.request
        return any(v is not None for v in (r.expire_snapshots_older_than, r.remove_orphans_older_than, r.retention))


def _age(value: str | None, default: float | None, option: str) -> float | None:
    if value is None:
        return default
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise ConfigError(f"{option}: {exc}") from None


def maintenance_options(job: JobSpec, *, datasets: list[str] | None = None, expire_snapshots_older_than: str | None = None,
                        keep_last: int | None = None, remove_orphans_older_than: str | None = None,
                        retention: str | None = None, below_table_retention: bool = False,
                        now: float | None = None) -> MaintenanceOptions:
    """The options given over the job file's `maintenance:` section; ConfigError naming the option that is bad, too
    young, or names a dataset the job never committed, and when nothing at all is asked."""
    section = job.maintenance
    expire = _age(expire_snapshots_older_than, section.expire_snapshots_older_than, "--expire-snapshots-older-than")
    orphans = _age(remove_orphans_older_than, section.remove_orphans_older_than, "--remove-orphans-older-than")
    keep = keep_last if keep_last is not None else section.keep_last
    if keep < 1:
        raise ConfigError(f"--keep-last: at least 1 (the table's current snapshot is always kept); got {keep}")
    if orphans is not None and orphans < MIN_ORPHAN_AGE:
        raise ConfigError(f"--remove-orphans-older-than: {orphans:.0f}s is younger than the {MIN_ORPHAN_AGE:.0f}s a "
                          "commit of the job may take to add the files it published; a younger file may be one a running "
                          "commit adds next. Give 1h or more (3d is the usual choice)")
    kept = _age(retention, section.retention, "--retention")
    if not job.job.lock:
        raise ConfigError("job.lock: maintenance needs the job lock (job.lock: true): it keeps it apart from the job's runs")
    known = StateStore(job.job.records_root, job.name).dataset_names()
    chosen = tuple(datasets or section.datasets)
    for d in chosen:
        if d not in known:
            hint = did_you_mean(d, known)
            raise ConfigError(f"dataset {d!r} has no committed output{f' ({hint})' if hint else ''}; the job's datasets: "
                              f"{', '.join(known) or 'none yet'}")
    options = MaintenanceOptions(chosen, UpkeepRequest(now=now if now is not None else time.time(),
                                                       expire_snapshots_older_than=expire, keep_last=keep,
                                                       remove_orphans_older_than=orphans, retention=kept,
                                                       below_table_retention=below_table_retention))
    if not options.anything:
        raise ConfigError("nothing to do: give --expire-snapshots-older-than, --remove-orphans-older-than or --retention "
                          "(or set them under the job file's `maintenance:`)")
    return options
