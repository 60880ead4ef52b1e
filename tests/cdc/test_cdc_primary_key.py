"""postgres_cdc's primary key is a recorded identity: the key planned is checked against the catalog when a task reads
(a chunk in its own snapshot, a stream before its changes), so a key changed between planning and extraction fails the
task naming the table, both keys and the fix, commits nothing of the table, and the runs after converge."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cdc.cdc_jobs import cdc_job, run
from cdc.test_cdc_chunked import check_output, chunk_state
from support.jobs import write_job

from gobblin_py.runtime.runner import JobRunner
from gobblin_py.testing.crash import cli


@pytest.fixture
def after_planning(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Callable[[], Any]]]:
    """Changes (appended by the test) made to the source after the next run planned, before its tasks read: the world
    changing between planning and extraction. Each is made once, by the first run after it was appended."""
    changes: list[Callable[[], Any]] = []
    original = JobRunner._run_tasks

    def changed_then_run(self: JobRunner, run_id: str, planned: Any) -> Any:
        while changes:
            changes.pop(0)()
        return original(self, run_id, planned)

    monkeypatch.setattr(JobRunner, "_run_tasks", changed_then_run)
    yield changes


def test_a_key_changed_before_a_chunk_is_read_fails_closed(tmp_path: Path, pg: Any, db: str,
                                                          after_planning: list[Callable[[], Any]]) -> None:
    """A chunked snapshot's chunk planned by `id` whose table is keyed by `v` (and `id` nullable, some null) when the
    chunk is read: the run fails naming the table, both keys and the re-snapshot, and after it the output replays to
    the table, every row once. Read by the old key, the rows whose id became null were in no chunk's range."""
    conn = pg.connect(db)
    conn.execute("CREATE TABLE public.t (id int PRIMARY KEY, v text NOT NULL); "
                 "INSERT INTO public.t SELECT g, 'r' || g FROM generate_series(1, 30) g")
    job = cdc_job(tmp_path, pg, db, tables=["public.t"], create_publication=True, snapshot_chunk_rows=5,
                  snapshot_chunks_per_run=2)
    first = run(tmp_path, job)
    assert first.succeeded, first.error
    after_planning.append(lambda: conn.execute("ALTER TABLE public.t DROP CONSTRAINT t_pkey, ADD PRIMARY KEY (v), "
                                               "ALTER id DROP NOT NULL; UPDATE public.t SET id = NULL WHERE id > 20"))
    second = run(tmp_path, job)
    assert not second.succeeded, "a chunk was read by a key the table no longer has"
    for part in ("public.t", "primary key changed since this run planned it", "planned (id), now (v)",
                 "state reset JOB.yaml --dataset public.t"):
        assert part in second.error, second.error
    write_job(tmp_path, job)
    reset = cli(["state", "reset", "job.yaml", "--dataset", "public.t", "--yes"], tmp_path)
    assert reset.returncode == 0, reset.stdout + reset.stderr
    for _ in range(8):
        done = run(tmp_path, job)
        assert done.succeeded, done.error
        if chunk_state(tmp_path, "public.t") is None:
            break
    assert chunk_state(tmp_path, "public.t") is None, "the re-snapshot did not finish in eight runs"
    check_output(tmp_path, conn, "public.t", key="v", snapshots=2)
    conn.close()


def test_a_key_changed_before_a_stream_is_read_fails_closed(tmp_path: Path, pg: Any, db: str,
                                                           after_planning: list[Callable[[], Any]]) -> None:
    """A table streamed under REPLICA IDENTITY FULL (where the key-update rule takes the planned key) whose key changes
    after planning: the run fails naming the table, both keys and that the next run plans by the new key; the next
    run reads the same changes and the output, replayed by the new key, equals the table."""
    conn = pg.connect(db)
    conn.execute("CREATE TABLE public.t (id int PRIMARY KEY, v text NOT NULL); ALTER TABLE public.t REPLICA IDENTITY "
                 "FULL; INSERT INTO public.t SELECT g, 'r' || g FROM generate_series(1, 10) g")
    job = cdc_job(tmp_path, pg, db, tables=["public.t"], create_publication=True)
    first = run(tmp_path, job)
    assert first.succeeded, first.error
    conn.execute("UPDATE public.t SET v = v || 'u' WHERE id <= 3")
    conn.execute("DELETE FROM public.t WHERE id = 4")
    after_planning.append(lambda: conn.execute("ALTER TABLE public.t DROP CONSTRAINT t_pkey, ADD PRIMARY KEY (v)"))
    second = run(tmp_path, job)
    assert not second.succeeded, "a stream was read by a key the table no longer has"
    for part in ("public.t", "primary key changed since this run planned it", "planned (id), now (v)",
                 "the next run plans by the new key"):
        assert part in second.error, second.error
    conn.execute("UPDATE public.t SET id = id + 100 WHERE id = 5")
    third = run(tmp_path, job)
    assert third.succeeded, third.error
    check_output(tmp_path, conn, "public.t", key="v")  # kept by its key now: id 5 → 105 is an update of row r5
    conn.close()
