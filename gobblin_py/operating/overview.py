"""What an operator asks of jobs every morning, read from their state stores: is each job on time, how far behind
is each dataset, what is pending, quarantined or failing and since when, how fast did the runs go. Pure reads, no
web code: `gobblin-py status` prints it, the status page and its JSON API serve it."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import Any

from gobblin_py.commit import inspect as inspection
from gobblin_py.commit.confinement import job_confinement
from gobblin_py.commit.store import CommitStepStore
from gobblin_py.config import load_job
from gobblin_py.config.model import JobSpec
from gobblin_py.cron import Cron, CronError
from gobblin_py.errors import ConfigError, GobblinError
from gobblin_py.fs.conditional import open_blobs
from gobblin_py.operating.committed import committed_state
from gobblin_py.operating.lag import DatasetLag, measure_lag
from gobblin_py.runtime.runner import step_registry
from gobblin_py.scheduling.scheduler import job_files
from gobblin_py.state.alerts import FailureTracker
from gobblin_py.state.lease import LeaseRecord, read_lease
from gobblin_py.state.lock import holder_alive
from gobblin_py.state.store import StateStore


class Health(str, Enum):
    """A job at a glance: fine, needs a person (failing, quarantined, pending, behind), or never ran."""

    OK = "ok"
    ATTENTION = "attention"
    NO_RUNS = "no runs"


@dataclass(frozen=True)
class LagLimits:
    """Lag beyond these needs a person (either one)."""

    seconds: float = 3600.0
    records: int = 1_000_000

    def exceeded(self, lag: DatasetLag) -> bool:
        return (lag.seconds is not None and lag.seconds > self.seconds) or (lag.records is not None and lag.records > self.records)


@dataclass(frozen=True)
class JobRef:
    """A job file found under the paths given, loaded, or the error that kept it from loading."""

    path: Path
    spec: JobSpec | None
    error: str | None = None

    @property
    def name(self) -> str:
        return self.spec.name if self.spec is not None else self.path.stem


def find_jobs(paths: list[Path]) -> list[JobRef]:
    """The job files named and those in the directories named (as `gobblin-py schedule` finds them), each loaded; a
    file that does not load is kept with its error, so one bad file does not hide the others."""
    refs = []
    for path in job_files(paths):
        try:
            refs.append(JobRef(path, load_job(path)))
        except GobblinError as exc:
            refs.append(JobRef(path, None, str(exc)))
    return refs


def lease_of(job: JobSpec) -> LeaseRecord | None:
    """The job's lease as it stands (None: no run took it, or `job.lock` is off); StateStoreError when unreadable."""
    if not job.job.lock:
        return None
    return read_lease(open_blobs(job.job.lease_location, job.job.filesystems), job.name)


def _holder_gone(job: JobSpec, run_id: str) -> bool:
    """Whether the run `run_id`, whose record says running, is gone: with a lease URL (no lock file), its lease is
    another run's, released or expired; else the job lock names no live holder."""
    if not job.job.shared_lease:
        return holder_alive(job.job.work_dir, job.name) is False
    try:
        lease = lease_of(job)
    except GobblinError:
        return False  # unknown: shown as its record says
    return lease is None or lease.owner.run_id != run_id or not lease.live(time.time())


def runs_as_seen(job: JobSpec) -> list[dict[str, Any]]:
    """The job's kept runs, oldest first; the newest, when its record says `running` but its holder is gone (the job
    lock names no live holder, or its lease is no longer its own), shown `killed` (the next run rewrites it so)."""
    runs = StateStore(job.job.records_root, job.name).runs()
    if runs and runs[-1].get("status") == "running" and job.job.lock and _holder_gone(job, str(runs[-1].get("run_id"))):
        runs[-1] = {**runs[-1], "status": "killed", "error": KILLED}
    return runs


def run_history(job: JobSpec, limit: int | None = None) -> list[dict[str, Any]]:
    """The kept runs newest first, without their tasks (what `history list --json` prints)."""
    runs = list(reversed(runs_as_seen(job)))[:limit]
    return [{k: v for k, v in r.items() if k != "tasks"} for r in runs]


def find_run(job: JobSpec, run_id: str) -> dict[str, Any]:
    """The kept run whose id starts with `run_id` (what `history show` prints); ConfigError when none or several do."""
    runs = runs_as_seen(job)
    matches = [r for r in runs if str(r["run_id"]).startswith(run_id)]
    if len(matches) != 1:
        raise ConfigError(f"run {run_id!r} {'is ambiguous' if matches else 'is not in the history'} "
                          f"(the last {len(runs)} runs are kept; see `gobblin-py history list`)")
    return matches[0]


@dataclass(frozen=True)
class PendingCommit:
    """A pending commit sequence (what `inspect-commits` shows), and whether it is quarantined: it failed
    `job.commit_max_attempts` times, so runs no longer retry it on their own."""

    view: inspection.PendingView
    quarantined: bool

    def to_json(self) -> dict[str, Any]:
        return {**self.view.to_json(), "quarantined": self.quarantined}


def commit_store(job: JobSpec) -> CommitStepStore:
    """The job's commit log, its records' steps resolved and confined to the job's directories."""
    return CommitStepStore(job.job.records_root, step_registry(job), job_confinement(job))


def pending_commits(job: JobSpec) -> list[PendingCommit]:
    """The job's pending commit sequences with each step's state, checked against the filesystem."""
    store = commit_store(job)
    return [PendingCommit(v, v.corrupt is not None or v.attempts >= job.job.commit_max_attempts)
            for v in inspection.pending(store, [job.name])]


KILLED = "its process ended without finishing it (killed, or its machine lost): the next run recovers its commits"


@dataclass(frozen=True)
class RunSummary:
    """One run in a line: what the overview and the charts show."""

    run_id: str
    status: str
    started: str
    duration_s: float
    records_extracted: int
    records_written: int
    records_rejected: int
    records_per_s: float
    error: str | None
    per_dataset: dict[str, int]  # records written

    @classmethod
    def of(cls, run: dict[str, Any]) -> RunSummary:
        datasets = run.get("datasets", [])
        metrics = run.get("metrics") or {}
        written = sum(int(d.get("records_written", 0)) for d in datasets)
        duration = float(run.get("duration_s") or 0.0)
        return cls(run_id=str(run["run_id"]), status=str(run.get("status", "unknown")), started=str(run.get("started", "")),
                   duration_s=duration, records_extracted=sum(int(d.get("records_extracted", 0)) for d in datasets),
                   records_written=written, records_rejected=sum(int(d.get("records_rejected", 0)) for d in datasets),
                   records_per_s=float(rate if (rate := metrics.get("records_per_s")) is not None  # None: under way
                                       else written / duration if duration else 0.0),
                   error=run.get("error"), per_dataset={str(d["dataset"]): int(d.get("records_written", 0)) for d in datasets})


@dataclass
class DatasetView:
    """A dataset's committed position, when it last committed, its lag, and whether a commit of it is pending."""

    dataset: str
    watermarks: dict[str, Any]
    state: dict[str, Any]
    committed_at: str | None
    last_run_id: str | None
    lag: DatasetLag | None
    pending: bool = False
    quarantined: bool = False
    table: dict[str, Any] | None = None
    unreadable: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The view as JSON values; its dicts as they were read (JSON already), not deep-copied as `asdict` would:
        a dataset of 50,000 files has 50,000 watermarks, whose copy was most of `status --json`'s own time."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "lag"}
        out["lag"] = self.lag.to_json() if self.lag is not None else None
        return out


@dataclass
class JobOverview:
    """One job on the overview: its schedule, last run, next firing, failing streak, pending and quarantined
    commits, lag, and the reasons a person is needed (empty when none)."""

    name: str
    path: str
    health: Health
    attention: list[str] = field(default_factory=list)
    schedule: str | None = None
    next_fire: str | None = None
    last_run: RunSummary | None = None
    last_success: str | None = None
    failing_streak: int = 0
    failing_since: str | None = None
    pending: list[PendingCommit] = field(default_factory=list)
    datasets: list[DatasetView] = field(default_factory=list)
    error: str | None = None
    lease: dict[str, Any] | None = None  # the job's lease: epoch, owner (run, pid, host, work_dir), expiry, state

    @property
    def quarantined(self) -> list[PendingCommit]:
        return [p for p in self.pending if p.quarantined]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "health": self.health.value, "attention": self.attention,
                "schedule": self.schedule, "next_fire": self.next_fire,
                "last_run": asdict(self.last_run) if self.last_run is not None else None,
                "last_success": self.last_success, "failing_streak": self.failing_streak, "failing_since": self.failing_since,
                "pending": [p.view.dataset for p in self.pending], "quarantined": [p.view.dataset for p in self.quarantined],
                "datasets": [d.to_json() for d in self.datasets], "error": self.error, "lease": self.lease}


def next_fire(schedule: str | None, now: dt.datetime) -> str | None:
    """When a cron schedule fires next after `now` (local time, as `gobblin-py schedule` fires it); None without one."""
    if not schedule:
        return None
    try:
        return Cron.parse(schedule).next_after(now).isoformat(timespec="seconds")
    except CronError as exc:
        return f"never ({exc})"


def failing_streak(job: JobSpec, runs: list[dict[str, Any]]) -> tuple[int, str | None]:
    """Consecutive failed runs, as the failure alerts count them (`alerts.json`), and when the first of them started
    (from the kept history; None when it goes back further than the history)."""
    state = StateStore(job.job.records_root, job.name)
    try:
        count = FailureTracker(state.dir, job.name, None).consecutive_failures()
    except GobblinError:
        count = 0
    counted = [r for r in runs if r.get("status") not in ("cancelled", "running", "killed")]  # as the alerts count
    if not count:  # no alerts file yet (a run before it existed): count from the history
        for r in reversed(counted):
            if r.get("status") == "succeeded":
                break
            count += 1
    since = counted[-count].get("started") if 0 < count <= len(counted) else None
    return count, since


def job_lag(job: JobSpec, timeout_s: float = 10.0, on_wait: Callable[[str], None] | None = None,
            capped: bool = False) -> list[DatasetLag]:
    """`measure_lag`, never raising: a measurement that fails gives each dataset the error instead of a figure;
    `capped`: `timeout_s` is the whole wait, no grace after it."""
    try:
        return measure_lag(job, timeout_s, on_wait=on_wait, **({"grace_s": 0.0} if capped else {}))
    except Exception as exc:  # noqa: BLE001 - a broker or database down must not hide the rest of the overview
        return [DatasetLag(dataset=d, records=None, seconds=None, bytes=None, files=None, unit="records", partitions=(),
                           error=f"lag not measured: {exc}") for d in StateStore(job.job.records_root, job.name).dataset_names()]


def jobs_overview(refs: list[JobRef], lag_timeout_s: float | None = 10.0, now: dt.datetime | None = None,
                  limits: LagLimits = LagLimits(), on_wait: Callable[[str], None] | None = None) -> list[JobOverview]:
    """Every job's overview, with its lag measured (unless `lag_timeout_s` is None); with `on_wait` (a person waits at a
    terminal) each source's wait is announced and capped at `lag_timeout_s`."""
    capped = on_wait is not None
    return [job_overview(ref, job_lag(ref.spec, lag_timeout_s, on_wait, capped)
                         if ref.spec is not None and lag_timeout_s is not None else None,
                         now, limits) for ref in refs]


def job_overview(ref: JobRef, lag: list[DatasetLag] | None = None, now: dt.datetime | None = None,
                 limits: LagLimits = LagLimits()) -> JobOverview:
    """The overview of one job: every read that fails is named in `error` or `attention`, never raised."""
    if ref.spec is None:
        return JobOverview(ref.name, str(ref.path), Health.ATTENTION, [f"job file does not load: {ref.error}"], error=ref.error)
    job = ref.spec
    now = now or dt.datetime.now()
    view = JobOverview(job.name, str(ref.path), Health.NO_RUNS, schedule=job.job.schedule, next_fire=next_fire(job.job.schedule, now))
    try:
        runs = runs_as_seen(job)
    except GobblinError as exc:
        runs = []
        view.attention.append(f"run history unreadable: {exc}")
    if runs:
        view.last_run = RunSummary.of(runs[-1])
        ok = [r for r in runs if r.get("status") == "succeeded"]
        view.last_success = str(ok[-1]["started"]) if ok else None
    view.failing_streak, view.failing_since = failing_streak(job, runs)
    if view.failing_streak:
        view.attention.append(f"failing: {view.failing_streak} run(s) in a row"
                              + (f" since {view.failing_since}" if view.failing_since else ""))
    elif view.last_run is not None and view.last_run.status not in ("succeeded", "running", "cancelled"):
        view.attention.append(f"last run {view.last_run.status}")
    try:
        lease = lease_of(job)
        view.lease = lease.to_view(time.time()) if lease is not None else None
    except GobblinError as exc:
        view.attention.append(f"lease unreadable: {exc}")
    try:
        view.pending = pending_commits(job)
    except GobblinError as exc:
        view.attention.append(f"commit log unreadable: {exc}")
    if view.quarantined:
        view.attention.append(f"quarantined commits: {', '.join(p.view.dataset for p in view.quarantined)}")
    waiting = [p.view.dataset for p in view.pending if not p.quarantined]
    if waiting:
        view.attention.append(f"pending commits: {', '.join(waiting)}")
    view.datasets = dataset_views(job, view.pending, lag)
    behind = [d.dataset for d in view.datasets if d.lag is not None and limits.exceeded(d.lag)]
    if behind:
        view.attention.append(f"lag beyond {limits.seconds:g} s or {limits.records:,} records: {', '.join(behind)}")
    unreadable = [d.dataset for d in view.datasets if d.unreadable]
    if unreadable:
        view.attention.append(f"state unreadable: {', '.join(unreadable)}")
    view.health = Health.ATTENTION if view.attention else Health.OK if runs else Health.NO_RUNS
    return view


def dataset_views(job: JobSpec, pending: list[PendingCommit], lag: list[DatasetLag] | None) -> list[DatasetView]:
    """Each dataset with committed state, a pending commit or a lag figure (what `state show` shows, with the lag)."""
    try:
        committed = committed_state(job)
    except GobblinError as exc:
        return [DatasetView(dataset="(state)", watermarks={}, state={}, committed_at=None, last_run_id=None, lag=None,
                            unreadable=str(exc))]
    lags = {entry.dataset: entry for entry in lag or []}
    waiting = {p.view.dataset: p for p in pending}
    out = []
    for name in sorted(set(committed.view) | set(waiting) | set(lags)):
        entry = committed.view.get(name, {"watermarks": {}, "state": {}})
        state = entry["state"]
        out.append(DatasetView(dataset=name, watermarks=entry["watermarks"], state=state,
                               committed_at=state.get("committed_at"), last_run_id=state.get("run_id"), lag=lags.get(name),
                               pending=name in waiting, quarantined=name in waiting and waiting[name].quarantined,
                               table=entry.get("table"), unreadable=committed.unreadable.get(name)))
    return out


@dataclass(frozen=True)
class ErrorFile:
    """A task's error file (its bad records) and its first lines, when the file is on a local disk."""

    dataset: str
    workunit: str
    path: str
    rejected: dict[str, int]
    first_lines: list[str]
    note: str | None = None


@dataclass
class RunDetail:
    """One run as `history show --json` prints it, with its tasks' error files opened."""

    run: dict[str, Any]
    error_files: list[ErrorFile]

    def to_json(self) -> dict[str, Any]:
        return {**self.run, "error_files": [asdict(e) for e in self.error_files]}


ERROR_LINES = 5


def run_detail(job: JobSpec, run_id: str, lines: int = ERROR_LINES) -> RunDetail:
    """A kept run (by id or unique prefix) and the first `lines` lines of each of its tasks' error files."""
    run = find_run(job, run_id)
    roots = [Path(str(r)) for b in job.branches if (r := getattr(b.publisher.settings, "final_dir", None)) and "://" not in str(r)]
    found = []
    for task in run.get("tasks", []):
        for rel in task.get("files", []):
            if "/_errors/" in f"/{rel}" and str(rel).endswith(".errors.jsonl"):
                found.append(_error_file(task, str(rel), roots, lines))
    return RunDetail(run, found)


def _error_file(task: dict[str, Any], rel: str, roots: list[Path], lines: int) -> ErrorFile:
    for root in roots:
        path = (root / rel).resolve()
        if not path.is_relative_to(root.resolve()):  # a record naming a path outside the publisher's directory
            continue
        if path.is_file():
            with open(path, encoding="utf-8", errors="replace") as f:
                head = [line.rstrip("\n")[:2000] for _, line in zip(range(lines), f)]
            return ErrorFile(task["dataset"], task["workunit"], str(path), dict(task.get("rejected", {})), head)
    where = str(roots[0] / rel) if roots else rel
    return ErrorFile(task["dataset"], task["workunit"], where, dict(task.get("rejected", {})), [],
                     "not readable here (removed, or not on a local disk)")
