"""Operating a job from the CLI: progress lines, metrics, events, state and history commands."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from support.jobs import example_job, write_job

from gobblin_py.state.events import EventLog
from gobblin_py.state.store import StateStore
from gobblin_py.testing.crash import SIGKILLED, cli

RUN = ["run", "job.yaml", "--in-process"]


@pytest.fixture
def job_dir(tmp_path: Path) -> Path:
    write_job(tmp_path, example_job(tmp_path))
    return tmp_path


def test_without_a_terminal_progress_is_plain_log_lines_and_quiet_silences_them(job_dir: Path) -> None:
    run = cli([*RUN, "-v"], job_dir)  # stdout and stderr are pipes here, as under cron; -v: the run's log lines
    assert run.returncode == 0
    assert "tasks: 4/4 done, 0 running, 0 failed" in run.stderr  # each dataset's JSON-lines files packed: 4 tasks
    assert "dataset clicks: committed, 2000 records written, 5 files" in run.stderr
    assert "\x1b[" not in run.stderr  # no terminal control codes
    quiet = cli([*RUN, "--quiet"], job_dir)
    assert quiet.returncode == 0 and "tasks:" not in quiet.stderr and " INFO " not in quiet.stderr
    assert quiet.stdout == "" and quiet.stderr == ""  # silent on success: cron mails only what needs a person


def test_quiet_still_prints_a_failure(job_dir: Path) -> None:
    (job_dir / "data" / "clicks" / "gone.jsonl").symlink_to(job_dir / "nowhere.jsonl")  # an input problem
    quiet = cli([*RUN, "--quiet"], job_dir)
    assert quiet.returncode == 1
    assert "gone.jsonl" in quiet.stdout + quiet.stderr and "FAILED job t run " in quiet.stdout


def test_metrics_json_and_the_event_log(job_dir: Path) -> None:
    run = cli([*RUN, "--metrics-json", "m/metrics.json"], job_dir)
    assert run.returncode == 0
    metrics = json.loads((job_dir / "m" / "metrics.json").read_text())
    m = metrics["metrics"]
    assert (m["records_extracted"], m["records_written"], m["records_rejected"], m["files_published"]) == (3000, 2998, 4, 10)
    assert m["rejected_by_check"] == {"extractor": 2, "converters[0] (json_to_avro)": 2}
    assert m["bytes_written"] > 0 and set(metrics["phases"]) >= {"recovery", "planning", "tasks", "commit"}
    events = EventLog(job_dir / "work", "t").read()
    names = [e["name"] for e in events]
    assert names[:2] == ["JobStarted", "WorkUnitsCreated"] and names[-1] == "JobSucceeded"
    assert names.count("TaskFinished") == 4 and names.count("DatasetCommitted") == 2
    assert all(e["namespace"] == "gobblin_py.runtime" and e["metadata"]["run_id"] == metrics["run_id"] for e in events)


def test_state_show_and_reset(job_dir: Path) -> None:
    assert cli(RUN, job_dir).returncode == 0
    shown = cli(["state", "show", "job.yaml", "--json"], job_dir)
    state = json.loads(shown.stdout)
    assert len(state["orders"]["watermarks"]) == 5 and state["clicks"]["state"]["records_written"] == 2000
    table = cli(["state", "show", "job.yaml", "--dataset", "orders"], job_dir)
    assert "orders-2026-01-02.csv = 8324" in table.stdout
    assert cli(["state", "show", "job.yaml", "--dataset", "nope"], job_dir).returncode == 2
    unconfirmed = cli(["state", "reset", "job.yaml", "--dataset", "orders", "--to", "orders-2026-01-02.csv=1"], job_dir)
    assert unconfirmed.returncode == 1 and "8324 → 1" in unconfirmed.stdout and "pass --yes" in unconfirmed.stderr
    dropped = cli(["state", "reset", "job.yaml", "--dataset", "orders", "--yes"], job_dir)
    assert dropped.returncode == 0 and "watermarks reset" in dropped.stdout
    again = cli(RUN, job_dir)
    assert again.returncode == 0 and "orders   committed          999" in again.stdout
    assert "WatermarkReset" in [e["name"] for e in EventLog(job_dir / "work", "t").read()]


def test_state_reset_refuses_a_dataset_that_has_no_state_unless_new(job_dir: Path) -> None:
    assert cli(RUN, job_dir).returncode == 0
    typo = cli(["state", "reset", "job.yaml", "--dataset", "ordres", "--to", "x.csv=1", "--yes"], job_dir)
    assert typo.returncode == 2 and "no committed state for dataset 'ordres' (did you mean 'orders'? known: clicks, orders)" in typo.stderr
    assert not list((job_dir / "work" / "state" / "t").rglob("ordres*"))  # nothing created for the typo
    created = cli(["state", "reset", "job.yaml", "--dataset", "returns", "--new", "--to", "r.csv=10", "--yes"], job_dir)
    assert created.returncode == 0, created.stderr
    shown = json.loads(cli(["state", "show", "job.yaml", "--json"], job_dir).stdout)
    assert shown["returns"]["watermarks"] == {"r.csv": 10}


def test_an_unwritable_metrics_path_is_refused_before_the_run_and_never_fails_a_committed_run(job_dir: Path) -> None:
    refused = cli([*RUN, "--metrics-json", "job.yaml/metrics.json"], job_dir)  # its parent is a file
    assert refused.returncode == 2 and "--metrics-json job.yaml/metrics.json: cannot write there" in refused.stderr
    assert "Traceback" not in refused.stderr and not (job_dir / "output").exists()  # nothing ran


def test_metrics_that_cannot_be_written_after_the_run_are_one_error_line(tmp_path: Path, capsys) -> None:
    from gobblin_py.cli.output import write_metrics
    from gobblin_py.runtime.runner import JobResult

    (tmp_path / "file").write_text("x")
    result = JobResult(job="t", run_id="r1", succeeded=True, started="2026-11-22T00:00:00+00:00", duration_s=1.0)
    write_metrics(result, tmp_path / "file" / "metrics.json")  # the disk changed under the run: no exception
    assert "could not write the metrics to" in capsys.readouterr().err


def test_state_reset_is_refused_while_a_commit_is_pending(job_dir: Path) -> None:
    assert cli(RUN, job_dir, crash_at="commit.after_store_write").returncode == SIGKILLED
    pending = json.loads(cli(["inspect-commits", "job.yaml", "--json"], job_dir).stdout)[0]["dataset"]
    refused = cli(["state", "reset", "job.yaml", "--dataset", pending, "--yes"], job_dir)
    assert refused.returncode == 1 and "a commit sequence is pending" in refused.stderr


def test_a_killed_run_shows_in_history_and_status_and_the_next_run_records_it_killed(job_dir: Path) -> None:
    """A run SIGKILLed mid-commit leaves a record saying `running` from its start: `history` and `status` (whose lock
    check finds its process gone) show it killed, with its pending commit; the next run rewrites the record so."""
    assert cli(RUN, job_dir, crash_at="commit.after_store_write").returncode == SIGKILLED
    [listed] = json.loads(cli(["history", "list", "job.yaml", "--json"], job_dir).stdout)
    assert listed["status"] == "killed"
    [record] = StateStore(job_dir / "work", "t").runs()
    assert record["status"] == "running"  # what the killed run wrote at its start
    status = cli(["status", "job.yaml", "--json"], job_dir)
    [job] = json.loads(status.stdout)
    assert status.returncode == 1 and job["health"] == "attention" and job["pending"]
    assert job["last_run"]["run_id"] == listed["run_id"] and job["last_run"]["status"] == "killed"
    assert "last run killed" in job["attention"] and "its process ended without finishing it" in job["last_run"]["error"]
    assert cli(RUN, job_dir).returncode == 0
    newest, oldest = json.loads(cli(["history", "list", "job.yaml", "--json"], job_dir).stdout)
    assert (newest["status"], oldest["status"], oldest["run_id"]) == ("succeeded", "killed", listed["run_id"])
    assert f"found by run {newest['run_id']}" in oldest["error"]


def test_history_list_and_show(job_dir: Path) -> None:
    assert cli(RUN, job_dir).returncode == 0
    assert cli(RUN, job_dir).returncode == 0
    listed = json.loads(cli(["history", "list", "job.yaml", "--json"], job_dir).stdout)
    assert [r["status"] for r in listed] == ["succeeded", "succeeded"]
    assert listed[0]["run_id"] > listed[1]["run_id"]  # newest first
    assert sum(d["records_written"] for d in listed[1]["datasets"]) == 2998
    table = cli(["history", "list", "job.yaml", "--limit", "1"], job_dir)
    assert table.stdout.count("succeeded") == 1 and listed[0]["run_id"] in table.stdout
    shown = cli(["history", "show", "job.yaml", listed[1]["run_id"]], job_dir)
    assert shown.returncode == 0 and shown.stdout.count("  task ") == 4 and "dataset orders: committed" in shown.stdout
    assert "None" not in shown.stdout and "[orders-2026-01-02.csv: start → 8324]" in shown.stdout
    one = orjson.loads(cli(["history", "show", "job.yaml", listed[1]["run_id"], "--json"], job_dir).stdout)
    assert len(one["tasks"]) == 4
    assert cli(["history", "show", "job.yaml", "nosuchrun"], job_dir).returncode == 2


def test_retention_keeps_the_last_runs(tmp_path: Path) -> None:
    write_job(tmp_path, example_job(tmp_path, job={"name": "t", "work_dir": str(tmp_path / "work"), "retention_runs": 2}))
    for _ in range(3):
        assert cli(RUN, tmp_path).returncode == 0
    assert len(list((tmp_path / "work" / "state" / "t" / "runs").glob("*.json"))) == 2


def test_metrics_prom_writes_the_text_format_prometheus_reads(job_dir: Path) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    run = cli([*RUN, "--metrics-prom", "prom/gobblin.prom"], job_dir)
    assert run.returncode == 0, run.stderr
    samples = {(s.name, s.labels.get("dataset")): s.value
               for family in text_string_to_metric_families((job_dir / "prom" / "gobblin.prom").read_text())
               for s in family.samples}
    assert samples[("gobblin_py_run_succeeded", None)] == 1
    assert samples[("gobblin_py_dataset_records_written", "clicks")] == 2000
    assert samples[("gobblin_py_dataset_records_rejected", "orders")] == 2
    assert samples[("gobblin_py_dataset_files_published", "orders")] == 5
    assert samples[("gobblin_py_dataset_bytes_written", "clicks")] > 0
    assert samples[("gobblin_py_dataset_commit_failed", "clicks")] == 0
    committed = samples[("gobblin_py_dataset_last_commit_timestamp_seconds", "clicks")]
    again = cli([*RUN, "--metrics-prom", "prom/gobblin.prom"], job_dir)   # no new data: the last commit time stays
    assert again.returncode == 0
    later = {(s.name, s.labels.get("dataset")): s.value
             for family in text_string_to_metric_families((job_dir / "prom" / "gobblin.prom").read_text()) for s in family.samples}
    assert later[("gobblin_py_dataset_last_commit_timestamp_seconds", "clicks")] == committed
    assert later[("gobblin_py_dataset_records_written", "clicks")] == 0


def test_plan_shows_what_a_run_would_extract_and_touches_nothing(job_dir: Path) -> None:
    shown = cli(["plan", "job.yaml", "--json"], job_dir)
    assert shown.returncode == 0, shown.stderr
    view = json.loads(shown.stdout)
    assert view["workunits"] == 4 and view["datasets"] == ["clicks", "orders"] and view["pending_commits"] == []
    keys = sorted(k for t in view["tasks"] for w in t["workunits"] for k in w.get("packed_keys", [w["key"]]))
    assert len(keys) == 10  # every file, the packed ones' too
    assert keys[0] == "clicks-2026-01-01.jsonl" and all(w["low"] is None for t in view["tasks"] for w in t["workunits"])
    assert not (job_dir / "work").exists() and not (job_dir / "output").exists()  # no lock, no state, no output
    assert cli(RUN, job_dir).returncode == 0
    again = cli(["plan", "job.yaml"], job_dir)
    assert again.returncode == 0 and "0 work units in 0 tasks over 0 datasets (nothing to extract)" in again.stdout
