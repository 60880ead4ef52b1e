"""The status page and its JSON API (FastAPI): read-only over the jobs' state stores unless actions are allowed.

Every response is built from `gobblin_py.operating.overview`, the same reads `gobblin-py status`, `history`,
`state show` and `inspect-commits` make; the pages are rendered on the server from the same data the API serves.
Nothing of a job file is served but its name, path and schedule: a job's settings (and so its secrets) never are."""

from __future__ import annotations

import asyncio
import datetime as dt
import hmac
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, StreamingResponse

import gobblin_py.operating.server.pages as pages
from gobblin_py.commit.guard import JobGuard
from gobblin_py.commit.recovery import recover as recover_pending
from gobblin_py.errors import ConfigError, GobblinError
from gobblin_py.operating import overview as ov
from gobblin_py.operating.lag import DatasetLag, LagCache
from gobblin_py.runtime.runner import new_run_id
from gobblin_py.state.events import EventLog
from gobblin_py.state.store import StateStore

MetricsText = Callable[[list[tuple[dict[str, Any], StateStore]], dict[str, list[DatasetLag]]], bytes]
"""Prometheus text of each job's last run (its record and state store) and each job's lag (by job name):
`gobblin_py.cli.prometheus.last_runs_text`."""


class Jobs:
    """The job files under the paths served, re-read on each request (a job file edited shows at once), and each
    job's lag, measured at most every `lag_ttl_s` (a broker asked once per page load would be asked too often)."""

    def __init__(self, paths: list[Path], lag_timeout_s: float = 10.0, lag_ttl_s: float = 30.0,
                 limits: ov.LagLimits = ov.LagLimits()) -> None:
        self.paths, self.limits = paths, limits
        self._lag = LagCache(ttl_s=lag_ttl_s, timeout_s=lag_timeout_s)
        ov.find_jobs(paths)  # a path that does not exist fails now, at start-up

    def refs(self) -> list[ov.JobRef]:
        return ov.find_jobs(self.paths)

    def ref(self, name: str) -> ov.JobRef:
        for ref in self.refs():
            if ref.name == name:
                return ref
        raise HTTPException(404, f"no job {name!r} is served")

    def spec(self, name: str) -> Any:
        ref = self.ref(name)
        if ref.spec is None:
            raise HTTPException(409, f"job file {ref.path} does not load: {ref.error}")
        return ref.spec

    def lag(self, ref: ov.JobRef) -> list[DatasetLag] | None:
        if ref.spec is None:
            return None
        return self._lag.get([ref.spec]).get(ref.name)

    def lags(self, refs: list[ov.JobRef]) -> dict[str, list[DatasetLag]]:
        """Each loadable job's lag by name, the stale ones measured in parallel."""
        return self._lag.get([r.spec for r in refs if r.spec is not None])

    def overview(self, ref: ov.JobRef) -> ov.JobOverview:
        return ov.job_overview(ref, self.lag(ref), limits=self.limits)


def _state(spec: Any) -> StateStore:
    return StateStore(spec.job.records_root, spec.name)


def _read(call: Callable[[], Any]) -> Any:
    """A read of the state store: a bad run id is a 404, an unreadable file a 500 naming it."""
    try:
        return call()
    except ConfigError as exc:
        raise HTTPException(404, str(exc)) from None
    except GobblinError as exc:
        raise HTTPException(500, str(exc)) from None


def create_app(jobs: Jobs, *, metrics: MetricsText | None = None, token: str | None = None,
               follow_poll_s: float = 0.5) -> FastAPI:
    """The app over `jobs`; with a `token`, the write actions (recover, run) are there too, each asking for it as
    `Authorization: Bearer TOKEN` (compared in constant time); without one they do not exist (404)."""
    app = FastAPI(title="gobblin-py status", version="1", docs_url=None, redoc_url=None,  # Swagger's UI loads from a CDN
                  openapi_url="/api/openapi.json",
                  description="Jobs, runs, datasets, pending commits and lag of the jobs this server was started over.")

    @app.get("/api/jobs", tags=["jobs"], summary="every job's overview (what `gobblin-py status --json` prints)")
    def api_jobs() -> list[dict[str, Any]]:
        return [jobs.overview(ref).to_json() for ref in jobs.refs()]

    @app.get("/api/jobs/{job}", tags=["jobs"], summary="one job's overview")
    def api_job(job: str) -> dict[str, Any]:
        return jobs.overview(jobs.ref(job)).to_json()

    @app.get("/api/jobs/{job}/runs", tags=["runs"], summary="the kept runs, newest first, without tasks (`history list --json`)")
    def api_runs(job: str, limit: int | None = None) -> list[dict[str, Any]]:
        spec = jobs.spec(job)
        return _read(lambda: ov.run_history(spec, limit))

    @app.get("/api/jobs/{job}/runs/{run}", tags=["runs"], summary="one run with tasks (`history show --json`) and its error files' first lines")
    def api_run(job: str, run: str) -> dict[str, Any]:
        spec = jobs.spec(job)
        return _read(lambda: ov.run_detail(spec, run).to_json())

    @app.get("/api/jobs/{job}/datasets", tags=["datasets"], summary="each dataset's watermarks and state (`state show --json`), last commit and lag")
    def api_datasets(job: str) -> list[dict[str, Any]]:
        ref = jobs.ref(job)
        return [d.to_json() for d in jobs.overview(ref).datasets]

    @app.get("/api/jobs/{job}/commits", tags=["commits"], summary="pending commit sequences with each step's state (`inspect-commits --json`)")
    def api_commits(job: str) -> list[dict[str, Any]]:
        spec = jobs.spec(job)
        return [p.to_json() for p in _read(lambda: ov.pending_commits(spec))]

    @app.get("/api/jobs/{job}/lag", tags=["datasets"], summary="each dataset's lag behind its source")
    def api_lag(job: str) -> list[dict[str, Any]]:
        return [entry.to_json() for entry in jobs.lag(jobs.ref(job)) or []]

    @app.get("/api/jobs/{job}/events", tags=["events"], summary="the job's events as server-sent events, followed live")
    async def api_events(job: str, request: Request) -> StreamingResponse:
        spec = jobs.spec(job)
        events = EventLog(spec.job.records_root, spec.name)
        start = request.headers.get("last-event-id")
        offset = int(start) if start and start.isdigit() else None
        followed = follow_events(events.path, offset, request, follow_poll_s) if events.path is not None else \
            follow_stored_events(events, offset, request, follow_poll_s)
        return StreamingResponse(followed,
                                 media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    @app.get("/metrics", tags=["metrics"], summary="Prometheus text of each job's last run", response_class=PlainTextResponse)
    def prometheus() -> PlainTextResponse:
        if metrics is None:
            raise HTTPException(404, "no metrics")
        last = []
        refs = jobs.refs()
        for ref in refs:
            if ref.spec is not None:
                store = _state(ref.spec)
                run = _read(store.last_run)
                if run is not None:
                    last.append((run, store))
        return PlainTextResponse(metrics(last, jobs.lags(refs)), media_type="text/plain; version=0.0.4; charset=utf-8")

    if token:
        _actions(app, jobs, token)
    else:
        @app.post("/api/jobs/{job}/{action}", include_in_schema=False)
        def no_actions(job: str, action: str) -> JSONResponse:
            return JSONResponse({"detail": "read-only: start the server with --allow-actions --token-env VAR"}, status_code=403)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def overview_page() -> HTMLResponse:
        return HTMLResponse(pages.overview([jobs.overview(ref) for ref in jobs.refs()], jobs.limits))

    @app.get("/jobs/{job}", response_class=HTMLResponse, include_in_schema=False)
    def job_page(job: str) -> HTMLResponse:
        ref = jobs.ref(job)
        view = jobs.overview(ref)
        runs = _read(lambda: ov.runs_as_seen(ref.spec)) if ref.spec is not None else []
        return HTMLResponse(pages.job(view, runs))

    @app.get("/jobs/{job}/runs/{run}", response_class=HTMLResponse, include_in_schema=False)
    def run_page(job: str, run: str) -> HTMLResponse:
        spec = jobs.spec(job)
        return HTMLResponse(pages.run(spec.name, _read(lambda: ov.run_detail(spec, run))))

    return app


def _actions(app: FastAPI, jobs: Jobs, token: str) -> None:
    """POST recover and run, each behind the token."""
    children: list[subprocess.Popen[bytes]] = []

    def check(request: Request) -> None:
        given = request.headers.get("authorization", "")
        scheme, _, value = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(value.encode(), token.encode()):
            raise HTTPException(403, "a write action needs the server's token: Authorization: Bearer TOKEN")

    @app.post("/api/jobs/{job}/recover", tags=["actions"], summary="replay every pending commit sequence, quarantined ones included (`recover --all`)")
    def recover(job: str, request: Request) -> dict[str, Any]:
        check(request)
        spec = jobs.spec(job)
        store = ov.commit_store(spec)
        try:
            with JobGuard(spec, new_run_id(), store):
                report = recover_pending(store, spec.name, spec.job.commit_max_attempts, datasets=store.datasets(spec.name),
                                         force=True, parallelism=spec.job.commit_parallelism)
        except GobblinError as exc:
            raise HTTPException(409, str(exc)) from None
        return {"datasets": [{"dataset": r.dataset, "outcome": r.outcome.value, "message": r.message} for r in report.datasets]}

    @app.post("/api/jobs/{job}/run", tags=["actions"], summary="start a run as a `gobblin-py run` child process", status_code=202)
    def run(job: str, request: Request) -> dict[str, Any]:
        check(request)
        ref = jobs.ref(job)
        children[:] = [c for c in children if c.poll() is None]  # reap the ended ones
        child = subprocess.Popen([sys.executable, "-m", "gobblin_py.cli.main", "run", str(ref.path), "--quiet"],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        children.append(child)
        return {"job": ref.name, "pid": child.pid, "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}


TAIL_BYTES = 16 * 1024


async def follow_stored_events(events: EventLog, offset: int | None, request: Request, poll_s: float) -> AsyncIterator[bytes]:
    """`follow_events` for a work directory on an object store: the events' ids count them, and the store's event
    objects are read again every `poll_s` (at least every 2 s: each read lists the store)."""
    seen = offset if offset is not None else max(0, len(await asyncio.to_thread(events.read)) - 20)
    yield b"retry: 2000\n\n"
    while not await request.is_disconnected():
        found = await asyncio.to_thread(events.read)
        for event in found[seen:]:
            seen += 1
            yield b"id: %d\ndata: %s\n\n" % (seen, orjson.dumps(event, default=str))
        await asyncio.sleep(max(poll_s, 2.0))


async def follow_events(path: Path, offset: int | None, request: Request, poll_s: float) -> AsyncIterator[bytes]:
    """The event log's lines from `offset` (a client reconnecting) or its last few, then each line appended, as
    server-sent events whose id is the byte offset after the line; until the client goes away."""
    if offset is None:
        offset = max(0, path.stat().st_size - TAIL_BYTES) if path.exists() else 0
        if offset:
            with open(path, "rb") as f:  # start at a line's beginning
                f.seek(offset)
                offset += len(f.readline())
    yield b"retry: 2000\n\n"
    quiet_since = time.monotonic()
    while not await request.is_disconnected():
        if path.exists() and path.stat().st_size < offset:
            offset = 0  # the log was replaced
        if path.exists() and path.stat().st_size > offset:
            with open(path, "rb") as f:
                f.seek(offset)
                chunk = f.read()
            complete = chunk[: chunk.rfind(b"\n") + 1]  # a line being written waits for its newline
            for line in complete.splitlines(keepends=True):
                offset += len(line)
                if line.strip():
                    yield b"id: %d\ndata: %s\n\n" % (offset, line.strip())
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since > 15:
            yield b": idle\n\n"  # keeps proxies from closing the stream, and finds a client that left
            quiet_since = time.monotonic()
        await asyncio.sleep(poll_s)
