"""A Delta table two hosts commit to (each its own work directory, one `table_uri`): a driver that was killed with a
commit pending, and finds on its return that another host committed the transaction version it pinned, must not
take that commit for its own (it used to: "transaction version ≥ mine" counted the other host's commit, the
watermarks moved past rows the table holds from the other host, and the next run added them twice, both hosts
exiting 0). Its replay fails closed naming the other commit; the table keeps every id once."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from builtin.test_delta_publisher import delta_ids, delta_job, table
from builtin.test_iceberg_publisher import _new_clicks
from support.jobs import write_job

from gobblin_py.state.store import StateStore
from gobblin_py.testing.crash import SIGKILLED, cli

pytestmark = pytest.mark.crash
RUN = ["run", "job.yaml", "--in-process"]


def _host(tmp: Path, name: str, lake: Path) -> Path:
    """A "host": a directory of its own (its work directory and its copy of the input) committing to `lake`."""
    home = tmp / name
    home.mkdir()
    write_job(home, delta_job(home, table_uri=str(lake / "{dataset}")))
    shutil.rmtree(home / "data" / "orders")  # one dataset: the one A's killed run left pending
    return home


def test_a_driver_back_from_a_kill_does_not_take_another_hosts_commit_for_its_own(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    a, b = _host(tmp_path, "a", lake), _host(tmp_path, "b", lake)
    killed = cli(RUN, a, crash_at="commit.after_store_write")  # A's commit record pins transaction version 1
    assert killed.returncode == SIGKILLED, killed.stdout + killed.stderr
    for host in (a, b):
        _new_clicks(host, 900_001, 5)  # new input upstream, which B reads before A is back
    took_over = cli(RUN, b)
    assert took_over.returncode == 0, took_over.stdout + took_over.stderr
    once = delta_ids(table(tmp_path, "clicks"))
    assert once[900_001] == 1 and set(once.values()) == {1}
    marks_before = StateStore(a / "work", "t").watermarks()

    back = cli(RUN, a)  # A is back: its recovery finds transaction version 1 of gobblin-py/t/clicks, committed by B
    said = back.stdout + back.stderr
    assert back.returncode == 1, said
    assert "Traceback" not in said
    assert "another driver of this job" in said and "transaction version 1 of gobblin-py/t/clicks" in said, said
    assert "recover JOB.yaml --dataset clicks --abandon" in said, said
    assert StateStore(a / "work", "t").watermarks() == marks_before, "A's watermarks did not move past B's rows"
    again = cli(RUN, a)  # and a second try changes nothing: still refused, nothing added
    assert again.returncode == 1, again.stdout + again.stderr
    ids = delta_ids(table(tmp_path, "clicks"))
    assert ids == once, f"ids twice: {sorted(i for i, n in ids.items() if n > 1)[:5]}"


def test_the_same_driver_replaying_its_own_commit_still_finds_it_done(tmp_path: Path) -> None:
    """The identity check does not refuse a commit's own replay: killed after the Delta commit, the next run finds it
    by its commit id and moves on."""
    lake = tmp_path / "lake"
    a = _host(tmp_path, "a", lake)
    killed = cli(RUN, a, crash_at="commit.before_record_removal")  # every step done, the Delta commit among them
    assert killed.returncode == SIGKILLED, killed.stdout + killed.stderr
    done = table(tmp_path, "clicks")
    assert done.version() == 1
    again = cli(RUN, a)
    assert again.returncode == 0, again.stdout + again.stderr
    assert table(tmp_path, "clicks").version() == 1 and delta_ids(table(tmp_path, "clicks")) == delta_ids(done)


def test_abandon_refuses_a_commit_whose_watermarks_are_in_but_not_its_state(tmp_path: Path) -> None:
    """Killed after the Delta commit and the watermarks, before the state step (which pins the table's transaction
    version): abandoning used to drop the record, the state stayed at the version before, and every later run was
    refused ("higher than … which this job committed last"). Now the abandon is refused naming `recover`, which
    finishes it, and the next runs go on."""
    lake = tmp_path / "lake"
    a = _host(tmp_path, "a", lake)
    assert cli(RUN, a).returncode == 0
    _new_clicks(a, 900_001, 5)
    killed = cli(RUN, a, crash_at="commit.after_step:3")  # the files, the Delta commit, the watermarks; not the state
    assert killed.returncode == SIGKILLED, killed.stdout + killed.stderr
    refused = cli(["recover", "job.yaml", "--all", "--abandon", "--yes"], a)
    said = refused.stdout + refused.stderr
    assert refused.returncode == 1 and "its watermarks are committed" in said and "recover JOB.yaml --dataset clicks" in said, said
    assert "Traceback" not in said
    _new_clicks(a, 900_101, 5)
    again = cli(RUN, a)
    assert again.returncode == 0, again.stdout + again.stderr
    ids = delta_ids(table(tmp_path, "clicks"))
    assert ids[900_001] == 1 and ids[900_101] == 1 and set(ids.values()) == {1}
