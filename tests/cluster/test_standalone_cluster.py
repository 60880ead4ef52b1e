"""The same job file on a real standalone Spark cluster (master and worker from the pyspark package),
including a worker lost mid-job: Spark reruns its tasks elsewhere and the output holds every record once."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.jobs import example_job, write_job
from support.spark_cluster import LocalSparkCluster

from gobblin_py.testing.crash import duplicates, snapshot
from gobblin_py.testing.outputs import read_avro_dir

pytestmark = [pytest.mark.spark, pytest.mark.cluster]


@pytest.fixture(scope="module")
def cluster():
    with LocalSparkCluster(cores=2, memory="1g") as c:
        yield c


def _cli(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "gobblin_py.cli.main", *args], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_the_example_job_runs_unchanged_on_a_cluster(tmp_path: Path, cluster: LocalSparkCluster) -> None:
    write_job(tmp_path, example_job(tmp_path))
    proc = _cli(["run", "job.yaml", "--master", cluster.url], tmp_path)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out + err
    ids = [r["id"] for r in read_avro_dir(tmp_path / "output")]
    assert len(ids) == len(set(ids)) == 2998
    apps = cluster.state()["completedapps"] + cluster.state()["activeapps"]
    assert any(a["name"] == "gobblin-py:t" for a in apps)  # it really ran on the cluster


def test_a_worker_killed_mid_job_loses_nothing_and_duplicates_nothing(tmp_path: Path, cluster: LocalSparkCluster) -> None:
    job = example_job(tmp_path)
    job["converters"].insert(0, {"class": "gobblin_py.testing.faults:SlowConverter", "seconds_per_record": 0.004})
    write_job(tmp_path, job)
    proc = _cli(["run", "job.yaml", "--master", cluster.url], tmp_path)
    staging = tmp_path / "work" / "staging"
    deadline = time.monotonic() + 120
    while not (staging.exists() and any(staging.rglob("a1-*"))) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert proc.poll() is None, "the job ended before a task started"
    cluster.kill_worker(cluster.workers[-1])   # the machine is gone, with its executor and tasks
    time.sleep(2)
    cluster.start_worker()                     # a new one comes up; Spark reruns the lost tasks there
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out + err
    snap = snapshot(tmp_path / "output")
    assert duplicates(snap) == 0 and sum(snap["records"].values()) == 2998


@pytest.mark.kafka
def test_the_kafka_job_runs_on_the_cluster_exactly_once(tmp_path: Path, cluster: LocalSparkCluster, broker) -> None:
    from support.kafka_broker import end_offsets
    from support.kafka_jobs import kafka_job, new_topic, output_ids

    from gobblin_py.state.store import StateStore

    topic = f"cluster-{time.monotonic_ns()}"
    data = new_topic(broker.bootstrap, topic, 4, 200)
    write_job(tmp_path, kafka_job(tmp_path, broker.bootstrap, [topic]))
    proc = _cli(["run", "job.yaml", "--master", cluster.url], tmp_path)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out + err
    ids = output_ids(tmp_path / "output", topic)
    assert set(ids) == {e["id"] for evs in data.values() for e in evs} and set(ids.values()) == {1}
    committed = {int(k): v for k, v in StateStore(tmp_path / "work", "k").watermarks()[topic].items()}
    assert committed == end_offsets(broker.bootstrap, topic)


@pytest.mark.s3
def test_on_a_cluster_task_output_and_publishing_can_live_in_s3(tmp_path: Path, cluster: LocalSparkCluster, s3) -> None:
    """Executors upload task output to S3 and, as commit tasks, copy-verify it into place: no shared mount for data."""
    bucket = s3.new_bucket()
    job = example_job(tmp_path, job={"name": "t", "work_dir": str(tmp_path / "work"), "filesystems": s3.options,
                                     "task_output_dir": f"s3://{bucket}/_tasks", "commit_on_executors_from": 1},
                      publisher={"final_dir": f"s3://{bucket}/events"})
    write_job(tmp_path, job)
    proc = _cli(["run", "job.yaml", "--master", cluster.url, "-v"], tmp_path)  # -v: its log lines
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out + err
    published = s3.download(f"{bucket}/events", tmp_path / "published")
    ids = [r["id"] for r in read_avro_dir(published)]
    assert len(ids) == len(set(ids)) == 2998
    assert s3.keys(f"{bucket}/_tasks") == []
    assert "committing 2 datasets on the executors" in err
