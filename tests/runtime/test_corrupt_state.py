"""A corrupt state file harms only its own dataset: the run blocks it, names the file, and commits the others."""

from __future__ import annotations

import json
from pathlib import Path

from support.jobs import example_job, write_job

from gobblin_py.testing.crash import cli

RUN = ["run", "job.yaml", "--in-process"]


def test_a_corrupt_watermark_file_blocks_only_its_dataset(tmp_path: Path) -> None:
    write_job(tmp_path, example_job(tmp_path))
    assert cli(RUN, tmp_path).returncode == 0
    clicks = tmp_path / "work" / "state" / "t" / "watermarks" / "clicks.json"
    clicks.write_bytes(clicks.read_bytes()[:-7])               # torn by a bad disk or a hand edit
    (tmp_path / "data" / "orders" / "orders-2026-01-09.csv").write_text("id,ts,user,kind\n7001,2026-01-09T10:00:00Z,u,buy\n")
    (tmp_path / "data" / "clicks" / "clicks-2026-01-09.jsonl").write_text('{"id": 9001, "ts": 1767949200000, "user": "u", "kind": "click"}\n')
    run = cli(RUN, tmp_path)
    assert run.returncode == 1
    rows = {line.split()[0]: line.split()[1:4] for line in run.stdout.splitlines()[2:4]}
    assert rows == {"orders": ["committed", "1", "1"], "clicks": ["blocked", "0", "0"]}  # the other dataset goes on
    assert f"clicks: watermark file {clicks} is corrupt" in run.stdout and "state reset" in run.stdout
    assert not list((tmp_path / "output" / "clicks").rglob("*2026-01-09*"))  # nothing extracted for the blocked one
    shown = cli(["state", "show", "job.yaml"], tmp_path)
    assert shown.returncode == 1 and "clicks: unreadable: " in shown.stderr and "orders: run" in shown.stdout
    reset = cli(["state", "reset", "job.yaml", "--dataset", "clicks", "--yes"], tmp_path)  # the documented repair
    assert reset.returncode == 0, reset.stderr
    assert json.loads(cli(["state", "show", "job.yaml", "--json"], tmp_path).stdout)["clicks"]["watermarks"] == {}


def test_a_corrupt_dataset_state_file_is_removed_by_state_reset(tmp_path: Path) -> None:
    """The file of what the source recorded with the positions (identities, stats) torn: `state reset` removes it with
    the watermarks (it used to stop with a NameError), and the next run starts the dataset over."""
    write_job(tmp_path, example_job(tmp_path))
    assert cli(RUN, tmp_path).returncode == 0
    state = next((tmp_path / "work" / "state" / "t").glob("datasets/clicks*"), None) or \
        next(p for p in (tmp_path / "work" / "state" / "t").rglob("*clicks*") if "watermarks" not in p.parts)
    state.write_bytes(state.read_bytes()[:-7])
    reset = cli(["state", "reset", "job.yaml", "--dataset", "clicks", "--yes"], tmp_path)
    assert reset.returncode == 0, reset.stdout + reset.stderr
    assert not state.exists()
    assert cli(RUN, tmp_path).returncode == 0
