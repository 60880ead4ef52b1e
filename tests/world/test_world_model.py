"""The model-based test in CI: each world's histories for fixed seeds and a bounded number of steps (the long soak
with random seeds is `scripts/soak_world.py`). A history interleaves runs (in the driver and on real local Spark),
SIGKILLs at commit points and at random times, recoveries, abandons, compactions, concurrent runs, `state reset`,
a second host (a run frozen at a commit point beside another driver: seed 1 of each world is leased, the lease alone
keeping the drivers apart, seed 2 keeps the work directory's lock) and changes to the world (see
tests/support/world*.py), and checks after every step that an independent reader sees no id more often than owed,
and at the end every id as often as owed. Each history takes its world's rare or slow rules at fixed steps
(`include`, `pauses`); the test fails if one of them stops doing anything."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.world import History

pytestmark = pytest.mark.crash
pytest.importorskip("avro")

STEPS = 14
SECOND_HOST = ("the lease lost", "a second driver refused: is running elsewhere", "paused holding the lock at",
               "a second driver refused: is already running")
"""What a leased and a locked history's `paused_past_lease` log when each did what it is for."""


def run_all(histories: list[History], tmp: Path) -> list[str]:
    """Each history in a directory of its own; every step of all of them."""
    log: list[str] = []
    for history in histories:
        world = history.run(tmp / f"{history.kind}-{history.seed}")
        assert world.expected, "the history produced records"
        log += world.log
    return log


def drew(log: list[str], *rules: str) -> None:
    """The histories took each of `rules` at least once."""
    missing = [rule for rule in rules if not any(rule in line for line in log)]
    assert not missing, f"no history drew {missing}: pick other seeds"


@pytest.mark.spark
def test_files_histories_publish_every_id_as_often_as_owed(tmp_path: Path) -> None:
    from support.world_files import FilesHistory

    log = run_all([FilesHistory(1, STEPS, include=("run_on_spark", "state_reset", "maintain"), pauses=(1,)),
                   FilesHistory(2, STEPS, include=("disk_full", "dangling_symlink", "rotate", "delete_file", "rotate"),
                                pauses=(1,))],
                  tmp_path)
    drew(log, "run on Spark", "state reset", "disk full", "dangling symlink", "deleted", "rotated", "state reset after rotation",
         "maintain removed the partitions", "ran packed work units", "ran single work units", *SECOND_HOST)


@pytest.mark.kafka
def test_kafka_histories_publish_every_id_as_often_as_owed(tmp_path: Path, broker) -> None:
    from support.world_kafka import KafkaHistory

    log = run_all([KafkaHistory(1, STEPS, broker.bootstrap, include=("recreate_topic", "state_reset"), pauses=(1,)),
                   KafkaHistory(2, STEPS, broker.bootstrap, include=("continuous_killed", "concurrent_runs"), pauses=(1,))],
                  tmp_path)
    drew(log, "topic re-created", "state reset", "continuous run", "concurrent runs", "one refused: is already running",
         *SECOND_HOST)


def test_iceberg_histories_publish_every_id_as_often_as_owed(tmp_path: Path) -> None:
    pytest.importorskip("pyiceberg")
    pytest.importorskip("duckdb")
    from support.world_iceberg import IcebergHistory

    log = run_all([IcebergHistory(1, STEPS, include=("run_job", "rename_column", "maintain", "add_column")),
                   IcebergHistory(2, STEPS, include=("run_job", "add_column", "maintain", "rename_column"), pauses=(1,)),
                   IcebergHistory(3, STEPS, include=("run_job", "drop_table", "run_job", "drop_table"), pauses=(1,))],
                  tmp_path)
    drew(log, "renamed", "column note added", "maintain expired", "dropped and purged", "state reset after drop",
         "maintain removed the partitions", "one refused: is running elsewhere", *SECOND_HOST)


FROZEN_RENEWAL = """import fcntl, os, signal, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
os.kill(os.getpid(), signal.SIGSTOP)
"""


def test_a_driver_frozen_inside_its_lease_renewal_does_not_block_the_takeover(tmp_path: Path) -> None:
    """Found by the files world's `paused_past_lease` (soak, 2026-12-04): with `job.lease.url` a local directory, a swap
    of the lease held a blocking flock on `lease.json.lock` (LocalBlobs._locked, gobblin_py/fs/conditional.py); a driver frozen
    (SIGSTOP) while its renewal thread was inside a swap keeps that flock, and the driver that should take the job
    over once the lease has expired waits on it forever (the soak's hung for 300 s; the lease on it never moved past
    the frozen epoch). Here the frozen renewal is a process that takes that flock and stops itself, beside a run
    frozen at a commit point as in the world: past the TTL another driver must take over, not hang. (A swap is now a
    new version file created only if absent, with no lock any writer waits on.)"""
    from support.jobs import example_job, run_cli, write_job
    from support.world import wait_stopped

    from gobblin_py.crashpoints import PAUSE_ENV

    job = example_job(tmp_path)
    job["job"]["lease"] = {"url": str(tmp_path / "leases"), "ttl": 2}
    path = write_job(tmp_path, job)
    frozen = subprocess.Popen([sys.executable, "-m", "gobblin_py.cli.main", "run", str(path), "--in-process"],
                              env={**os.environ, PAUSE_ENV: "commit.after_store_write"}, text=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    renewal = None
    try:
        assert wait_stopped(frozen, timeout=120), "the run ended before its pause point"
        renewal = subprocess.Popen([sys.executable, "-c", FROZEN_RENEWAL, str(tmp_path / "leases" / "t" / "lease.json.lock")],
                                   text=True)
        assert wait_stopped(renewal, timeout=60)
        time.sleep(3)  # past the frozen driver's lease
        try:
            took = run_cli("run", str(path), "--in-process", timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("the driver past a frozen driver's lease hung 60 s on the lease's lock file (lease.json.lock), "
                        "held by the frozen renewal")
        assert took.returncode == 0 and "took over the lease" in took.stderr, took.stdout + took.stderr
    finally:
        for proc in (frozen, renewal):
            if proc is not None:
                proc.kill()
                proc.wait()


def test_abandoning_a_reread_does_not_withdraw_a_file_the_iceberg_table_lists(tmp_path: Path) -> None:
    """Found by the Iceberg world's soak (seed 3697763188, step 13): `state reset` of a dataset, then a run killed
    after the first step of its commit (the re-read's Parquet file, named as the one the table already lists, found
    there byte-identical), then `recover --all --abandon`: the abandon withdrew that file, which an earlier commit owns
    and the table still lists, so every reader of the table failed on a missing file. The publish step now records
    that it found the file there (`preexisting`), and the abandon leaves it; the next run reads the range again and
    the table still holds every id once."""
    pytest.importorskip("pyiceberg")
    pytest.importorskip("duckdb")
    import yaml
    from support.world import RUN
    from support.world_iceberg import IcebergHistory

    history = IcebergHistory(1, 0)
    world = history.new_world(tmp_path)
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(history.job(world), sort_keys=False))
    history.produce(world, 0)
    history.cli(world, RUN, 1, "run", ok=(0,))
    dataset = next(p.name for p in world.data.iterdir())
    history.cli(world, ["state", "reset", "job.yaml", "--yes", "--dataset", dataset], 2, "state reset", ok=(0,))
    history.cli(world, RUN, 3, "run killed", ok=(-9,), crash_at="commit.after_step:1")
    history.cli(world, ["recover", "job.yaml", "--all", "--abandon", "--yes"], 4, "abandon", ok=(0,))
    produced = set(world.expected)
    after_abandon = history.read(world, 4, "abandon")
    assert set(after_abandon) == produced and set(after_abandon.values()) == {1}
    history.cli(world, RUN, 5, "run", ok=(0,))
    after_run = history.read(world, 5, "run")
    assert set(after_run) == produced and set(after_run.values()) == {1}
