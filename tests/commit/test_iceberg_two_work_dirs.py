"""One Iceberg table (one shared input, catalog and warehouse) committed to by one job from two "hosts", each with
its own work directory: the host whose work directory is behind the table must not commit on its stale watermarks.
It used to: host B committed lines appended to a file, host A (whose offset still stood before them) read them again
with the lines after them, a range of another name, and appended them a second time, both exiting 0. Now the commit
is refused, naming the other driver's commit; the remedy the message gives (`state reset --to` what the table's
snapshots carry) leaves every id there once."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from builtin.test_iceberg_publisher import _new_clicks, iceberg_job, table_ids
from support.jobs import write_job

from gobblin_py.testing.crash import cli

pytestmark = pytest.mark.crash
pytest.importorskip("pyiceberg")
RUN = ["run", "job.yaml", "--in-process"]


def _host(tmp: Path, name: str) -> Path:
    """A "host": its own work directory, on the input, catalog and warehouse under `tmp` that both hosts share."""
    home = tmp / name
    home.mkdir()
    job = iceberg_job(tmp, warehouse=str(tmp / "warehouse"))  # the input under tmp/data, shared as a mount or bucket
    shutil.rmtree(tmp / "data" / "orders", ignore_errors=True)
    job["job"]["work_dir"] = str(home / "work")
    job["source"]["ingest_appended"] = True
    job["publisher"]["catalog"] = {"type": "sql", "uri": f"sqlite:///{tmp / 'catalog.db'}"}
    write_job(home, job)
    return home


def _append(tmp: Path, first_id: int, n: int) -> None:
    """Lines appended to the file `_new_clicks(tmp, 900_001, …)` made (read on from its offset: ingest_appended)."""
    lines = [json.dumps({"id": first_id + i, "ts": 1767657600000 + i, "user": "u1", "kind": "click", "amount": None,
                         "country": "US"}) for i in range(n)]
    with (tmp / "data" / "clicks" / "clicks-new-900001.jsonl").open("a") as f:
        f.write("\n".join(lines) + "\n")


def _clicks(tmp: Path) -> Counter:
    from pyiceberg.catalog import load_catalog

    table = load_catalog("gobblin_py", type="sql", uri=f"sqlite:///{tmp / 'catalog.db'}").load_table("db.clicks")
    return table_ids(table)


def _table_watermarks(tmp: Path) -> dict:
    """The watermarks the job's snapshots of `clicks` carry, merged newest first: what the table holds."""
    from pyiceberg.catalog import load_catalog

    table = load_catalog("gobblin_py", type="sql", uri=f"sqlite:///{tmp / 'catalog.db'}").load_table("db.clicks")
    merged: dict = {}
    for snapshot in sorted(table.snapshots(), key=lambda s: -s.timestamp_ms):
        for key, value in json.loads((snapshot.summary or {}).get("gobblin-py.watermarks") or "{}").items():
            merged.setdefault(key, value)
    return merged


def _ok(home: Path, *args: str) -> str:
    done = cli(list(args) or RUN, home)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def test_a_work_directory_behind_the_table_does_not_commit_what_the_other_committed(tmp_path: Path) -> None:
    a, b = _host(tmp_path, "a"), _host(tmp_path, "b")
    _new_clicks(tmp_path, 900_001, 5)
    _ok(a)
    first = _clicks(tmp_path)
    assert first and set(first.values()) == {1}
    assert "no new data" in _ok(b)  # a new work directory resumes from the table's watermarks
    _append(tmp_path, 900_101, 5)
    _ok(b)  # B commits the appended lines; A's state still stands before them
    once = _clicks(tmp_path)
    assert once == first + Counter(range(900_101, 900_106))
    _append(tmp_path, 900_201, 3)

    back = cli(RUN, a)  # A reads from its own offset: B's lines and the new ones, a range B never committed
    said = back.stdout + back.stderr
    assert back.returncode == 1 and "Traceback" not in said, said
    assert "another driver of this job" in said and "state reset JOB.yaml --dataset clicks --to" in said, said
    assert _clicks(tmp_path) == once, "nothing appended twice"

    to = [a for k, v in _table_watermarks(tmp_path).items() for a in ("--to", f"{k}={v}")]
    _ok(a, "state", "reset", "job.yaml", "--dataset", "clicks", *to, "--yes")  # the remedy the message gives
    _ok(a)  # A is the one driver now: the lines after B's
    assert _clicks(tmp_path) == once + Counter(range(900_201, 900_204))


def test_one_work_directory_goes_on_committing_as_before(tmp_path: Path) -> None:
    a = _host(tmp_path, "a")
    _new_clicks(tmp_path, 900_001, 3)
    _ok(a)
    for n in range(2):
        _append(tmp_path, 900_101 + 100 * n, 3)
        _ok(a)
    ids = _clicks(tmp_path)
    assert set(ids.values()) == {1} and {900_001, 900_101, 900_203} <= set(ids)
