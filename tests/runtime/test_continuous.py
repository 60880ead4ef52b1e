"""Continuous runs with the files source, the real CLI in a child process (tasks in-process): files picked up as
they arrive, SIGTERM finishing the checkpoint in flight, a second signal stopping at once, SIGKILL at commit
points then a restart, failing checkpoints backing off and ending the run. Each compares the output with one
bounded run over the same files."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.jobs import EXAMPLE_DATA, example_job, write_job

from gobblin_py import checked_json
from gobblin_py.crashpoints import ENV, WINDOW_ENV
from gobblin_py.errors import CorruptCommitRecordError
from gobblin_py.state.events import EventLog
from gobblin_py.state.store import StateStore
from gobblin_py.testing.crash import SIGKILLED, cli, duplicates, snapshot

pytestmark = pytest.mark.crash

CONTINUOUS = ["run", "job.yaml", "--in-process", "--continuous"]
DAYS = sorted(p.name for p in (EXAMPLE_DATA / "clicks").iterdir())


def _job(tmp: Path, **job: object) -> Path:
    (tmp / "data" / "clicks").mkdir(parents=True, exist_ok=True)
    settings = example_job(tmp, job={"name": "t", "work_dir": str(tmp / "work"), "checkpoint_interval": "300ms",
                                     "commit_parallelism": 1, "max_task_retries": 0, **job},
                           source={"class": "files", "path": str(tmp / "data")})
    shutil.rmtree(tmp / "data" / "orders", ignore_errors=True)
    for extra in (tmp / "data" / "clicks").iterdir():
        extra.unlink()
    return write_job(tmp, settings)


def _arrive(tmp: Path, name: str) -> None:
    """A file lands in the source directory whole (written aside, then renamed in), as producers should."""
    dest = tmp / "data" / "clicks" / name
    shutil.copy(EXAMPLE_DATA / "clicks" / name, dest.with_suffix(".part"))
    os.replace(dest.with_suffix(".part"), dest)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    """One bounded run over every clicks file."""
    tmp = tmp_path_factory.mktemp("reference")
    _job(tmp)
    for name in DAYS:
        _arrive(tmp, name)
    done = cli(["run", "job.yaml", "--in-process"], tmp)
    assert done.returncode == 0, done.stdout + done.stderr
    return {"snapshot": snapshot(tmp / "output"), "watermarks": StateStore(tmp / "work", "t").watermarks()}


def _start(tmp: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    child_env = {k: v for k, v in os.environ.items() if k not in (ENV, WINDOW_ENV)} | (env or {})
    return subprocess.Popen([sys.executable, "-m", "gobblin_py.cli.main", *CONTINUOUS], cwd=tmp, env=child_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _committed(tmp: Path) -> dict:
    try:
        return StateStore(tmp / "work", "t").watermarks().get("clicks", {})
    except Exception:  # noqa: BLE001 - read while the run writes: try again
        return {}


def _wait_for(predicate, timeout: float = 60.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _events(tmp: Path) -> list[str]:
    return [e["name"] for e in EventLog(tmp / "work", "t").read()]


def _assert_exactly_once(tmp: Path, reference: dict) -> None:
    snap = snapshot(tmp / "output")
    assert duplicates(snap) == 0 and snap == reference["snapshot"]
    assert StateStore(tmp / "work", "t").watermarks() == reference["watermarks"]
    assert cli(["inspect-commits", "job.yaml"], tmp).returncode == 0, "nothing left pending"


def test_files_arriving_during_a_continuous_run_are_each_committed_once_and_sigterm_stops_it(tmp_path: Path, reference: dict) -> None:
    _job(tmp_path)
    proc = _start(tmp_path)
    try:
        for name in DAYS:
            _arrive(tmp_path, name)
            _wait_for(lambda name=name: name in _committed(tmp_path))  # taken by a checkpoint of the same run
        _wait_for(lambda: StateStore(tmp_path / "work", "t").runs())  # written after the checkpoint's commit
        [live] = StateStore(tmp_path / "work", "t").runs()
        assert live["status"] == "running" and live["duration_s"] > 0, "history shows the run as live, not failed"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, out + err
    assert "SIGTERM: stopping after the checkpoint in flight commits" in err and "SUCCEEDED" in out
    _assert_exactly_once(tmp_path, reference)
    [run] = StateStore(tmp_path / "work", "t").runs()
    body = run
    assert body["mode"] == "continuous" and body["checkpoints_total"] >= len(DAYS)
    assert sum(r["records_written"] for r in body["checkpoints"]) == sum(reference["snapshot"]["records"].values())
    names = _events(tmp_path)
    assert names.count("CheckpointStarted") == body["checkpoints_total"] == names.count("CheckpointCommitted")
    info = [line.split(": ", 1)[1] for line in err.splitlines() if " INFO " in line]
    chatter = [line for line in info if not line.startswith(("checkpoint ", "job t run ", "continuous run "))]
    assert not chatter, chatter  # one line per checkpoint: planning, tasks and datasets are --verbose detail
    assert sum(line.startswith("checkpoint ") for line in info) >= len(DAYS)


def test_sigterm_during_a_checkpoint_lets_it_commit_and_a_second_signal_stops_at_once(tmp_path: Path, reference: dict) -> None:
    _job(tmp_path)
    for name in DAYS:
        _arrive(tmp_path, name)
    proc = _start(tmp_path, {WINDOW_ENV: "0.3"})  # every commit point pauses: the first checkpoint takes seconds
    try:
        _wait_for(lambda: (tmp_path / "work" / "commits" / "t").is_dir() and any((tmp_path / "work" / "commits" / "t").iterdir()))
        proc.send_signal(signal.SIGTERM)  # the first checkpoint is committing
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, out + err
    _assert_exactly_once(tmp_path, reference)

    again = tmp_path / "again"
    again.mkdir()
    _job(again)
    for name in DAYS:
        _arrive(again, name)
    proc = _start(again, {WINDOW_ENV: "0.3"})
    try:
        _wait_for(lambda: (again / "work" / "commits" / "t").is_dir() and any((again / "work" / "commits" / "t").iterdir()))
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)  # the second: at once, as Ctrl-C
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, out + err
    [run] = StateStore(again / "work", "t").runs()
    assert run["status"] == "cancelled"
    assert cli(["run", "job.yaml", "--in-process"], again).returncode == 0  # the next run recovers what was pending
    _assert_exactly_once(again, reference)


@pytest.mark.parametrize("point", ["commit.after_store_write:2", "commit.after_step:3", "commit.before_record_removal:2"])
def test_killed_at_a_commit_point_a_restarted_continuous_run_goes_on_exactly_once(tmp_path: Path, reference: dict, point: str) -> None:
    _job(tmp_path)
    _arrive(tmp_path, DAYS[0])
    killed = _start(tmp_path, {ENV: point})
    try:
        _wait_for(lambda: DAYS[0] in _committed(tmp_path) or killed.poll() is not None)
        _arrive(tmp_path, DAYS[1])  # the second checkpoint with data: a second commit record
        killed.communicate(timeout=60)
    finally:
        killed.kill()
    assert killed.returncode == SIGKILLED, point
    proc = _start(tmp_path)
    try:
        for name in DAYS[2:]:
            _arrive(tmp_path, name)
        _wait_for(lambda: set(DAYS) <= set(_committed(tmp_path)))
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, out + err
    _assert_exactly_once(tmp_path, reference)
    history = cli(["history", "list", "job.yaml"], tmp_path)
    newest, oldest = [line for line in history.stdout.splitlines() if not line.startswith(" ")]
    assert " succeeded " in newest and " killed " in oldest, history.stdout  # not `running` for ever
    assert "ended without finishing it (killed, or its machine lost); found by run " + newest.split()[0] in history.stdout


def test_failing_checkpoints_back_off_and_end_the_run_after_the_limit(tmp_path: Path) -> None:
    path = _job(tmp_path, continuous={"max_consecutive_failures": 3, "max_backoff": "1s"})
    job = json.loads(json.dumps(__import__("yaml").safe_load(path.read_text())))
    job["converters"].insert(0, {"class": "gobblin_py.testing.faults:FlakyConverter", "fail_attempts": 99})
    write_job(tmp_path, job)
    _arrive(tmp_path, DAYS[0])
    done = cli(CONTINUOUS, tmp_path, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "3 checkpoints failed in a row (job.continuous.max_consecutive_failures)" in done.stdout + done.stderr
    assert "injected failure" in done.stdout + done.stderr
    assert _events(tmp_path).count("CheckpointFailed") == 3
    assert StateStore(tmp_path / "work", "t").watermarks() == {} and not (tmp_path / "output").exists()
    [run] = StateStore(tmp_path / "work", "t").runs()
    assert [r["status"] for r in run["checkpoints"]] == ["failed"] * 3


def _stop(proc: subprocess.Popen[str]) -> tuple[str, str]:
    assert proc.poll() is None, "the run ended by itself: " + "".join(proc.communicate())
    proc.send_signal(signal.SIGTERM)
    return proc.communicate(timeout=60)


def test_a_full_work_directory_fails_checkpoints_naming_it_and_the_run_goes_on_once_it_has_room(
        tmp_path: Path, reference: dict, mount, fill_disk) -> None:
    """Issue 26 item 14: the event log's write into a full work directory killed the run (exit 4, then exit 1 naming
    no path); now each checkpoint fails naming the path, and the files that arrived meanwhile are committed once the
    disk has room again."""
    work = mount(["-t", "tmpfs", "-o", "size=8m", "tmpfs"], tmp_path / "work")
    _job(tmp_path, continuous={"max_backoff": "1s"})
    proc = _start(tmp_path)
    try:
        _arrive(tmp_path, DAYS[0])
        _wait_for(lambda: DAYS[0] in _committed(tmp_path))
        fill_disk(work)
        for name in DAYS[1:]:
            _arrive(tmp_path, name)
        time.sleep(4)  # checkpoints fail on the full disk
        assert proc.poll() is None, "the run ended on a full work directory: " + "".join(proc.communicate())
        (work / "filler").unlink()
        _wait_for(lambda: all(name in _committed(tmp_path) for name in DAYS))
        out, err = _stop(proc)
    finally:
        proc.kill()
    assert proc.returncode == 0, out + err
    assert "internal error" not in err and "Traceback" not in err
    assert f"event log {work / 'events' / 't.jsonl'}: cannot append (No space left on device)" in err, err
    assert f"event log {work / 'events' / 't.jsonl'}: written again; " in err and " events were dropped" in err
    _assert_exactly_once(tmp_path, reference)


def test_a_continuous_run_retries_a_dataset_quarantined_by_a_full_output_disk_once_it_has_room(
        tmp_path: Path, reference: dict, mount, fill_disk) -> None:
    """Issue 26 item 14: a short output-disk fault spent every commit attempt in seconds and the dataset stayed
    quarantined until a person ran `recover`; now the attempts are spread by job.commit_retry_backoff and the run
    itself commits the dataset once the disk has room, the other checkpoints going on meanwhile."""
    output = mount(["-t", "tmpfs", "-o", "size=4m", "tmpfs"], tmp_path / "output")
    _job(tmp_path, commit_max_attempts=2, commit_retry_backoff="1s", continuous={"max_backoff": "1s", "max_consecutive_failures": 4})
    fill_disk(output)
    record = tmp_path / "work" / "commits" / "t" / "clicks.json"

    def attempts() -> dict:
        try:
            return checked_json.read(record, CorruptCommitRecordError, "commit record")
        except CorruptCommitRecordError:  # not there yet, or being rewritten
            return {"attempts": 0}

    proc = _start(tmp_path)
    try:
        for name in DAYS:
            _arrive(tmp_path, name)
        _wait_for(lambda: attempts()["attempts"] >= 2)
        time.sleep(2)  # quarantined: more checkpoints than max_consecutive_failures, but they only find it waiting
        body = attempts()
        assert body["fault"] == "environment" and body["attempts"] <= 3, "attempts a second and more apart, not one per checkpoint"
        (output / "filler").unlink()
        _wait_for(lambda: all(name in _committed(tmp_path) for name in DAYS))
        out, err = _stop(proc)
    finally:
        proc.kill()
    assert proc.returncode == 0, out + err
    assert "dataset clicks is quarantined and is skipped this run: quarantined after 2 failed attempts by a fault of " \
           "its environment; retried automatically at " in err, err
    _assert_exactly_once(tmp_path, reference)


@pytest.mark.s3
def test_a_continuous_run_whose_lease_is_taken_over_ends_at_once_naming_the_new_holder(tmp_path: Path, s3) -> None:  # noqa: ANN001
    """Another host's driver takes the job over (`--force-takeover`): the continuous run's next renewal finds it, and
    the run ends (exit 1, naming the lease's new holder) instead of reading a checkpoint after another whose commits
    would all be refused."""
    pytest.importorskip("obstore")
    job = _job(tmp_path, lease={"url": f"s3://{s3.new_bucket()}/leases", "ttl": 3}, filesystems=s3.options)
    for name in DAYS:
        _arrive(tmp_path, name)
    proc = _start(tmp_path)
    try:
        _wait_for(lambda: all(name in _committed(tmp_path) for name in DAYS))
        forced = cli(["run", str(job), "--in-process", "--force-takeover"], tmp_path)
        assert forced.returncode == 0, forced.stdout + forced.stderr
        out, err = proc.communicate(timeout=60)  # ends by itself
    finally:
        proc.kill()
    assert proc.returncode == 1, out + err
    assert "lost its lease" in err and "the continuous run ends" in err and "epoch 2" in err, err
    assert "checkpoints failed in a row" not in err
    assert duplicates(snapshot(tmp_path / "output")) == 0
