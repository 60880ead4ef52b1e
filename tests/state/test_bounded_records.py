"""What a job keeps about its runs stays bounded whatever its size (issue 47: 50,000 small files made a 40 MB run
record that `history` read whole, and an events log that only grew): the run record keeps the detail of at most
`KEPT_TASKS` tasks (every failed one, every one with rejected records, then the slowest) and per-dataset bytes;
the local events log is rotated by size, its rotated files still read, oldest first."""

from __future__ import annotations

import json
from pathlib import Path

from support.jobs import run_cli, write_job

from gobblin_py.runtime.job_result import KEPT_TASKS
from gobblin_py.state.events import EventLog


def test_the_events_log_is_rotated_by_size_and_read_whole(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(EventLog, "ROTATE_BYTES", 2_000)
    log = EventLog(tmp_path, "j")
    names = []
    for run in range(12):
        log.job_started("j", f"run-{run}")
        for i in range(10):
            log.emit("Tick", n=run * 10 + i)
            names.append(run * 10 + i)
    files = sorted(p.name for p in (tmp_path / "events").iterdir())
    assert files == ["j.jsonl", "j.jsonl.1", "j.jsonl.2", "j.jsonl.3"], files
    assert all((tmp_path / "events" / f).stat().st_size < 4_000 for f in files), "each file stays near the bound"
    ticks = [e["metadata"]["n"] for e in EventLog(tmp_path, "j").read() if e["name"] == "Tick"]
    assert ticks == sorted(ticks) and ticks[-1] == names[-1], "kept events read oldest first, the newest among them"
    assert len(ticks) < len(names), "the oldest rotated file was dropped"


def test_a_run_of_many_tasks_keeps_a_bounded_record_that_history_explains(tmp_path: Path) -> None:
    (tmp_path / "data" / "events").mkdir(parents=True)
    for i in range(210):
        (tmp_path / "data" / "events" / f"f{i:03d}.jsonl").write_text(json.dumps({"id": i}) + "\n")
    (tmp_path / "data" / "events" / "f999.jsonl").write_text("{not json\n")  # a rejected record: its task is kept
    (tmp_path / "e.avsc").write_text(json.dumps({"type": "record", "name": "E", "fields": [{"name": "id", "type": "long"}]}))
    write_job(tmp_path, {"job": {"name": "b", "work_dir": str(tmp_path / "work")},
                         "source": {"class": "files", "path": str(tmp_path / "data"), "pack_bytes": 0},  # a task a file
                         "converters": [{"class": "json_to_avro", "schema": str(tmp_path / "e.avsc")}],
                         "writer": {"class": "parquet"}, "publisher": {"final_dir": str(tmp_path / "out")}})
    done = run_cli("run", "job.yaml", "--in-process", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads(next((tmp_path / "work").rglob("runs/*.json")).read_text())
    body = record.get("body", record)
    assert body["tasks_total"] == 211 and len(body["tasks"]) == KEPT_TASKS, (body["tasks_total"], len(body["tasks"]))
    assert any(t["workunit"].startswith("f999") for t in body["tasks"]), "the task with a rejected record is kept"
    assert body["bytes_by_dataset"]["events"] > 0
    shown = run_cli("history", "show", "job.yaml", body["run_id"], cwd=tmp_path)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert f"tasks: 211, the detail of {KEPT_TASKS} kept" in shown.stdout, shown.stdout
